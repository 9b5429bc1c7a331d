import Logging
import MaidianEvents
import MaidianPipeline

/// Merges the partial aggregates that every source partition's holder writes to the internal topic, and
/// writes a `metrics.counts` record per key once every source partition's progress has passed the window:
/// a count covers the whole raw topic whichever workers hold its partitions (SPEC section 5).
///
/// Its state is rebuilt by re-reading its internal partition from `replayFrom`: the oldest partial of a
/// window not yet written and the latest progress message of each source partition.
final class WindowMerger: PartialMerger {
    struct Pending {
        var windowEnd: Int64
        var head: [UInt8]
        /// Latest partial per source partition (a re-read source writes the same partial again).
        var parts: [Int32: PartialAggregate] = [:]
        var firstOffset: Int64
    }

    struct Progress {
        var watermark: Int64
        var idle: Bool
        var offset: Int64
    }

    struct State {
        var pending: [[UInt8]: Pending] = [:]
        var progress: [Int32: Progress] = [:]
        /// Windows ending at or before this are written: a partial for one of them is late.
        var writtenUpTo: Int64 = .min
    }

    let countsTopic: String
    var sourcePartitions: Int32 = 0
    private var states: [Int32: State] = [:]
    private var topicIndex: Int32 = -1
    private let logger: Logger
    let latePartials = StageCounter(name: "late_partials")
    let windowsWritten = StageCounter(name: "windows_written")
    var counters: [StageCounter] { [latePartials, windowsWritten] }

    init(countsTopic: String, logger: Logger) {
        self.countsTopic = countsTopic
        self.logger = logger
    }

    func process(_ records: [InternalRecord], output: inout OutputBuffer) throws {
        // Per internal partition, the record that owns what the batch completes: its first record (or first
        // record after re-read ones). Not the last: the records before it have no outputs of their own, so
        // their offsets could be committed before those outputs are delivered.
        var touched: [Int32: Int32] = [:]
        if topicIndex < 0 { topicIndex = output.topicIndex(countsTopic) }
        var lastReplay: [Int32: Int32] = [:]
        for r in records {
            // What re-read records complete is written (and not produced again) before later records count.
            if !r.replay, let last = lastReplay.removeValue(forKey: r.partition) {
                writeReady(partition: r.partition, record: last, output: &output)
                touched[r.partition] = r.index
            }
            if r.replay { lastReplay[r.partition] = r.index }
            if touched[r.partition] == nil { touched[r.partition] = r.index }
            let message: InternalMessage
            do {
                message = try InternalMessage.decode(r.value)
            } catch {
                logger.error("skipping a malformed internal record at partition \(r.partition) offset \(r.offset): \(error)")
                continue
            }
            var st = states[r.partition] ?? State()
            switch message {
            case .partial(let p):
                if p.windowEnd <= st.writtenUpTo {
                    if r.replay { break }  // re-read: this window was written before the checkpoint
                    latePartials.add()
                    logger.warning("partial for a window already written (source partition \(p.sourcePartition) was idle?): \(String(decoding: r.key, as: UTF8.self))")
                } else {
                    var pending = st.pending[r.key] ?? Pending(windowEnd: p.windowEnd, head: p.head, firstOffset: r.offset)
                    pending.parts[p.sourcePartition] = p
                    st.pending[r.key] = pending
                }
            case .progress(let source, let watermark, let idle):
                st.progress[source] = Progress(watermark: watermark, idle: idle, offset: r.offset)
            }
            states[r.partition] = st
        }
        for (partition, index) in touched.sorted(by: { $0.key < $1.key }) {
            writeReady(partition: partition, record: index, output: &output)
        }
    }

