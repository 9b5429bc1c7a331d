import Foundation
import XCTest

@testable import MaidianKafka

final class KafkaProducerTests: XCTestCase {
    func testProduces1000KeyedMessagesWithOneSuccessfulReportEach() throws {
        let logger = KafkaTestSupport.logger("producer-test")
        let broker = try EmbeddedBroker(logger: logger)
        let topicName = KafkaTestSupport.uniqueName("keyed")
        try broker.createTopic(topicName, partitions: 4)

        let producer = try KafkaProducer(config: KafkaTestSupport.producerConfig(broker), logger: logger)
        var seen = [Int](repeating: 0, count: 1000)
        var failures: [KafkaError] = []
        producer.onDelivery = { token, error in
            if let error { failures.append(error) }
            seen[Int(token)] += 1
        }
        let topic = try producer.topic(topicName)
        XCTAssertTrue(topic === (try producer.topic(topicName)), "topic handles are cached")
        for i in 0..<1000 {
            let key = Array("user-\(i % 37)".utf8)
            let value = Array("{\"n\":\(i)}".utf8)
            try key.withUnsafeBytes { k in
                try value.withUnsafeBytes { v in
                    try producer.produce(topic, key: k, value: v, token: UInt64(i))
                }
            }
            if i % 100 == 0 { producer.poll() }
        }
        try producer.flush(timeout: .seconds(20))
        XCTAssertEqual(producer.outstanding, 0)
        XCTAssertEqual(failures.count, 0, "\(failures.prefix(3))")
        XCTAssertEqual(seen, [Int](repeating: 1, count: 1000), "each token reported exactly once")
        XCTAssertNil(producer.fatalError())
        XCTAssertEqual(try producer.partitionCount(topic: topicName, timeout: .seconds(5)), 4)
    }

    func testNonRetriableProduceErrorReachesOnDelivery() throws {
        let logger = KafkaTestSupport.logger("producer-failure-test")
        let broker = try EmbeddedBroker(logger: logger)
        let topicName = KafkaTestSupport.uniqueName("failing")
        try broker.createTopic(topicName, partitions: 1)
        let producer = try KafkaProducer(config: KafkaTestSupport.producerConfig(broker), logger: logger)
        var reports: [(UInt64, KafkaError?)] = []
        producer.onDelivery = { reports.append(($0, $1)) }

        // Warm up (metadata, producer id) so the pushed error hits the message's Produce request.
        try producer.produce(topicName: topicName, key: [], value: Array("ok".utf8), token: 1)
        try producer.flush(timeout: .seconds(10))
        XCTAssertEqual(reports.count, 1)
        XCTAssertNil(reports.first?.1)

        // 29 = TOPIC_AUTHORIZATION_FAILED: permanent, not retried, not fatal for the idempotent producer.
        broker.pushRequestErrors(apiKey: 0, errors: [29])
        try producer.produce(topicName: topicName, key: Array("k".utf8), value: Array("rejected".utf8), token: 42)
        try producer.flush(timeout: .seconds(10))
        XCTAssertEqual(reports.count, 2)
        let (token, error) = try XCTUnwrap(reports.last)
        XCTAssertEqual(token, 42)
        let failure = try XCTUnwrap(error, "the rejected message must report an error")
        XCTAssertEqual(failure.code, .delivery)
        XCTAssertEqual(failure.rdkafkaCode, 29)
        XCTAssertEqual(failure.rdkafkaName, "TOPIC_AUTHORIZATION_FAILED")
        XCTAssertTrue(failure.message.contains(topicName), failure.message)
        XCTAssertNil(producer.fatalError())
    }

