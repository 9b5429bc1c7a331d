import Foundation
import Logging
import XCTest

@testable import MaidianKafka

/// Shared helpers for the Kafka tests (all on the in-process mock cluster).
enum KafkaTestSupport {
    /// A logger that prints warnings and errors to stderr, without bootstrapping swift-log.
    static func logger(_ label: String) -> Logger {
        var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
        // KAFKA_TEST_LOG=debug|info|warning|error shows librdkafka's lines; by default only critical ones.
        let level = ProcessInfo.processInfo.environment["KAFKA_TEST_LOG"].flatMap(Logger.Level.init(rawValue:))
        logger.logLevel = level ?? .critical
        return logger
    }

    static func uniqueName(_ prefix: String) -> String {
        "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())"
    }

    /// Consumer properties for a group member on the mock (short session: rebalances wait for it).
    static func groupConfig(_ broker: EmbeddedBroker, group: String, extra: [String: String] = [:]) -> [String: String] {
        [
            "bootstrap.servers": broker.bootstrapServers,
            "group.id": group,
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "500",
            "fetch.wait.max.ms": "50",
            "topic.metadata.refresh.interval.ms": "1000",
        ].merging(extra) { _, new in new }
    }

    /// Consumer properties for manual assignment (no group join, no 3 s wait).
    static func standaloneConfig(_ broker: EmbeddedBroker) -> [String: String] {
        ["bootstrap.servers": broker.bootstrapServers, "fetch.wait.max.ms": "50", "group.id": uniqueName("standalone")]
    }

    static func producerConfig(_ broker: EmbeddedBroker, extra: [String: String] = [:]) -> [String: String] {
        ["bootstrap.servers": broker.bootstrapServers].merging(extra) { _, new in new }
    }

    /// Closes group members at once, each on a thread of its own as each worker would. One at a time, a member's
    /// close can wait for a rebalance round that needs the others, which nobody polls meanwhile: a cooperative
    /// close hung a CI run. A close still running at the deadline fails the test (and its thread is left).
    static func closeTogether(_ consumers: [KafkaConsumer], within limit: TimeInterval = 60, file: StaticString = #filePath, line: UInt = #line) {
        let done = DispatchSemaphore(value: 0)
        for (i, consumer) in consumers.enumerated() {
            // The test thread does not touch the consumer until the semaphore says the close returned.
            nonisolated(unsafe) let c = consumer
            Thread {
                do { try c.close() } catch { XCTFail("member \(i): \(error)", file: file, line: line) }
                done.signal()
            }.start()
        }
        let deadline = DispatchTime.now() + limit
        for k in consumers.indices where done.wait(timeout: deadline) == .timedOut {
            XCTFail("\(consumers.count - k) of \(consumers.count) members did not close within \(Int(limit)) s", file: file, line: line)
            return
        }
    }

    /// Polls `consumer` until `done()` or the deadline; returns whether `done()` became true.
    @discardableResult
    static func poll(
        _ consumer: KafkaConsumer,
        for limit: Duration,
        until done: () -> Bool,
        _ body: (borrowing KafkaMessage) throws -> Void = { _ in }
    ) throws -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        while !done() {
            if clock.now >= deadline { return false }
            _ = try consumer.poll(maxMessages: 500, timeout: .milliseconds(100), body)
        }
        return true
    }
}

extension UnsafeRawBufferPointer {
    var string: String { String(decoding: self, as: UTF8.self) }
}
