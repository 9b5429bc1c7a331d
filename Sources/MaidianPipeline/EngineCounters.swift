import MaidianEvents

/// A pipeline engine's counts as relaxed atomics: the worker thread adds once per batch and stage, and
/// anyone (a metrics endpoint) reads them from any thread without stopping the worker.
public final class EngineCounters: Sendable {
    /// The four counts of one stage (or output), in pipeline order.
    public struct Stage: Sendable {
        /// The stage's `kind`.
        public let kind: String
        /// Its index in the pipeline (transform stages, then outputs).
        public let position: Int
        /// Live events the stage was given.
        public let received: StageCounter
        /// Live events it passed on.
        public let emitted: StageCounter
        /// Events it dropped on purpose (duplicates, filtered noise).
        public let dropped: StageCounter
        /// Events it rejected to the dead-letter topic.
        public let failed: StageCounter
        /// Records the stage wrote to its topics.
        public let written: StageCounter

        init(kind: String, position: Int) {
            self.kind = kind
            self.position = position
            received = StageCounter(name: "received")
            emitted = StageCounter(name: "emitted")
            dropped = StageCounter(name: "dropped")
            failed = StageCounter(name: "failed")
            written = StageCounter(name: "written")
        }

        /// A snapshot.
        public var counts: StageCounts {
            var c = StageCounts()
            c.received = received.value
            c.emitted = emitted.value
            c.dropped = dropped.value
            c.failed = failed.value
            c.written = written.value
            return c
        }
    }

    /// Per stage, in pipeline order.
    public let stages: [Stage]
    /// Records decoded.
    public let records = StageCounter(name: "records")
    /// Events found in them.
    public let events = StageCounter(name: "events")
    /// Decoded JSON bytes.
    public let bytes = StageCounter(name: "bytes")
    /// Record headers taken as absent because they were invalid (`EventBatch.invalidHeaders`).
    public let badHeaders = StageCounter(name: "bad_headers")
    /// Rejected records by reason, indexed by `DeadLetterReason.rawValue`.
    public let failedRecords: [StageCounter]
    /// Rejected events by reason (whichever stage rejected them), indexed by `DeadLetterReason.rawValue`.
    public let failedEvents: [StageCounter]
    /// The counters the stages registered, with the registering stage's kind.
    public let stageCounters: [(stage: String, counter: StageCounter)]
    /// The counters of the merger of partial results (`Repartitioning`), if a stage repartitions.
    public let mergeCounters: [StageCounter]
    /// Outputs over the producer's message size, replaced by `too_large` dead letters (issue 13).
    public let outputsTooLarge = StageCounter(name: "outputs_too_large")
    /// Outputs not produced at all: too large with no dead-letter topic, or refused for good by Kafka
    /// (`KafkaError.isPermanentForMessage`, e.g. MSG_SIZE_TOO_LARGE, INVALID_RECORD).
    public let outputsDropped = StageCounter(name: "outputs_dropped")
    /// Dead letters written with only the first 64 KiB of their payload (`"truncated": true`).
    public let deadLettersTruncated = StageCounter(name: "dead_letters_truncated")

    init(kinds: [String], stageCounters: [(stage: String, counter: StageCounter)], mergeCounters: [StageCounter]) {
        stages = kinds.enumerated().map { Stage(kind: $0.element, position: $0.offset) }
        failedRecords = DeadLetterReason.allCases.map { StageCounter(name: "\($0)") }
        failedEvents = DeadLetterReason.allCases.map { StageCounter(name: "\($0)") }
        self.stageCounters = stageCounters
        self.mergeCounters = mergeCounters
    }

    /// A snapshot of the decoding counts.
    public var decodeCounts: DecodeCounts {
        var d = DecodeCounts()
        d.records = records.value
        d.events = events.value
        d.bytes = bytes.value
        d.failedRecords = failedRecords.map(\.value)
        d.failedEvents = failedEvents.map(\.value)
        return d
    }
}
