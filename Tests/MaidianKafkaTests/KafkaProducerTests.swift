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

    /// Values sent from a payload (no copy) arrive intact, each reported once; the payload is handed back once,
    /// after the last report and only after `release`.
    func testValuesSentFromAPayloadArriveAndThePayloadIsReleasedAfterTheLastReport() throws {
        let logger = KafkaTestSupport.logger("producer-payload-test")
        let broker = try EmbeddedBroker(logger: logger)
        let topicName = KafkaTestSupport.uniqueName("payload")
        try broker.createTopic(topicName, partitions: 3)
        let producer = try KafkaProducer(config: KafkaTestSupport.producerConfig(broker), logger: logger)

        // Three payloads of 300 values each, some empty; tokens near the largest allowed.
        let base = KafkaProducer.maxToken - 1000
        var expected: [UInt64: String] = [:]
        var reports: [UInt64: Int] = [:]
        var failures: [KafkaError] = []
        var released: [ObjectIdentifier] = []
        var reportsAtRelease: [Int] = []
        producer.onDelivery = { token, error in
            if let error { failures.append(error) }
            reports[token, default: 0] += 1
        }
        producer.onPayloadReleased = { payload in
            released.append(ObjectIdentifier(payload))
            reportsAtRelease.append(reports.values.reduce(0, +))
        }
        let topic = try producer.topic(topicName)
        var payloads: [ProducerPayload] = []
        for p in 0..<3 {
            var bytes: [UInt8] = []
            var ranges: [(Range<Int>, UInt64)] = []
            for i in 0..<300 {
                let token = base + UInt64(p * 300 + i)
                let text = i % 50 == 7 ? "" : "{\"p\":\(p),\"i\":\(i)," + String(repeating: "x", count: i * 7) + "}"
                let start = bytes.count
                bytes += Array(text.utf8)
                ranges.append((start..<bytes.count, token))
                expected[token] = text
            }
            let payload = ProducerPayload(bytes: bytes)
            bytes = []
            for (range, token) in ranges {
                let key = Array("k\(token % 17)".utf8)
                try key.withUnsafeBytes { try producer.produce(topic, key: $0, in: payload, range: range, token: token) }
            }
            payloads.append(payload)
        }
        // Reports may all be in by now: still nothing is released before `release`.
        try producer.flush(timeout: .seconds(20))
        XCTAssertEqual(reports.values.reduce(0, +), 900)
        XCTAssertTrue(released.isEmpty, "released before release()")
        producer.release(payloads[0])
        XCTAssertEqual(released, [ObjectIdentifier(payloads[0])], "released at once when every report is in")

        // A payload released before its reports is handed back after the last one; meanwhile the producer is
        // all that keeps it (and the bytes librdkafka reads) alive.
        do {
            var late: [UInt8] = Array("abc".utf8)
            late += Array("defgh".utf8)
            let payload = ProducerPayload(bytes: late)
            late = []
            try producer.produce(topic, key: UnsafeRawBufferPointer(start: nil, count: 0), in: payload, range: 0..<3, token: 5)
            try producer.produce(topic, key: UnsafeRawBufferPointer(start: nil, count: 0), in: payload, range: 3..<8, token: 6)
            producer.release(payload)
        }
        expected[5] = "abc"
        expected[6] = "defgh"
        XCTAssertEqual(released.count, 1, "not before its reports")
        try producer.flush(timeout: .seconds(20))
        XCTAssertEqual(released.count, 2)
        XCTAssertEqual(reportsAtRelease.last, 902, "after its last report")
        producer.release(payloads[1])
        producer.release(payloads[2])
        XCTAssertEqual(released.count, 4)
        XCTAssertEqual(failures.count, 0, "\(failures.prefix(3))")
        XCTAssertEqual(reports.count, 902)
        XCTAssertTrue(reports.values.allSatisfy { $0 == 1 }, "each token reported exactly once")
        payloads.removeAll()

        // What the broker holds.
        let consumer = try KafkaConsumer(config: KafkaTestSupport.standaloneConfig(broker), logger: logger)
        try consumer.assign(Dictionary(uniqueKeysWithValues: (0..<3).map { (TopicPartition(topic: topicName, partition: Int32($0)), Int64(0)) }))
        var got: [String] = []
        try KafkaTestSupport.poll(consumer, for: .seconds(30), until: { got.count == expected.count }) { got.append($0.value.string) }
        XCTAssertEqual(got.sorted(), expected.values.sorted())
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

