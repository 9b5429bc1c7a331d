import Logging
import MaidianEvents
import MaidianPipeline

/// Merges the partial aggregates that every source partition's holder writes to the internal topic, and
/// writes a `metrics.counts` record per key once every source partition's progress has passed the window:
/// a count covers the whole raw topic whichever workers hold its partitions (wire format §5).
///
/// Late events (wire format §5): a source sends each record's contributions to windows it has closed as late
/// partials named by the record's offset. The merger keeps every written window's partials for
/// `allowed_lateness` behind its watermark, adds late partials to them (one replaces an equal-named one, so a
/// re-read record does not count twice) and writes the changed keys again, with their new totals, at most
/// once per `late_flush`.
///
/// Its state is rebuilt by re-reading its internal partition from `replayFrom`: the oldest partial of a
/// window not yet written or still kept, and the latest progress message of each source partition.
///
/// Window sizes (`window`, `more_windows`): each partial names its size, and each size has its own pending and
/// written keys (the keys of two sizes may be equal text: only the window start is in a key) and its own
/// counts topic. The progress of the sources, and so what is written and what is late, is the same for all.
final class WindowMerger: PartialMerger {
    /// A key's partials so far. The messages are kept as they came (the worker's copies of Kafka's bytes):
    /// their parts are read once, when the window is written.
    struct Pending {
        var windowEnd: Int64
        /// The message whose head the record gets (the key's first partial) and where the head is in it.
        var headMessage: [UInt8]
        var head: Range<Int>
        /// Latest partial per source partition (a re-read source writes the same partial again).
        var parts: [Part] = []
        /// Where the key's first partial is: a takeover re-reads from the oldest of these.
        var first: Position
    }

    /// Where an internal message is in its partition: its record's offset, and its place in the record (a
    /// bundle holds several; any other record is item 0).
    struct Position: Comparable {
        var offset: Int64
        var item: Int32
        static func < (a: Position, b: Position) -> Bool { (a.offset, a.item) < (b.offset, b.item) }
    }

    struct Part {
        var source: Int32
        /// A late partial's record offset; -1 for the source's whole-window partial.
        var lateOffset: Int64
        var message: [UInt8]
        var layout: InternalMessage.PartialLayout
    }

    struct Progress {
        var watermark: Int64
        var idle: Bool
        var at: Position
    }

    /// One window size's keys in one internal partition.
    final class SizeState {
        var pending: [MessageKey: Pending] = [:]
        /// The keys in `pending` by their window end, so that what a watermark completes is found without
        /// walking every pending key.
        var keysByEnd: [Int64: [MessageKey]] = [:]
        /// Written keys of windows within `allowedLateness` of the watermark, for late partials.
        var written: [MessageKey: Pending] = [:]
        var writtenByEnd: [Int64: [MessageKey]] = [:]
        /// The keys of `writtenByEnd`, ascending: the windows a watermark expires are found at the front,
        /// without walking the kept ones (a day of them).
        var writtenEnds: [Int64] = []
        /// Written keys changed by late partials since they were last written.
        var dirty: Set<MessageKey> = []
    }

    /// One internal partition's state; a class so that a message updates it in place.
    final class State {
        /// Per window size (`WindowMerger.sizes` order).
        let sizes: [SizeState]
        var progress: SourceProgress
        /// Windows ending at or before this are written, whatever their size: a partial for one of them is late.
        var writtenUpTo: Int64 = .min
        var lastLateFlush: ContinuousClock.Instant?
        /// Every source has sent its final progress (or the restored mark says so): later partials are copies.
        var ended = false
        /// The warning about partials after the end was logged.
        var warnedAfterEnd = false
        /// The written-up-to mark restored at a takeover: windows up to it are rebuilt from re-read partials.
        var restoredUpTo: Int64 = .min
        /// The restored replay point: items of the bundle at its offset before its item were taken before the
        /// checkpoint, and are skipped when re-read.
        var resumeAt: Position?

        init(sizes: Int, sources: Int32) {
            self.sizes = (0..<sizes).map { _ in SizeState() }
            progress = SourceProgress(sources: sources)
        }
    }

