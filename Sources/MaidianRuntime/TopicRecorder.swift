import Logging
import MaidianKafka
import MaidianRecording

/// Writes what a topic holds into a recording (docs/wire-format.md §6): every partition from its beginning to the
/// end offset it had at the start, with keys, headers and timestamps.
///
/// Order: each partition's records stay in offset order, and the partitions are merged by record timestamp
/// (ties: lower partition, then lower offset), so the recording reads like the traffic that was produced
/// and `--limit N` keeps the first N records in time. Recording a topic that `maidian produce` filled from
/// a recording gives that recording back byte for byte (when each partition's timestamps do not decrease).
///
/// Memory stays bounded: a partition whose buffered records run ahead of the merge is paused.
public enum TopicRecorder {
    /// What was written.
    public struct Summary: Sendable {
        /// Records written.
        public var records: Int
        /// Partitions the topic had when recording started.
        public var partitions: Int
        /// Size of the recording file in bytes (after compression, for `.zst`).
        public var fileBytes: Int
    }

    /// Records `topic` into `path` (zstd-compressed when it ends in `.zst`). Blocks: call from a thread
    /// that may block (a command's main thread, a test).
    ///
    /// - Parameters:
    ///   - limit: Stop after this many records (the first ones in time).
    ///   - kafka: Extra librdkafka consumer properties (security settings, ...).
    ///   - stallTimeout: Give up when no record arrives for this long although some are missing.
    public static func record(
        bootstrap: String, topic: String, to path: String, limit: Int? = nil, kafka: [String: String] = [:],
        stallTimeout: Duration = .seconds(60), logger: Logger
    ) throws -> Summary {
        var config = kafka
        config["bootstrap.servers"] = bootstrap
        config["group.id"] = config["group.id"] ?? "maidian-record"
        config["enable.auto.commit"] = "false"
        let consumer = try KafkaConsumer(config: config, logger: logger)
        defer { try? consumer.close() }

        let count = try consumer.partitionCount(topic: topic, timeout: .seconds(30))
        var ends: [Int32: Int64] = [:]
        for p in 0..<Int32(count) {
            let w = try consumer.watermarks(TopicPartition(topic: topic, partition: p), timeout: .seconds(30))
            if w.high > w.low { ends[p] = w.high }
        }
        logger.info("recording \(topic): \(ends.count) of \(count) partitions hold records, \(ends.values.reduce(0, +)) offsets up to the end")

        let writer = try RecordingWriter(path: path)
        var merge = Merge(ends: ends)
        if !ends.isEmpty {
            try consumer.assign(Dictionary(uniqueKeysWithValues: ends.keys.map { (TopicPartition(topic: topic, partition: $0), KafkaConsumer.beginning) }))
        }
        consumer.onPartitionEOF = { tp, offset in merge.reachedEnd(tp.partition, next: offset) }
        let clock = ContinuousClock()
        var lastProgress = clock.now
        var paused = Set<Int32>()
        let limit = limit ?? Int.max
        while writer.recordCount < limit && !merge.isDone {
            let got = try consumer.poll(maxMessages: 1000, timeout: .milliseconds(200)) { m in
                guard m.offset < (ends[m.partition] ?? 0) else {
                    merge.reachedEnd(m.partition, next: m.offset)
                    return
                }
                var headers: [(String, [UInt8])] = []
                m.forEachHeader { name, value in headers.append((name, Array(value))) }
                let record = RecordingRecord(key: m.hasKey ? Array(m.key) : nil, headers: headers, timestamp: m.timestamp, value: Array(m.value))
                merge.add(record, partition: m.partition, offset: m.offset)
            }
            if got > 0 { lastProgress = clock.now }
            while writer.recordCount < limit, let next = merge.next() { try writer.append(next) }
            // Bounded memory: pause partitions far ahead of the merge, resume them once it caught up.
            let ahead = Set(merge.partitions(bufferingMoreThan: Merge.pauseAbove))
            let toPause = ahead.subtracting(paused)
            let toResume = paused.subtracting(merge.partitions(bufferingMoreThan: Merge.pauseAbove / 2))
            try consumer.pause(toPause.map { TopicPartition(topic: topic, partition: $0) })
            try consumer.resume(toResume.map { TopicPartition(topic: topic, partition: $0) })
            paused.formUnion(toPause)
            paused.subtract(toResume)
            if clock.now - lastProgress > stallTimeout {
                throw KafkaError(.timedOut, "recording \(topic): no record for \(stallTimeout); missing: \(merge.missingDescription)")
            }
        }
        try writer.close()
        return Summary(records: writer.recordCount, partitions: ends.count, fileBytes: writer.fileBytes)
    }

    /// The merge of per-partition record streams by timestamp.
    struct Merge {
        static let pauseAbove = 20_000

        struct Buffered {
            var records: [(record: RecordingRecord, offset: Int64)] = []
            var head = 0
            var count: Int { records.count - head }
        }

        let ends: [Int32: Int64]
        var buffers: [Int32: Buffered] = [:]
        /// Partitions whose every record up to the end was received.
        var complete = Set<Int32>()

        init(ends: [Int32: Int64]) {
            self.ends = ends
        }

        var isDone: Bool { complete.count == ends.count && buffers.values.allSatisfy { $0.count == 0 } }

        mutating func add(_ record: RecordingRecord, partition: Int32, offset: Int64) {
            buffers[partition, default: Buffered()].records.append((record, offset))
            if offset + 1 >= ends[partition] ?? 0 { complete.insert(partition) }
        }

        mutating func reachedEnd(_ partition: Int32, next: Int64) {
            if next >= ends[partition] ?? 0 { complete.insert(partition) }
        }

        /// The next record in merged order, or nil while a partition that may hold an earlier record has
        /// nothing buffered.
        mutating func next() -> RecordingRecord? {
            var best: (p: Int32, ts: Int64, offset: Int64)?
            for p in ends.keys {
                let b = buffers[p] ?? Buffered()
                guard b.count > 0 else {
                    if complete.contains(p) { continue }
                    return nil  // must wait: its next record could come first
                }
                let head = b.records[b.head]
                let ts = head.record.timestamp ?? -1
                if let cur = best, (cur.ts, cur.p) <= (ts, p) { continue }
                best = (p, ts, head.offset)
            }
            guard let best else { return nil }
            var b = buffers.removeValue(forKey: best.p)!
            let record = b.records[b.head].record
            b.head += 1
            if b.head > 4096 && b.head * 2 > b.records.count {
                b.records.removeFirst(b.head)
                b.head = 0
            }
            buffers[best.p] = b
            return record
        }

        func partitions(bufferingMoreThan n: Int) -> [Int32] {
            buffers.filter { $0.value.count > n }.map(\.key)
        }

        var missingDescription: String {
            ends.keys.sorted().filter { !complete.contains($0) }.map { "partition \($0)" }.joined(separator: ", ")
        }
    }
}
