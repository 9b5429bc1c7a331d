import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import MaidianRecording

/// What `maidian bench` measured.
public struct BenchResult: Sendable {
    public var records = 0
    public var events = 0
    /// Decompressed JSON bytes.
    public var jsonBytes = 0
    public var outputMessages = 0
    public var outputBytes = 0
    public var seconds = 0.0
    /// CPU time of the benchmark thread: robust against other load on a shared machine.
    public var cpuSeconds = 0.0
    public var peakRSSBytes = 0

    public var eventsPerSecond: Double { seconds > 0 ? Double(events) / seconds : 0 }
    public var megabytesPerSecond: Double { seconds > 0 ? Double(jsonBytes) / 1_000_000 / seconds : 0 }
    public var eventsPerCPUSecond: Double { cpuSeconds > 0 ? Double(events) / cpuSeconds : 0 }

    /// One JSON object (for `--json`).
    public var json: String {
        "{\"records\":\(records),\"events\":\(events),\"seconds\":\(String(format: "%.4f", seconds)),"
            + "\"events_per_s\":\(Int(eventsPerSecond)),\"cpu_seconds\":\(String(format: "%.4f", cpuSeconds)),\"events_per_cpu_s\":\(Int(eventsPerCPUSecond)),\"mb_per_s\":\(String(format: "%.1f", megabytesPerSecond)),"
            + "\"json_bytes\":\(jsonBytes),\"output_messages\":\(outputMessages),\"output_bytes\":\(outputBytes),"
            + "\"peak_rss_bytes\":\(peakRSSBytes)}"
    }
}

/// Runs a pipeline's stages over a recording from memory, on the calling thread, with Kafka replaced by an
/// in-memory source and sinks that still receive fully serialized outputs.
public enum Bench {
    /// Records as a source would deliver them, with header values already located.
    public struct SourceRecord: Sendable {
        var partition: Int32
        var offset: Int64
        var timestamp: Int64
        var key: [UInt8]?
        var value: [UInt8]
        var ip: [UInt8]?
        var receivedAt: [UInt8]?
        var ua: [UInt8]?
        var project: [UInt8]?
    }

    /// Assigns partitions the way a keyed producer would (stable hash of the key) and offsets in order.
    public static func prepare(_ records: [RecordingRecord], partitions: Int32 = 8) -> [SourceRecord] {
        var nextOffset = [Int64](repeating: 0, count: Int(partitions))
        return records.map { r in
            var p: Int32 = 0
            if let key = r.key {
                var h = Hash64()
                key.withUnsafeBufferPointer { h.add($0.baseAddress!, $0.count) }
                p = Int32(h.value % UInt64(partitions))
            }
            let offset = nextOffset[Int(p)]
            nextOffset[Int(p)] += 1
            func header(_ n: String) -> [UInt8]? { r.headers.first { $0.0 == n }?.1 }
            return SourceRecord(
                partition: p, offset: offset, timestamp: r.timestamp ?? 0, key: r.key, value: r.value,
                ip: header("ip"), receivedAt: header("received_at"), ua: header("ua"), project: header("project"))
        }
    }

    /// Runs the engine over the records in batches of `batchSize`; then `finish`.
    /// `sink` sees every output buffer (tests); the benchmark passes nil.
    public static func run(
        engine: PipelineEngine, records: [SourceRecord], topic: String = "events.raw", batchSize: Int = 1000,
        sink: ((EventBatch, OutputBuffer) -> Void)? = nil
    ) throws -> BenchResult {
        var batch = EventBatch()
        var output = OutputBuffer()
        let topicIndex = batch.topicIndex(topic)
        var result = BenchResult()
        let clock = ContinuousClock()
        let start = clock.now
        let cpuStart = threadCPUTime()
        var i = 0
        while i < records.count {
            batch.reset()
            output.reset()
            let end = min(i + batchSize, records.count)
            for r in i..<end {
                let rec = records[r]
                appendRecord(&batch, topicIndex, rec)
            }
            try engine.process(&batch, output: &output)
            result.outputMessages += output.messages.count
            result.outputBytes += output.bytes.count
            sink?(batch, output)
            i = end
        }
        batch.reset()
        output.reset()
        try engine.finish(output: &output)
        result.outputMessages += output.messages.count
        result.outputBytes += output.bytes.count
        sink?(batch, output)
        let elapsed = clock.now - start
        result.cpuSeconds = threadCPUTime() - cpuStart
        result.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        result.records = engine.decodeCounts.records
        result.events = engine.decodeCounts.events
        result.jsonBytes = engine.decodeCounts.bytes
        result.peakRSSBytes = peakRSS()
        return result
    }

    @inline(__always)
    static func appendRecord(_ batch: inout EventBatch, _ topic: Int32, _ rec: SourceRecord) {
        func opt(_ a: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> Void) {
            if let a { a.withUnsafeBytes { body($0) } } else { body(nil) }
        }
        rec.value.withUnsafeBytes { value in
            opt(rec.key) { key in
                opt(rec.ip) { ip in
                    opt(rec.receivedAt) { rat in
                        opt(rec.ua) { ua in
                            opt(rec.project) { project in
                                batch.appendRecord(
                                    topic: topic, partition: rec.partition, offset: rec.offset, timestamp: rec.timestamp,
                                    key: key, value: value, ip: ip, receivedAt: rat, ua: ua, project: project)
                            }
                        }
                    }
                }
            }
        }
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