    /// The lowest progress over the source partitions that hold windows back; nil while one has not reported.
    /// When every source partition is idle, the lowest of them all: an idle partition's open windows are not
    /// written yet (they come with its next progress), so nothing beyond every partition's progress is final.
    private func watermark(_ st: State) -> Int64? {
        var low = Int64.max
        var lowIdle = Int64.max
        var active = 0
        for s in 0..<sourcePartitions {
            guard let p = st.progress[s] else { return nil }
            if p.idle {
                // A partition idle since it was assigned (no event time yet) holds nothing back.
                if p.watermark != .min { lowIdle = min(lowIdle, p.watermark) }
                continue
            }
            active += 1
            low = min(low, p.watermark)
        }
        return active == 0 ? (lowIdle == .max ? .min : lowIdle) : low
    }

    private func writeReady(partition: Int32, record: Int32, output: inout OutputBuffer) {
        guard var st = states[partition], let wm = watermark(st) else { return }
        if wm > st.writtenUpTo { st.writtenUpTo = wm }
        let ready = st.pending.filter { $0.value.windowEnd <= wm }.keys.sorted { $0.lexicographicallyPrecedes($1) }
        for key in ready {
            write(key: key, st.pending[key]!, record: record, output: &output)
            st.pending[key] = nil
        }
        states[partition] = st
    }

    private func write(key: [UInt8], _ pending: Pending, record: Int32, output: inout OutputBuffer) {
        var count: Int64 = 0, sum: Int64 = 0
        var users = UserSet()
        var durations = DurationDigest()
        var dwell = false
        for s in pending.parts.keys.sorted() {
            let p = pending.parts[s]!
            count += p.count
            users.merge(p.users)
            if p.isDwell {
                dwell = true
                sum += p.sumMs
                durations.merge(p.durations)
            }
        }
        let keyStart = output.begin()
        output.bytes.append(contentsOf: key)
        let valueStart = output.bytes.count
        output.bytes.append(contentsOf: pending.head)
        JSONOut.appendRaw(",\"count\":", to: &output.bytes)
        JSONOut.appendInt(count, to: &output.bytes)
        JSONOut.appendRaw(",\"users\":", to: &output.bytes)
        JSONOut.appendInt(Int64(users.count), to: &output.bytes)
        if dwell {
            JSONOut.appendRaw(",\"sum_ms\":", to: &output.bytes)
            JSONOut.appendInt(sum, to: &output.bytes)
            JSONOut.appendRaw(",\"avg_ms\":", to: &output.bytes)
            JSONOut.appendInt(count > 0 ? (sum + count / 2) / count : 0, to: &output.bytes)
            JSONOut.appendRaw(",\"p50_ms\":", to: &output.bytes)
            JSONOut.appendInt(durations.percentile(0.5), to: &output.bytes)
            JSONOut.appendRaw(",\"p90_ms\":", to: &output.bytes)
            JSONOut.appendInt(durations.percentile(0.9), to: &output.bytes)
        }
        output.bytes.append(0x7D)
        output.finish(topic: topicIndex, record: record, keyStart: keyStart, valueStart: valueStart)
        windowsWritten.add()
    }

    func replayFrom(partition: Int32) -> Int64? {
        guard let st = states[partition] else { return nil }
        var low = Int64.max
        for p in st.pending.values { low = min(low, p.firstOffset) }
        for p in st.progress.values { low = min(low, p.offset) }
        return low == .max ? nil : low
    }

    func writtenUpTo(partition: Int32) -> Int64? {
        guard let w = states[partition]?.writtenUpTo, w != .min else { return nil }
        return w
    }

    func restore(partition: Int32, writtenUpTo: Int64?) {
        var st = State()
        if let writtenUpTo { st.writtenUpTo = writtenUpTo }
        states[partition] = st
    }

    func isComplete(partition: Int32) -> Bool {
        guard let st = states[partition], sourcePartitions > 0 else { return false }
        guard st.pending.isEmpty else { return false }
        for s in 0..<sourcePartitions {
            guard let p = st.progress[s], p.watermark == .max else { return false }
        }
        return true
    }

    func partitionsRevoked(_ partitions: [Int32]) {
        for p in partitions { states[p] = nil }
    }
}
