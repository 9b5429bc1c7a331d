import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import MaidianRecording

/// What `maidian bench` measured.
public struct BenchResult: Sendable {
    /// Input records decoded.
    public var records = 0
    /// Events decoded from them, rejected ones included.
    public var events = 0
    /// Decompressed JSON bytes.
    public var jsonBytes = 0
    /// Output messages written, to every topic.
    public var outputMessages = 0
    /// Key and value bytes of those messages.
    public var outputBytes = 0
    /// Of `outputMessages`: written by a merger of partial aggregates (`metrics.counts`).
    public var mergedMessages = 0
    /// Wall time of the merges, when the engine measures its stages' times.
    public var mergeTime: Duration = .zero
    /// Wall time of the run, seconds (loading the recording excluded).
    public var seconds = 0.0
    /// CPU time of the benchmark thread and its decode helpers: robust against other load on a shared machine.
    public var cpuSeconds = 0.0
    /// Peak resident set size of the process at the end, bytes (VmHWM; 0 where unknown).
    public var peakRSSBytes = 0

    /// Events per wall-clock second; 0 when nothing was timed.
    public var eventsPerSecond: Double { seconds > 0 ? Double(events) / seconds : 0 }
    /// Decompressed JSON megabytes (10^6 bytes) per wall-clock second.
    public var megabytesPerSecond: Double { seconds > 0 ? Double(jsonBytes) / 1_000_000 / seconds : 0 }
    /// Events per CPU second: the figure that holds up on a shared machine.
    public var eventsPerCPUSecond: Double { cpuSeconds > 0 ? Double(events) / cpuSeconds : 0 }

    /// One JSON object (for `--json`).
    public var json: String {
        "{\"records\":\(records),\"events\":\(events),\"seconds\":\(String(format: "%.4f", seconds)),"
            + "\"events_per_s\":\(Int(eventsPerSecond)),\"cpu_seconds\":\(String(format: "%.4f", cpuSeconds)),\"events_per_cpu_s\":\(Int(eventsPerCPUSecond)),\"mb_per_s\":\(String(format: "%.1f", megabytesPerSecond)),"
            + "\"json_bytes\":\(jsonBytes),\"output_messages\":\(outputMessages),\"merged_messages\":\(mergedMessages),\"output_bytes\":\(outputBytes),"
            + "\"peak_rss_bytes\":\(peakRSSBytes)}"
    }
}

/// Runs a pipeline's stages over a recording from memory, on the calling thread, with Kafka replaced by an
/// in-memory source and sinks that still receive fully serialized outputs.
public enum Bench {
    /// Records as a source would deliver them: all their bytes in one arena, header values already located,
    /// so that feeding a batch costs what copying a polled message costs and no reference counting.
    public struct Source: Sendable {
        struct Record: Sendable {
            var partition: Int32
            var offset: Int64
            var timestamp: Int64
            var key: Span
            var value: Span
            var ip: Span
            var receivedAt: Span
            var ua: Span
            var project: Span
        }
        var bytes: [UInt8] = []
        var records: [Record] = []
        /// Partitions the records were spread over.
        public internal(set) var partitions: Int32 = 1
        /// Number of records.
        public var count: Int { records.count }
    }

    /// Assigns partitions the way a keyed producer would (stable hash of the key) and offsets in order; fewer
    /// than one partition counts as one.
    public static func prepare(_ records: [RecordingRecord], partitions: Int32 = 8) -> Source {
        let partitions = max(1, partitions)
        var nextOffset = [Int64](repeating: 0, count: Int(partitions))
        var source = Source()
        source.partitions = partitions
        source.records.reserveCapacity(records.count)
        func add(_ b: [UInt8]?) -> Span {
            guard let b else { return .absent }
            let start = source.bytes.count
            source.bytes.append(contentsOf: b)
            return Span(start, source.bytes.count)
        }
        for r in records {
            var p: Int32 = 0
            if let key = r.key {
                var h = Hash64()
                key.withUnsafeBufferPointer { h.add($0.baseAddress!, $0.count) }
                p = Int32(h.value % UInt64(partitions))
            }
            let offset = nextOffset[Int(p)]
            nextOffset[Int(p)] += 1
            func header(_ n: String) -> [UInt8]? { r.headers.first { $0.0 == n }?.1 }
            source.records.append(Source.Record(
                partition: p, offset: offset, timestamp: r.timestamp ?? 0, key: add(r.key), value: add(r.value),
                ip: add(header("ip")), receivedAt: add(header("received_at")), ua: add(header("ua")), project: add(header("project"))))
        }
        return source
    }