    /// Each size's tag (as its partials name it: 0 for the first size, else its length in ms) and counts topic.
    let sizes: [(tag: Int64, countsTopic: String)]
    let allowedLateness: Int64
    let lateFlush: Duration
    /// Processing time, for `lateFlush` (a frozen clock in offline runs: rewrites at the first change and the end).
    let clock: ProcessingClock
    var sourcePartitions: Int32 = 0
    private var states: [Int32: State] = [:]
    /// Per size, its counts topic's index in the output.
    private var topicIndexes: [Int32] = []
    private let logger: Logger
    /// Whole-window partials for a window already written from a source that had not passed it (an idle
    /// source back): added, and the window written again.
    let latePartials = StageCounter(name: "late_partials")
    /// Copies of partials a source had sent before (re-read after its takeover): left out.
    let partialCopies = StageCounter(name: "partial_copies")
    let windowsWritten = StageCounter(name: "windows_written")
    let windowsRewritten = StageCounter(name: "windows_rewritten")
    let latePartialsApplied = StageCounter(name: "late_partials_applied")
    var counters: [StageCounter] { [latePartials, partialCopies, windowsWritten, windowsRewritten, latePartialsApplied] }

    // Reused while writing a record.
    private var hashes: [UInt64] = []
    private var registers: [UInt8] = []

    /// A merger of one window size.
    convenience init(countsTopic: String, allowedLateness: Int64 = 24 * 3_600_000, lateFlush: Duration = .seconds(10), clock: ProcessingClock = .live,
                     logger: Logger) {
        self.init(sizes: [(0, countsTopic)], allowedLateness: allowedLateness, lateFlush: lateFlush, clock: clock, logger: logger)
    }

    /// A merger of several window sizes: each size's tag and counts topic, the first size's tag 0.
    init(sizes: [(tag: Int64, countsTopic: String)], allowedLateness: Int64 = 24 * 3_600_000, lateFlush: Duration = .seconds(10),
         clock: ProcessingClock = .live, logger: Logger) {
        self.clock = clock
        precondition(!sizes.isEmpty && sizes[0].tag == 0, "the first window size has tag 0")
        self.sizes = sizes
        self.allowedLateness = allowedLateness
        self.lateFlush = lateFlush
        self.logger = logger
    }

    private func state(_ partition: Int32) -> State {
        if let st = states[partition] { return st }
        let st = State(sizes: sizes.count, sources: sourcePartitions)
        states[partition] = st
        return st
    }

    /// The index of the size a partial names; nil for a size the stage does not have (its configuration
    /// changed: the partial is skipped).
    @inline(__always)
    private func sizeIndex(_ tag: Int64) -> Int? {
        if tag == 0 { return 0 }
        return sizes.firstIndex { $0.tag == tag }
    }

