import Logging
import MaidianEvents
import MaidianKafka
import MaidianPipeline
import XCTest

@testable import MaidianRuntime

/// Outputs refused for good: those refused for their size wait for a dead letter (not counted as dropped),
/// the others are counted as dropped; a dead letter refused itself is not dead-lettered again.
final class RefusedOutputsTests: XCTestCase {
    let logger = Logger(label: "refused-tests") { _ in SwiftLogNoOpLogHandler() }
    let tooLarge = KafkaError(.delivery, "too large", rdkafkaCode: 10)  // MSG_SIZE_TOO_LARGE
    let invalid = KafkaError(.delivery, "invalid record", rdkafkaCode: 87)  // INVALID_RECORD

    func keep(_ r: RefusedOutputs, token: UInt64, error: KafkaError, topic: String, bytes: Int, deadLetters: String? = "events.dlq") -> Bool {
        let value = [UInt8](repeating: 0x41, count: bytes)
        return value.withUnsafeBytes { r.keep(token: token, error: error, topic: topic, value: $0, deadLetterTopic: deadLetters) }
    }

    func testOnlySizeRefusalsOfOtherTopicsWaitForADeadLetter() {
        let dropped = StageCounter(name: "outputs_dropped")
        let r = RefusedOutputs(dropped: dropped, logger: logger)
        XCTAssertTrue(keep(r, token: 7, error: tooLarge, topic: "events.enriched", bytes: 100_000))
        XCTAssertFalse(keep(r, token: 8, error: invalid, topic: "events.enriched", bytes: 10), "not a size refusal")
        XCTAssertFalse(keep(r, token: 9, error: tooLarge, topic: "events.dlq", bytes: 100_000), "a dead letter is not dead-lettered again")
        XCTAssertFalse(keep(r, token: 10, error: tooLarge, topic: "events.enriched", bytes: 100_000, deadLetters: nil), "no dead-letter topic")
        XCTAssertEqual(r.waiting.map(\.token), [7])
        XCTAssertEqual(r.waiting.first?.head.count, OutputBuffer.truncatedPayloadBytes + 4, "only the first bytes are kept")
        XCTAssertTrue(r.waiting.first?.detail.contains("100000 bytes") ?? false)
        XCTAssertEqual(r.takeWaiting().count, 1)
        XCTAssertTrue(r.waiting.isEmpty)
    }

    func testAKeptOutputIsNotCountedAsDropped() {
        let dropped = StageCounter(name: "outputs_dropped")
        let r = RefusedOutputs(dropped: dropped, logger: logger)
        _ = keep(r, token: 7, error: tooLarge, topic: "events.enriched", bytes: 100_000)
        r.refusedForGood(tooLarge, token: 7)
        XCTAssertEqual(dropped.value, 0, "dead-lettered")
        r.refusedForGood(invalid, token: 8)
        r.refusedForGood(invalid)
        XCTAssertEqual(dropped.value, 2)
        XCTAssertEqual(r.count, 3)
    }
}
