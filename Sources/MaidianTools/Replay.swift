import MaidianEvents
import MaidianRecording

extension Bench {
    /// What ``replay(path:topic:partitions:batchSize:_:)`` read.
    public struct ReplayCounts: Sendable, Equatable {
        /// Records read from the recording.
        public var records = 0
        /// Batches handed to the body.
        public var batches = 0
    }

    /// Streams a recording (wire format §6, `.ndjson` or `.ndjson.zst`) into batches of `batchSize` records,
    /// spread over `partitions` by key as in ``prepare(_:partitions:)``, and hands each filled batch, not yet
    /// decoded, to `body` (which typically runs `PipelineEngine.process` on it). Only one batch of records is
    /// held in memory at a time.
    @discardableResult
    public static func replay(
        path: String, topic: String = "events.raw", partitions: Int32 = 8, batchSize: Int = 1000,
        _ body: (inout EventBatch) throws -> Void
    ) throws -> ReplayCounts {
        precondition(partitions > 0 && batchSize > 0)
        var batch = EventBatch()
        let topicIndex = batch.topicIndex(topic)
        var nextOffset = [Int64](repeating: 0, count: Int(partitions))
        var counts = ReplayCounts()
        func flush() throws {
            guard !batch.records.isEmpty else { return }
            try body(&batch)
            counts.batches += 1
            batch.reset()
        }
        try Recording.forEachRecord(path: path) { r in
            appendRecord(&batch, topicIndex, SourceRecord(r, partitions: partitions, nextOffset: &nextOffset))
            counts.records += 1
            if batch.records.count >= batchSize { try flush() }
        }
        try flush()
        return counts
    }
}