    func process(_ records: [InternalRecord], output: inout OutputBuffer) throws {
        // Per internal partition, the record that owns what the batch completes: its first record (or first
        // record after re-read ones). Not the last: the records before it have no outputs of their own, so
        // their offsets could be committed before those outputs are delivered.
        var touched: [Int32: (index: Int32, replay: Bool)] = [:]
        if topicIndexes.isEmpty { topicIndexes = sizes.map { output.topicIndex($0.countsTopic) } }
        // Per internal partition, the first record not re-read: changed written keys are written again as
        // its outputs (never as a re-read record's, whose outputs are not produced: the first run may have
        // written them after the commit point).
        var firstLive: [Int32: Int32] = [:]
        for r in records {
            if !r.replay && firstLive[r.partition] == nil { firstLive[r.partition] = r.index }
            // Re-read records complete nothing (`writeReady`): what the batch completes belongs to its first
            // live record of the partition.
            if !r.replay, touched[r.partition]?.replay == true { touched[r.partition] = (r.index, false) }
            if touched[r.partition] == nil { touched[r.partition] = (r.index, r.replay) }
            let st = state(r.partition)
            guard InternalMessage.isBundle(r.value) else {
                take(key: r.key, value: r.value, at: Position(offset: r.offset, item: 0), of: r, st)
                continue
            }
            let items: [InternalMessage.BundleItem]
            do {
                items = try InternalMessage.bundleItems(r.value)
            } catch {
                logger.error("skipping a malformed internal record at partition \(r.partition) offset \(r.offset): \(error)")
                continue
            }
            for (i, item) in items.enumerated() {
                // Items before a restored replay point were taken before the checkpoint (only re-read records hold them).
                let at = Position(offset: r.offset, item: Int32(i))
                if r.replay, let resume = st.resumeAt, at < resume { continue }
                // Progress items (one per source partition and internal partition each window length of event
                // time: most items of a worker holding many partitions) are read in place; partials are kept, so
                // copied.
                if let p = InternalMessage.progress(in: r.value, item.value) {
                    takeProgress(source: p.source, watermark: p.watermark, idle: p.idle, at: at, st)
                    continue
                }
                take(key: item.key.map { Array(r.value[$0]) } ?? [], value: Array(r.value[item.value]), at: at, of: r, st)
            }
        }
        for (partition, owner) in touched.sorted(by: { $0.key < $1.key }) {
            writeReady(partition: partition, record: owner.index, replay: owner.replay, output: &output)
        }
        let now = clock.now
        for (partition, index) in firstLive.sorted(by: { $0.key < $1.key }) {
            guard let st = states[partition], st.sizes.contains(where: { !$0.dirty.isEmpty }) else { continue }
            // At the end of the input every change is written; else at most once per `late_flush`.
            let ended = watermark(st) == .max
            if !ended, let last = st.lastLateFlush, now - last < lateFlush { continue }
            st.lastLateFlush = now
            rewriteDirty(st, record: index, output: &output)
        }
    }

    /// One internal message (a record's value, or an item of a bundle record) at position `at` of record `r`.
    private func take(key keyBytes: [UInt8], value: [UInt8], at: Position, of r: InternalRecord, _ st: State) {
        let layout: InternalMessage.Layout
        do {
            layout = try InternalMessage.layout(value)
        } catch {
            logger.error("skipping a malformed internal message at partition \(r.partition) offset \(r.offset) (item \(at.item)): \(error)")
            return
        }
        switch layout {
        case .partial(let p):
            let part = Part(source: p.sourcePartition, lateOffset: p.lateOffset, message: value, layout: p)
            // Once every source has ended, a partial is a copy: a source re-read after its own takeover sends
            // its last windows again. Nothing is kept for late partials after the end, so applied to a window
            // rebuilt from a re-read alone (its earlier partials lie before the replay point) it would write
            // that window again with part of its totals.
            if st.ended {
                partialCopies.add()
                if !r.replay && !st.warnedAfterEnd {
                    // Known limitation (docs/recovery.md): a finished internal partition takes nothing more, so a
                    // second bounded run of the group over newer input writes no windowed counts. Said once.
                    st.warnedAfterEnd = true
                    logger.warning("internal partition \(r.partition) received a partial after every source partition had ended: a copy from a source read again, or newer input after a bounded run (--until-end) of this group finished its windows; those are final and newer input is not counted in them: run newer input under a new group (source.group)")
                }
                break
            }
            guard let k = sizeIndex(p.size) else {
                logger.warning("skipping a partial of a window size the stage does not have (\(p.size) ms): \(String(decoding: keyBytes, as: UTF8.self))")
                break
            }
            let sz = st.sizes[k]
            if p.windowEnd <= st.writtenUpTo {
                // A re-read whole-window partial is kept only for a window written before the checkpoint (the
                // re-read rebuilds it source by source): a re-read writes nothing beyond that (`writeReady`).
                if p.lateOffset >= 0 || (r.replay && p.windowEnd <= st.restoredUpTo) {
                    // A late partial, or (re-read) a partial of a window written before the checkpoint: kept
                    // with the written window (a window past the allowed lateness is not kept any more).
                    if keepWithWritten(key: keyBytes, value: value, part, p, at: at, sz, st, rewrite: p.lateOffset >= 0) && p.lateOffset >= 0 {
                        latePartialsApplied.add()
                    }
                    break
                }
                // A source's progress only moves forward here (`take` of a progress message): once it passed the
                // window, it had sent its partial of the window before, and this one is a copy (its new owner
                // re-read it from an earlier commit). Added again it would count twice.
                if let passed = st.progress[p.sourcePartition]?.watermark, passed >= p.windowEnd {
                    partialCopies.add()
                    break
                }
                // The source had not passed the window: it was idle (it stopped holding windows back) and is back.
                // Its events count in their windows like any other (wire format §5): added to the written window,
                // which is written again with its new totals.
                if keepWithWritten(key: keyBytes, value: value, part, p, at: at, sz, st, rewrite: true) { latePartials.add() }
            } else {
                let key = MessageKey(keyBytes)
                // Replaced in place when the key is pending (nil: it is not).
                if sz.pending[key]?.replace(part) == nil {
                    sz.pending[key] = Pending(windowEnd: p.windowEnd, headMessage: value, head: p.head, parts: [part], first: at)
                    sz.keysByEnd[p.windowEnd, default: []].append(key)
                }
            }
        case .progress(let source, let watermark, let idle):
            takeProgress(source: source, watermark: watermark, idle: idle, at: at, st)
        }
    }

