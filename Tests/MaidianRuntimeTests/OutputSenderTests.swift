import Foundation
import Logging
import MaidianEvents
import MaidianKafka
import MaidianPipeline
import XCTest

@testable import MaidianRuntime

/// The sender thread produces what the worker hands it, in order, and counts delivery reports down in the
/// tracker: offsets move only over delivered outputs, a failed delivery holds them back, and a produce error
/// stops the sender and reaches the worker. On librdkafka's mock cluster.
final class OutputSenderTests: XCTestCase {
    let logger = Logger(label: "sender-tests") { _ in SwiftLogNoOpLogHandler() }
    let p0 = Slot(lane: .source, partition: 0)

    /// A broker with a one-partition topic, a producer on it and a sender.
    func setUp(extra: [String: String] = [:]) throws -> (EmbeddedBroker, String, KafkaProducer, OutputSender, StageCounter) {
        let broker = try EmbeddedBroker(logger: logger)
        let topic = "out-\(UUID().uuidString.prefix(8).lowercased())"
        try broker.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(config: ["bootstrap.servers": broker.bootstrapServers].merging(extra) { _, new in new }, logger: logger)
        let dropped = StageCounter(name: "outputs_dropped")
        return (broker, topic, producer, OutputSender(producer: producer, dropped: dropped, logger: logger), dropped)
    }

    /// Outputs with these values, all to topic index 0.
    func outputs(_ values: [String]) -> ([UInt8], [OutputMessage]) {
        var out = OutputBuffer()
        for v in values {
            let start = out.begin()
            out.bytes += Array(v.utf8)
            out.finish(topic: 0, record: 0, keyStart: start, valueStart: start, hasKey: false)
        }
        return (out.bytes, out.messages)
    }

    /// Every value in `topic`, in order.
    func read(_ broker: EmbeddedBroker, _ topic: String, count: Int) throws -> [String] {
        let consumer = try KafkaConsumer(
            config: ["bootstrap.servers": broker.bootstrapServers, "group.id": "reader-\(UUID().uuidString.prefix(8))", "fetch.wait.max.ms": "50"],
            logger: logger)
        try consumer.assign([TopicPartition(topic: topic, partition: 0): KafkaConsumer.beginning])
        var values: [String] = []
        let deadline = ContinuousClock.now + .seconds(20)
        while values.count < count && ContinuousClock.now < deadline {
            _ = try consumer.poll(maxMessages: 100, timeout: .milliseconds(100)) { values.append(String(decoding: $0.value, as: UTF8.self)) }
        }
        try consumer.close()
        return values
    }

    func testProducesWhatIsSentInOrderSkipsReplayedOutputsAndCountsDeliveriesDown() throws {
        let (broker, topic, _, sender, _) = try setUp()
        defer { sender.stop() }
        // Record 10 has two outputs and a third that is not produced (re-read), record 11 one output.
        let (a, b) = sender.withLedger { tracker, _ in
            (tracker.add(partition: p0, offset: 10, outputs: 2), tracker.add(partition: p0, offset: 11, outputs: 1))
        }
        var (bytes, messages) = outputs(["one", "replayed", "two"])
        var tokens = [a, OutputSender.skip, a]
        sender.send(bytes: &bytes, messages: &messages, tokens: &tokens, topics: [topic])
        XCTAssertTrue(bytes.isEmpty && messages.isEmpty && tokens.isEmpty, "the arrays moved to the sender")
        (bytes, messages) = outputs(["three"])
        tokens = [b]
        sender.send(bytes: &bytes, messages: &messages, tokens: &tokens, topics: [topic])
        try sender.flush(timeout: .seconds(20))
        let advanced = sender.withLedger { tracker, _ in
            tracker.advance()
            return (tracker.takeAdvanced(), tracker.isIdle)
        }
        XCTAssertEqual(advanced.0, [p0: 12])
        XCTAssertTrue(advanced.1)
        XCTAssertEqual(try read(broker, topic, count: 3), ["one", "two", "three"])
        XCTAssertNil(sender.failure)
        XCTAssertGreaterThan(sender.stop(), .zero, "the sender thread's CPU time")
    }

