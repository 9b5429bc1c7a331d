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

    /// Errors pushed onto one broker reach only the requests that broker receives: a producer writing to a
    /// topic led by another broker is not touched (tests aim Produce errors at a worker's outputs this way).
    func testErrorsPushedOntoOneBrokerReachOnlyItsRequests() throws {
        let logger = KafkaTestSupport.logger("broker-errors-test")
        let broker = try EmbeddedBroker(brokers: 2, logger: logger)
        try broker.createTopic("on1", partitions: 1)
        try broker.createTopic("on2", partitions: 1)
        try broker.setPartitionLeader(topic: "on1", partition: 0, brokerId: 1)
        try broker.setPartitionLeader(topic: "on2", partition: 0, brokerId: 2)
        let producer = try KafkaProducer(config: KafkaTestSupport.producerConfig(broker), logger: logger)
        var reports: [UInt64: KafkaError?] = [:]
        producer.onDelivery = { reports[$0] = $1 }
        // Warm up both leaders (metadata, producer id) so the pushed error meets the next message's request.
        for (token, topic) in [(UInt64(1), "on1"), (2, "on2")] { try producer.produce(topicName: topic, key: [], value: [1], token: token) }
        try producer.flush(timeout: .seconds(10))
        XCTAssertEqual(reports.count, 2)

        // 29 = TOPIC_AUTHORIZATION_FAILED: permanent, so the delivery report shows which request met it.
        try broker.pushRequestErrors(apiKey: 0, errors: [29], brokerId: 2)
        try producer.produce(topicName: "on1", key: [], value: [2], token: 3)
        try producer.flush(timeout: .seconds(10))
        XCTAssertEqual(reports[3].map { $0 == nil }, true, "broker 1 answers as usual")
        try producer.produce(topicName: "on2", key: [], value: [3], token: 4)
        try producer.flush(timeout: .seconds(10))
        XCTAssertEqual(reports[4]??.rdkafkaCode, 29, "broker 2 answers with the pushed error")
        XCTAssertThrowsError(try broker.pushRequestErrors(apiKey: 0, errors: [6], brokerId: 9), "no broker 9")
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