    /// A source partition's progress message at position `at`.
    private func takeProgress(source: Int32, watermark: Int64, idle: Bool, at: Position, _ st: State) {
        if let known = st.progress[source], known.watermark > watermark {
            // A source re-read from an earlier commit (a takeover of its own) reports progress it had passed.
            // What it passed stays passed: its partials up to there came before, and a watermark going back
            // would make what is written depend on where batches end (a re-read, whose writes are not
            // produced, could write a window the first run had not). Its position stays that of the message
            // that set it, so that a re-read from the replay point rebuilds it.
            st.progress[source]?.idle = idle
        } else {
            st.progress[source] = Progress(watermark: watermark, idle: idle, at: at)
        }
        // Decided at the record, not at the batch's end, so that a re-read decides the same whatever its batches.
        if watermark == .max && !st.ended { st.ended = self.watermark(st) == .max }
    }

    /// Adds `part` to its written key (created if the window had no such key yet), unless the window is past
    /// the allowed lateness (then false); `rewrite`: the key is written again with its new totals.
    @discardableResult
    private func keepWithWritten(key keyBytes: [UInt8], value: [UInt8], _ part: Part, _ p: InternalMessage.PartialLayout, at: Position,
                                 _ sz: SizeState, _ st: State, rewrite: Bool) -> Bool {
        if let wm = watermark(st), wm != .max, p.windowEnd < saturatingSub(wm, allowedLateness) { return false }
        let key = MessageKey(keyBytes)
        if sz.written[key]?.replace(part) == nil {
            sz.written[key] = Pending(windowEnd: p.windowEnd, headMessage: value, head: p.head, parts: [part], first: at)
            sz.keepWritten(key, end: p.windowEnd)
        }
        if rewrite { sz.dirty.insert(key) }
        return true
    }