    /// `push` sends what was handed over without waiting for `linger.ms` (the final partials of a bounded run,
    /// which the worker's own merger waits to read back) and without the worker waiting for the deliveries;
    /// offsets still move only over delivered outputs.
    func testAPushSendsWithoutLingeringAndWithoutWaiting() throws {
        // Linger far longer than the test may take: only the push can get the output out in time.
        let (broker, topic, _, sender, _) = try setUp(extra: ["linger.ms": "60000"])
        defer { sender.stop() }
        let token = sender.withLedger { t, _ in t.add(partition: p0, offset: 3, outputs: 1) }
        var (bytes, messages) = outputs(["partial"])
        var tokens = [token]
        sender.send(bytes: &bytes, messages: &messages, tokens: &tokens, topics: [topic])
        let start = ContinuousClock.now
        sender.push()
        XCTAssertLessThan(ContinuousClock.now - start, .milliseconds(500), "push returns without waiting for the delivery")
        var advanced: [Slot: Int64] = [:]
        while advanced.isEmpty && ContinuousClock.now - start < .seconds(20) {
            Thread.sleep(forTimeInterval: 0.01)
            advanced = sender.withLedger { t, _ in
                t.advance()
                return t.takeAdvanced()
            }
        }
        XCTAssertEqual(advanced, [p0: 4], "delivered once pushed")
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(10), "well before linger.ms")
        XCTAssertEqual(try read(broker, topic, count: 1), ["partial"])
        XCTAssertNil(sender.failure)
    }

    func testAFailedDeliveryHoldsBackTheOffsetAndIsTold() throws {
        let (broker, topic, _, sender, _) = try setUp()
        defer { sender.stop() }
        // Warm up (metadata, producer id) so that the pushed error hits the next Produce request.
        let warm = sender.withLedger { t, _ in t.add(partition: p0, offset: 0, outputs: 1) }
        var (bytes, messages) = outputs(["warm"])
        var tokens = [warm]
        sender.send(bytes: &bytes, messages: &messages, tokens: &tokens, topics: [topic])
        try sender.flush(timeout: .seconds(20))
        // 29 = TOPIC_AUTHORIZATION_FAILED: not retried, not permanent for the message alone.
        broker.pushRequestErrors(apiKey: 0, errors: [29])
        let failing = sender.withLedger { t, _ in t.add(partition: p0, offset: 1, outputs: 1) }
        (bytes, messages) = outputs(["refused"])
        tokens = [failing]
        sender.send(bytes: &bytes, messages: &messages, tokens: &tokens, topics: [topic])
        try sender.flush(timeout: .seconds(20))
        let (advanced, failure) = sender.withLedger { t, _ in
            t.advance()
            return (t.takeAdvanced(), t.firstFailure)
        }
        XCTAssertEqual(advanced, [p0: 1], "only the delivered record")
        XCTAssertTrue(failure?.contains("TOPIC_AUTHORIZATION_FAILED") ?? false, "\(failure ?? "no failure")")
    }

    func testAnOutputRefusedForGoodWhenProducedIsCountedAndDoesNotHoldTheOffset() throws {
        let (_, topic, _, sender, dropped) = try setUp(extra: ["message.max.bytes": "10000"])
        defer { sender.stop() }
        let token = sender.withLedger { t, _ in t.add(partition: p0, offset: 5, outputs: 1) }
        var (bytes, messages) = outputs([String(repeating: "x", count: 20_000)])
        var tokens = [token]
        sender.send(bytes: &bytes, messages: &messages, tokens: &tokens, topics: [topic])
        try sender.flush(timeout: .seconds(20))
        let advanced = sender.withLedger { t, _ in
            t.advance()
            return t.takeAdvanced()
        }
        XCTAssertEqual(advanced, [p0: 6])
        XCTAssertEqual(dropped.value, 1)
        XCTAssertNil(sender.failure)
    }

    func testAProduceErrorStopsTheSenderAndReachesTheWorker() throws {
        let (_, topic, producer, sender, _) = try setUp()
        defer { sender.stop() }
        producer.triggerFatalErrorForTesting("test")
        let token = sender.withLedger { t, _ in t.add(partition: p0, offset: 0, outputs: 1) }
        var (bytes, messages) = outputs(["after the fatal error"])
        var tokens = [token]
        sender.send(bytes: &bytes, messages: &messages, tokens: &tokens, topics: [topic])
        XCTAssertThrowsError(try sender.flush(timeout: .seconds(20)))
        let failure = try XCTUnwrap(sender.failure as? RuntimeError)
        XCTAssertEqual(failure.code, .fatal)
        let advanced = sender.withLedger { t, _ in
            t.advance()
            return t.takeAdvanced()
        }
        XCTAssertEqual(advanced, [:])
    }
}