    func testMessageTimeoutWhileBrokerIsDownReachesOnDelivery() throws {
        let logger = KafkaTestSupport.logger("producer-timeout-test")
        let broker = try EmbeddedBroker(logger: logger)
        let topicName = KafkaTestSupport.uniqueName("down")
        try broker.createTopic(topicName, partitions: 1)
        let producer = try KafkaProducer(
            config: KafkaTestSupport.producerConfig(broker, extra: ["message.timeout.ms": "1500"]),
            logger: logger
        )
        var reports: [(UInt64, KafkaError?)] = []
        producer.onDelivery = { reports.append(($0, $1)) }
        try producer.produce(topicName: topicName, key: [], value: Array("ok".utf8), token: 1)
        try producer.flush(timeout: .seconds(10))

        try broker.setBrokerDown(1)
        try producer.produce(topicName: topicName, key: [], value: Array("lost".utf8), token: 7)
        try producer.flush(timeout: .seconds(10))
        XCTAssertEqual(reports.map(\.0), [1, 7])
        let failure = try XCTUnwrap(reports.last?.1)
        XCTAssertEqual(failure.code, .delivery)
        XCTAssertEqual(failure.rdkafkaName, "_MSG_TIMED_OUT")
        try broker.setBrokerUp(1)
    }

    func testFatalErrorSurfaces() throws {
        let logger = KafkaTestSupport.logger("producer-fatal-test")
        let broker = try EmbeddedBroker(logger: logger)
        let producer = try KafkaProducer(config: KafkaTestSupport.producerConfig(broker), logger: logger)
        var errors: [KafkaError] = []
        producer.onError = { errors.append($0) }
        XCTAssertNil(producer.fatalError())
        producer.triggerFatalErrorForTesting("test")
        producer.poll(timeout: .milliseconds(100))
        let fatal = try XCTUnwrap(producer.fatalError())
        XCTAssertEqual(fatal.code, .fatal)
        XCTAssertTrue(errors.contains { $0.code == .fatal }, "\(errors)")
        XCTAssertThrowsError(try producer.produce(topicName: "any", key: [], value: [1], token: 1)) { error in
            XCTAssertEqual((error as? KafkaError)?.code, .fatal, "\(error)")
        }
    }

    /// A sender thread waiting in `poll` for delivery reports learns of new outputs at once, not at the end of
    /// its timeout; a wake with no poll waiting makes the next one return at once.
    func testWakePollEndsAWaitingPollEarly() throws {
        let logger = KafkaTestSupport.logger("producer-wake-test")
        let producer = try KafkaProducer(config: ["bootstrap.servers": "127.0.0.1:1"], logger: logger)
        producer.wakePoll()
        var start = ContinuousClock.now
        producer.poll(timeout: .seconds(10))
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(5), "a wake before the poll")
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let p = producer
        start = ContinuousClock.now
        Thread {
            p.poll(timeout: .seconds(10))
            done.signal()
        }.start()
        Thread.sleep(forTimeInterval: 0.2)
        producer.wakePoll()
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success, "the poll still waits")
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(5))
    }

    /// The worker sizes its outputs from this (issue 13, class 3).
    func testMaxMessageBytesIsTheConfiguredProperty() throws {
        let logger = KafkaTestSupport.logger("producer-test")
        XCTAssertEqual(try KafkaProducer(config: ["bootstrap.servers": "127.0.0.1:1"], logger: logger).maxMessageBytes, 1_000_000)
        let small = try KafkaProducer(config: ["bootstrap.servers": "127.0.0.1:1", "message.max.bytes": "200000"], logger: logger)
        XCTAssertEqual(small.maxMessageBytes, 200_000)
    }

    func testPermanentErrorsOfOneMessageAreTold() {
        for (code, permanent) in [(10, true), (87, true), (2, true), (29, false), (-192, false), (3, false)] as [(Int32, Bool)] {
            XCTAssertEqual(KafkaError(.delivery, "x", rdkafkaCode: code).isPermanentForMessage, permanent, "\(code)")
        }
        XCTAssertFalse(KafkaError(.delivery, "x").isPermanentForMessage)
    }
}