    /// Writes the written keys late partials changed again, with their new totals, size by size in key order.
    private func rewriteDirty(_ st: State, record: Int32, output: inout OutputBuffer) {
        for (k, sz) in st.sizes.enumerated() where !sz.dirty.isEmpty {
            let keys = sz.dirty.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
            sz.dirty.removeAll()
            for key in keys {
                guard let w = sz.written[key] else { continue }
                write(key: key.bytes, w, merge(w.parts), topic: topicIndexes[k], record: record, output: &output)
                windowsRewritten.add()
            }
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

    /// Writes the pending windows the watermark passed, as outputs of `record`. `replay`: `record` is re-read,
    /// and its outputs are not produced: only windows written before the checkpoint are written then (the first
    /// run produced them); later ones wait for the first record read live, whose outputs are produced.
    private func writeReady(partition: Int32, record: Int32, replay: Bool, output: inout OutputBuffer) {
        guard let st = states[partition], let wm = watermark(st) else { return }
        let upTo = replay ? min(wm, st.restoredUpTo) : wm
        if upTo > st.writtenUpTo { st.writtenUpTo = upTo }
        for (k, sz) in st.sizes.enumerated() {
            var ready: [MessageKey] = []
            for end in sz.keysByEnd.keys.filter({ $0 <= upTo }) {
                ready += sz.keysByEnd.removeValue(forKey: end)!
            }
            expireWritten(sz, watermark: wm)
            guard !ready.isEmpty else { continue }
            ready.sort { $0.bytes.lexicographicallyPrecedes($1.bytes) }
            for key in ready {
                let pending = sz.pending.removeValue(forKey: key)!
                let merged = merge(pending.parts)
                write(key: key.bytes, pending, merged, topic: topicIndexes[k], record: record, output: &output)
                // Kept for late partials while the window is within the allowed lateness.
                if allowedLateness > 0 && wm != .max {
                    sz.written[key] = retained(pending, merged)
                    sz.keepWritten(key, end: pending.windowEnd)
                }
            }
        }
    }

    /// Forgets written windows further than `allowedLateness` behind the watermark (their late events are too
    /// late at every source).
    private func expireWritten(_ st: SizeState, watermark wm: Int64) {
        let horizon = saturatingSub(wm, allowedLateness)
        var n = 0
        while n < st.writtenEnds.count && st.writtenEnds[n] < horizon { n += 1 }
        guard n > 0 else { return }
        for end in st.writtenEnds[..<n] {
            for key in st.writtenByEnd.removeValue(forKey: end)! where !st.dirty.contains(key) { st.written[key] = nil }
        }
        st.writtenEnds.removeFirst(n)
    }

    /// Writes a key's record from `m`, its partials merged (`merge`): their counts added up, their users and
    /// durations merged.
    private func write(key: [UInt8], _ pending: Pending, _ m: Merged, topic: Int32, record: Int32, output: inout OutputBuffer) {
        let (count, sum, durations, dwell, users) = (m.count, m.sum, m.durations, m.dwell, m.users)
        let keyStart = output.begin()
        output.bytes.append(contentsOf: key)
        let valueStart = output.bytes.count
        output.bytes.append(contentsOf: pending.headMessage[pending.head])
        JSONOut.appendRaw(",\"count\":", to: &output.bytes)
        JSONOut.appendInt(count, to: &output.bytes)
        JSONOut.appendRaw(",\"users\":", to: &output.bytes)
        JSONOut.appendInt(Int64(users), to: &output.bytes)
        if dwell {
            JSONOut.appendRaw(",\"sum_ms\":", to: &output.bytes)
            JSONOut.appendInt(sum, to: &output.bytes)
            JSONOut.appendRaw(",\"avg_ms\":", to: &output.bytes)
            // Rounded to nearest, as (sum + count / 2) / count, without its overflow near Int64.max.
            JSONOut.appendInt(count > 0 ? sum / count + (sum % count >= count - sum % count ? 1 : 0) : 0, to: &output.bytes)
            JSONOut.appendRaw(",\"p50_ms\":", to: &output.bytes)
            JSONOut.appendInt(durations.percentile(0.5), to: &output.bytes)
            JSONOut.appendRaw(",\"p90_ms\":", to: &output.bytes)
            JSONOut.appendInt(durations.percentile(0.9), to: &output.bytes)
        }
        output.bytes.append(0x7D)
        output.finish(topic: topic, record: record, keyStart: keyStart, valueStart: valueStart)
        windowsWritten.add()
    }

    /// What a written key keeps for late partials: its whole-window partials merged into one (a message as a
    /// source would send it, from no source), its late partials as they came (a late partial sent again must
    /// still replace its earlier copy). A written window then costs one partial per key, not one per source.
    /// `merged`: the merge of all of `pending`'s parts, just written, whose users are still in `hashes` or
    /// `registers`: the whole-window partials are not merged a second time unless late ones were among them.
    private func retained(_ pending: Pending, _ merged: Merged) -> Pending {
        var baseCount = 0
        for part in pending.parts where part.lateOffset < 0 { baseCount += 1 }
        guard baseCount > 1 else { return pending }
        let m = baseCount == pending.parts.count ? merged : merge(pending.parts.filter { $0.lateOffset < 0 })
        var message: [UInt8] = []
        pending.headMessage.withByteView { headMessage in
            let head = headMessage[pending.head]
            InternalMessage.encodePartial(sourcePartition: -1, windowEnd: pending.windowEnd, head: head, count: m.count, isDwell: m.dwell,
                                          sumMs: m.sum, durations: m.durations, into: &message) { out in
                if m.sketch {
                    out.append(1)
                    out.append(contentsOf: registers)
                } else {
                    // `merge` left the hashes sorted.
                    out.append(0)
                    out.appendLE(Int32(m.users))
                    for k in hashes.indices where k == 0 || hashes[k] != hashes[k - 1] { out.appendLE(hashes[k]) }
                }
            }
        }
        guard case .partial(let layout)? = try? InternalMessage.layout(message) else { return pending }
        var parts: [Part] = []
        parts.reserveCapacity(1 + pending.parts.count - baseCount)
        parts.append(Part(source: -1, lateOffset: -1, message: message, layout: layout))
        for part in pending.parts where part.lateOffset >= 0 { parts.append(part) }
        return Pending(windowEnd: pending.windowEnd, headMessage: message, head: layout.head, parts: parts, first: pending.first)
    }

    struct Merged {
        var count: Int64 = 0, sum: Int64 = 0
        var durations = DurationDigest()
        var dwell = false
        var sketch = false
        var users = 0
    }

    /// The parts added up: their counts, users (in `hashes`, sorted, while exact; else in `registers`) and
    /// durations, as merging their `UserSet`s and `DurationDigest`s would, without building them per part.
    private func merge(_ parts: [Part]) -> Merged {
        var count: Int64 = 0, sum: Int64 = 0
        var durations = DurationDigest()
        var dwell = false
        var sketch = false
        hashes.removeAll(keepingCapacity: true)
        // In (source, late offset) order; the parts mostly came in it (sources write in turn): sorted only when not.
        @inline(__always) func before(_ a: Part, _ b: Part) -> Bool { (a.source, a.lateOffset) < (b.source, b.lateOffset) }
        var inOrder = true
        for k in parts.indices.dropFirst() where !before(parts[k - 1], parts[k]) { inOrder = false; break }
        for part in inOrder ? parts : parts.sorted(by: before) {
            count = count.saturatingAdd(part.layout.count)
            // The layout was checked when the message arrived: these reads do not fail.
            try? part.layout.readUsers(part.message, sketch: { other in
                if !sketch {
                    sketch = true
                    registers = [UInt8](repeating: 0, count: UserSet.registerCount)
                }
                for k in 0..<UserSet.registerCount where other[k] > registers[k] { registers[k] = other[k] }
            }, hash: { hashes.append($0) })
            if let d = try? part.layout.readDwell(part.message) {
                dwell = true
                sum = sum.saturatingAdd(d.sum)
                durations.merge(d.durations)
            }
        }
        // As `UserSet` would: exact while no partial is a sketch and the union has at most `exactLimit` users.
        var users = 0
        if !sketch {
            hashes.sort()
            for k in hashes.indices where k == 0 || hashes[k] != hashes[k - 1] { users += 1 }
            if users > UserSet.exactLimit {
                sketch = true
                registers = [UInt8](repeating: 0, count: UserSet.registerCount)
            }
        }
        if sketch {
            for h in hashes { UserSet.add(h, to: &registers) }
            users = UserSet.estimate(registers)
        }
        return Merged(count: count, sum: sum, durations: durations, dwell: dwell, sketch: sketch, users: users)
    }

    func replayFrom(partition: Int32) -> (offset: Int64, item: Int32)? {
        guard let st = states[partition] else { return nil }
        var low: Position?
        for sz in st.sizes {
            for p in sz.pending.values where low.map({ p.first < $0 }) ?? true { low = p.first }
            for p in sz.written.values where low.map({ p.first < $0 }) ?? true { low = p.first }
        }
        st.progress.forEach { p in if low.map({ p.at < $0 }) ?? true { low = p.at } }
        return low.map { ($0.offset, $0.item) }
    }

    func writtenUpTo(partition: Int32) -> Int64? {
        guard let w = states[partition]?.writtenUpTo, w != .min else { return nil }
        return w
    }

    func restore(partition: Int32, from point: ReplayPoint) {
        let st = State(sizes: sizes.count, sources: sourcePartitions)
        if let writtenUpTo = point.maxEventTime { st.writtenUpTo = writtenUpTo }
        st.restoredUpTo = st.writtenUpTo
        st.ended = point.maxEventTime == .max
        st.resumeAt = point.item > 0 ? Position(offset: point.offset, item: point.item) : nil
        states[partition] = st
    }

    func isComplete(partition: Int32) -> Bool {
        guard let st = states[partition], sourcePartitions > 0 else { return false }
        guard st.sizes.allSatisfy({ $0.pending.isEmpty && $0.dirty.isEmpty }) else { return false }
        for s in 0..<sourcePartitions {
            guard let p = st.progress[s], p.watermark == .max else { return false }
        }
        return true
    }

    func partitionsRevoked(_ partitions: [Int32]) {
        for p in partitions { states[p] = nil }
    }
}

extension WindowMerger.SizeState {
    /// Notes that a written key of the window ending at `end` is kept.
    func keepWritten(_ key: MessageKey, end: Int64) {
        if writtenByEnd[end] == nil {
            // Windows are mostly written in order: appended; else inserted in place.
            if let last = writtenEnds.last, last > end {
                var lo = 0, hi = writtenEnds.count
                while lo < hi {
                    let mid = (lo + hi) / 2
                    if writtenEnds[mid] < end { lo = mid + 1 } else { hi = mid }
                }
                writtenEnds.insert(end, at: lo)
            } else {
                writtenEnds.append(end)
            }
        }
        writtenByEnd[end, default: []].append(key)
    }
}

extension WindowMerger.Pending {
    /// A source's newer partial takes the place of its earlier one (a late partial: of the one of the same
    /// record).
    mutating func replace(_ part: WindowMerger.Part) {
        if let k = parts.firstIndex(where: { $0.source == part.source && $0.lateOffset == part.lateOffset }) { parts[k] = part } else { parts.append(part) }
    }
}

/// Each source partition's latest progress in one internal partition's state. The watermark is the lowest over
/// every source partition, taken for each internal partition a batch touched: with a hash look-up per source that
/// grew with the square of the partitions a worker holds (128 source partitions: a quarter of a merge). The
/// partitions the raw topic had when the state was made are kept in an array indexed by partition; any other
/// (the topic grew meanwhile, or a hostile record names a partition it does not have) in a dictionary, so that
/// no partition number sizes memory.
struct SourceProgress {
    private var dense: [WindowMerger.Progress?]
    private var sparse: [Int32: WindowMerger.Progress] = [:]

    init(sources: Int32) { dense = Array(repeating: nil, count: Int(max(0, sources))) }

    subscript(source: Int32) -> WindowMerger.Progress? {
        get { source >= 0 && Int(source) < dense.count ? dense[Int(source)] : sparse[source] }
        set {
            if source >= 0 && Int(source) < dense.count { dense[Int(source)] = newValue } else { sparse[source] = newValue }
        }
    }

    /// Calls `body` with every source partition's progress (in no promised order).
    func forEach(_ body: (WindowMerger.Progress) -> Void) {
        for p in dense { if let p { body(p) } }
        for p in sparse.values { body(p) }
    }
}

/// An internal record's key, hashed once with `Hash64` (a `[UInt8]` key would be hashed byte by byte on
/// every look-up).
struct MessageKey: Hashable {
    let bytes: [UInt8]
    let hash: UInt64

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        hash = bytes.withByteView { $0.hash }
    }

    static func == (a: MessageKey, b: MessageKey) -> Bool { a.hash == b.hash && a.bytes == b.bytes }
    func hash(into hasher: inout Hasher) { hasher.combine(hash) }
}