    /// Runs the engine over the records in batches of `batchSize`; then `finish`.
    /// With `merge`, a stage's partial aggregates go through its merger after each batch, as in a worker that
    /// holds every internal partition, so that the merge is timed and its records (`metrics.counts`) counted.
    /// `sink` sees every output buffer (tests), and with `merge` the merger's after each batch's; the
    /// benchmark passes nil. `internalPartitions`: the internal topic's partitions (nil: as many as the source's).
    public static func run(
        engine: PipelineEngine, records source: Source, topic: String = "events.raw", batchSize: Int = 1000,
        merge: Bool = false, internalPartitions: Int32? = nil, sink: ((EventBatch, OutputBuffer) -> Void)? = nil
    ) throws -> BenchResult {
        var batch = EventBatch()
        var output = OutputBuffer()
        // Records past the batch bound (`source.limits.max_batch_bytes`), processed as the next batch.
        var rest = EventBatch()
        let topicIndex = batch.topicIndex(topic)
        var result = BenchResult()
        // Wired as a worker wires it, by default with as many internal partitions as source partitions (what
        // `maidian run` creates on an embedded broker), whether or not the partials are merged here.
        var merging: PartialsRouting?
        if let r = engine.repartitioning {
            let name = r.partialsTopic ?? PipelineSpec.defaultPartialsTopic(group: engine.spec.source.group)
            r.connect(partialsTopic: name, partialsPartitions: internalPartitions ?? source.partitions, sourcePartitions: source.partitions)
            if merge { merging = PartialsRouting(merger: r.merger, name: name, measure: engine.measureTime) }
        }
        let clock = ContinuousClock()
        let start = clock.now
        let cpuStart = threadCPUTime()
        let helperCPUStart = engine.decoder.helperCPUSeconds
        try source.bytes.withUnsafeBytes { arena in
            try source.records.withUnsafeBufferPointer { recs in
                func bytes(_ s: Span) -> UnsafeRawBufferPointer? {
                    s.isPresent ? UnsafeRawBufferPointer(rebasing: arena[Int(s.start)..<Int(s.end)]) : nil
                }
                var i = 0
                while i < recs.count {
                    batch.reset()
                    output.reset()
                    let end = min(i + batchSize, recs.count)
                    for r in i..<end {
                        let rec = recs[r]
                        batch.appendRecord(
                            topic: topicIndex, partition: rec.partition, offset: rec.offset, timestamp: rec.timestamp,
                            key: bytes(rec.key), value: bytes(rec.value)!, ip: bytes(rec.ip), receivedAt: bytes(rec.receivedAt),
                            ua: bytes(rec.ua), project: bytes(rec.project))
                    }
                    while true {
                        try engine.process(&batch, output: &output, rest: &rest)
                        // As a worker does before producing: outputs the producer would refuse become dead letters.
                        _ = OutputWriter.divertOversized(&output) { OutputWriter.source(record: $0, in: batch) }
                        result.outputMessages += output.messages.count
                        result.outputBytes += output.bytes.count
                        sink?(batch, output)
                        try merging?.merge(output, into: &result, sink: sink.map { s in { s(batch, $0) } })
                        if rest.records.isEmpty { break }
                        batch.reset()
                        output.reset()
                        rest.moveRecords(from: 0, to: &batch)
                        rest.reset()
                    }
                    i = end
                }
            }
        }
        batch.reset()
        output.reset()
        try engine.finish(output: &output)
        result.outputMessages += output.messages.count
        result.outputBytes += output.bytes.count
        sink?(batch, output)
        try merging?.merge(output, into: &result, sink: sink.map { s in { s(batch, $0) } })
        let elapsed = clock.now - start
        // The decode helpers' CPU time too (`--decode-threads`): the figure stays CPU per event, not per thread.
        result.cpuSeconds = threadCPUTime() - cpuStart + (engine.decoder.helperCPUSeconds - helperCPUStart)
        result.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        result.records = engine.decodeCounts.records
        result.events = engine.decodeCounts.events
        result.jsonBytes = engine.decodeCounts.bytes
        result.peakRSSBytes = peakRSS()
        return result
    }

