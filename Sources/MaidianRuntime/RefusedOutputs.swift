import Logging
import MaidianEvents
import MaidianKafka
import MaidianPipeline

/// Outputs Kafka refused for good (`KafkaError.isPermanentForMessage`), in a delivery report or when
/// produced. Those refused for their size wait here for a `too_large` dead letter (wire format §1); every
/// refusal is counted and logged, sampled.
///
/// Not thread-safe: the sender thread keeps refusals and the worker takes them, both under `OutputSender`'s
/// lock (`withLedger`).
final class RefusedOutputs {
    /// A refused output kept for its dead letter: its first bytes and why.
    struct Kept {
        var token: UInt64
        var topic: String
        var head: [UInt8]
        var detail: String
    }

    /// Counts outputs not produced at all.
    let dropped: StageCounter
    let logger: Logger
    /// Kept outputs whose dead letter is not produced yet.
    private(set) var waiting: [Kept] = []
    /// The token `keep` kept last, until its delivery report reaches `refusedForGood`.
    private var lastKept: UInt64?
    /// Outputs refused for good so far.
    private(set) var count = 0

    init(dropped: StageCounter, logger: Logger) {
        self.dropped = dropped
        self.logger = logger
    }

    /// A delivery report refused an output for good (before it reaches `refusedForGood`): unless it is a dead
    /// letter itself (`deadLetterTopic`: the dead-letter topic's name as produced, nil without one), its first
    /// bytes are kept for a `too_large` dead letter. Returns whether it was kept: then its record waits for
    /// one more output.
    func keep(token: UInt64, error: KafkaError, topic: String, value: UnsafeRawBufferPointer, deadLetterTopic: String?) -> Bool {
        // Only refusals for size are `too_large`; an invalid record is counted and skipped.
        let sizeCodes: [Int32] = [10, 18, 4]  // MSG_SIZE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_MSG_SIZE
        guard let deadLetterTopic, let code = error.rdkafkaCode, sizeCodes.contains(code), topic != deadLetterTopic else { return false }
        lastKept = token
        waiting.append(Kept(
            token: token, topic: topic, head: Array(value.prefix(OutputBuffer.truncatedPayloadBytes + 4)),
            detail: "Kafka refused the \(topic) record of \(value.count) bytes: \(error.rdkafkaName ?? "\(error.code)")"))
        return true
    }

    /// The kept outputs, for their dead letters; clears them.
    func takeWaiting() -> [Kept] {
        defer { waiting.removeAll() }
        return waiting
    }

    /// An output refused for good: counted (as dropped unless `keep` kept it just before, for its `token`)
    /// and logged; its input offset may still be committed.
    func refusedForGood(_ error: KafkaError, token: UInt64? = nil) {
        let deadLettered = token != nil && token == lastKept
        if deadLettered { lastKept = nil } else { dropped.add(1) }
        count += 1
        // The first ones, then one in a thousand: a topic whose limit is below the producer's would flood the log.
        if count <= 10 || count % 1000 == 0 {
            logger.error("an output was refused for good", metadata: [
                "error": "\(error)", "dead_lettered": "\(deadLettered)", "refused_so_far": "\(count)",
            ])
        }
    }
}
