import XCTest

@testable import MaidianKafka

final class EmbeddedBrokerTests: XCTestCase {
    func testStartsAndCreatesTopicsWithTheirPartitionCounts() throws {
        let logger = KafkaTestSupport.logger("broker-test")
        let broker = try EmbeddedBroker(logger: logger)
        XCTAssertFalse(broker.bootstrapServers.isEmpty)
        XCTAssertTrue(broker.bootstrapServers.contains("127.0.0.1:"), broker.bootstrapServers)

        try broker.createTopic("three", partitions: 3)
        try broker.createTopic("seven", partitions: 7)
        let consumer = try KafkaConsumer(config: KafkaTestSupport.standaloneConfig(broker), logger: logger)
        XCTAssertEqual(try consumer.partitionCount(topic: "three", timeout: .seconds(5)), 3)
        XCTAssertEqual(try consumer.partitionCount(topic: "seven", timeout: .seconds(5)), 7)
        try consumer.close()
        XCTAssertThrowsError(try consumer.partitionCount(topic: "three", timeout: .seconds(1))) { error in
            XCTAssertEqual((error as? KafkaError)?.code, .state)
        }
    }

    func testFaultInjectionAcrossThreeBrokers() throws {
        let logger = KafkaTestSupport.logger("broker-faults-test")
        let broker = try EmbeddedBroker(brokers: 3, logger: logger)
        XCTAssertEqual(broker.bootstrapServers.split(separator: ",").count, 3)
        try broker.createTopic("t", partitions: 2, replicationFactor: 3)
        try broker.setPartitionLeader(topic: "t", partition: 0, brokerId: 2)
        try broker.setCoordinator(.group, key: "g", brokerId: 3)
        try broker.setBrokerRTT(1, milliseconds: 5)
        try broker.setBrokerDown(3)
        try broker.setBrokerUp(3)
        broker.pushRequestErrors(apiKey: 0, errors: [6])  // NOT_LEADER_FOR_PARTITION
        broker.clearRequestErrors(apiKey: 0)

        // Leadership moved to broker 2 and the cluster still serves produce requests.
        let producer = try KafkaProducer(config: KafkaTestSupport.producerConfig(broker), logger: logger)
        var errors: [KafkaError?] = []
        producer.onDelivery = { errors.append($1) }
        try producer.produce(topicName: "t", partition: 0, key: [], value: [1, 2, 3], token: 0)
        try producer.flush(timeout: .seconds(10))
        XCTAssertEqual(errors.count, 1)
        XCTAssertNil(errors.first ?? nil)
    }

    func testCreatingAnExistingTopicFails() throws {
        let broker = try EmbeddedBroker(logger: KafkaTestSupport.logger("broker-dup-test"))
        try broker.createTopic("dup", partitions: 1)
        XCTAssertThrowsError(try broker.createTopic("dup", partitions: 1)) { error in
            XCTAssertTrue("\(error)".contains("dup"), "\(error)")
        }
    }

    func testRejectedConfigurationThrowsConfigError() throws {
        let logger = KafkaTestSupport.logger("config-test")
        XCTAssertThrowsError(try KafkaProducer(config: ["no.such.property": "1"], logger: logger)) { error in
            XCTAssertEqual((error as? KafkaError)?.code, .config)
            XCTAssertTrue("\(error)".contains("no.such.property"), "\(error)")
        }
        XCTAssertThrowsError(try KafkaConsumer(config: ["bootstrap.servers": "127.0.0.1:1"], logger: logger)) { error in
            XCTAssertEqual((error as? KafkaError)?.code, .config)
            XCTAssertTrue("\(error)".contains("group.id"), "\(error)")
        }
    }

    func testVersion() {
        XCTAssertTrue(KafkaVersion.string.hasPrefix("2."), KafkaVersion.string)
        XCTAssertGreaterThan(KafkaVersion.number, 0x0200_0000)
    }
}