    /// A digest of every output message (topic name, key, value, in order) of one untimed run: two builds
    /// that print the same digest for the same pipeline and recording wrote the same outputs.
    ///
    /// With `merge`, the internal topic's messages are left out: the merged `metrics.counts` records they
    /// make are in the digest, and how partials are packed into internal records is Maidian's own business
    /// (a change of that packing keeps the digest).
    public static func outputDigest(engine: PipelineEngine, records: Source, topic: String = "events.raw", batchSize: Int = 1000, merge: Bool = false,
                                    internalPartitions: Int32? = nil) throws -> UInt64 {
        var h = Hash64()
        let internalTopic = merge ? engine.repartitioning.map { $0.partialsTopic ?? PipelineSpec.defaultPartialsTopic(group: engine.spec.source.group) } : nil
        _ = try run(engine: engine, records: records, topic: topic, batchSize: batchSize, merge: merge, internalPartitions: internalPartitions) { _, out in
            out.bytes.withUnsafeBufferPointer { b in
                for m in out.messages {
                    var name = out.topics[Int(m.topic)]
                    if name == internalTopic { continue }
                    name.withUTF8 { h.add($0.baseAddress!, $0.count) }
                    for span in [m.key, m.value] {
                        if span.isPresent { h.add(b.baseAddress! + Int(span.start), span.count) } else { h.add(UInt64.max) }
                    }
                }
            }
        }
        return h.value
    }

    /// CPU time of the calling thread, seconds.
    static func threadCPUTime() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Peak resident set size of this process (VmHWM), bytes; 0 where unknown.
    public static func peakRSS() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let digits = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            return digits * 1024
        }
        return 0
    }
}

/// What a worker does with the internal topic, without Kafka: the partials a batch wrote are read back in
/// order, per internal partition, and handed to the merger.
struct PartialsRouting {
    let merger: any PartialMerger
    let name: String
    var topic: Int32 = -1
    var nextOffset: [Int32: Int64] = [:]
    var records: [InternalRecord] = []
    var output = OutputBuffer()
    let measure: Bool

    init(merger: any PartialMerger, name: String, measure: Bool) {
        self.merger = merger
        self.name = name
        self.measure = measure
    }

    mutating func merge(_ produced: OutputBuffer, into result: inout BenchResult, sink: ((OutputBuffer) -> Void)?) throws {
        if topic < 0 {
            guard let t = produced.topics.firstIndex(of: name) else { return }
            topic = Int32(t)
        }
        records.removeAll(keepingCapacity: true)
        produced.bytes.withUnsafeBufferPointer { b in
            func copy(_ s: Span) -> [UInt8] { s.isPresent ? Array(b[Int(s.start)..<Int(s.end)]) : [] }
            for m in produced.messages where m.topic == topic {
                let offset = nextOffset[m.partition, default: 0]
                nextOffset[m.partition] = offset + 1
                records.append(InternalRecord(
                    partition: m.partition, offset: offset, key: copy(m.key), value: copy(m.value), index: Int32(records.count)))
            }
        }
        guard !records.isEmpty else { return }
        output.reset()
        let start = measure ? ContinuousClock.now : nil
        try merger.process(records, output: &output)
        if let start { result.mergeTime += ContinuousClock.now - start }
        result.outputMessages += output.messages.count
        result.outputBytes += output.bytes.count
        result.mergedMessages += output.messages.count
        sink?(output)
    }
}
