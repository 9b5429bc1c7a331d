import Logging
import MaidianEvents

/// What one stage did, counted by the engine.
public struct StageCounts: Sendable, Equatable {
    /// Live events the stage was given.
    public var received: Int = 0
    /// Live events it passed on.
    public var emitted: Int = 0
    /// Events it dropped on purpose (duplicates, filtered noise).
    public var dropped: Int = 0
    /// Events it rejected to the dead-letter topic.
    public var failed: Int = 0
    /// Records it wrote to its topics (an output's records, the windows stage's counts): what an output did,
    /// where `received` and `emitted` say only which live events passed it.
    public var written: Int = 0
    /// All counts at 0.
    public init() {}
}

/// Counts of the decoding step (records rather than events).
public struct DecodeCounts: Sendable, Equatable {
    /// Input records decoded, rejected ones included.
    public var records: Int = 0
    /// Events decoded from the records, rejected ones included.
    public var events: Int = 0
    /// Decompressed JSON bytes of the records that decoded.
    public var bytes: Int = 0
    /// Rejected records by reason (`DeadLetterReason.rawValue`).
    public var failedRecords: [Int] = Array(repeating: 0, count: DeadLetterReason.allCases.count)
    /// Rejected events by reason, whichever stage rejected them.
    public var failedEvents: [Int] = Array(repeating: 0, count: DeadLetterReason.allCases.count)
    /// All counts at 0.
    public init() {}
}

/// Runs a pipeline's stages over batches: decode, then each stage in order, then the outputs.
/// Not thread-safe: one engine per worker thread.
public final class PipelineEngine {
    /// The pipeline the engine was built from.
    public let spec: PipelineSpec
    /// Turns each batch's records into events before the stages run (one per engine: it owns a zstd context).
    public let decoder: RecordDecoder
    /// Stages then outputs, in pipeline order.
    public let stages: [any Stage]
    /// Each stage's and output's `kind`, in the order of `stages`.
    public let stageNames: [String]
    /// The counts below as atomics, readable from other threads (metrics).
    public let live: EngineCounters
    /// What each stage did so far, in pipeline order.
    public var counts: [StageCounts] { live.stages.map(\.counts) }
    /// What decoding did so far.
    public var decodeCounts: DecodeCounts { live.decodeCounts }
    /// The counters stages registered, with the kind of the stage that owns each.
    public var counters: [(stage: String, counter: StageCounter)] { live.stageCounters }
    let logger: Logger
    /// Per-reason tallies of one batch (reused), added to `live` once per batch.
    private var reasonTally = [Int](repeating: 0, count: DeadLetterReason.allCases.count)
    /// Measure the time each stage takes (benchmarks): two clock reads per stage and batch.
    public var measureTime = false
    /// Time spent per stage (with `measureTime`), and decoding.
    public private(set) var stageTime: [Duration] = []
    /// Time spent decoding (with `measureTime`).
    public private(set) var decodeTime: Duration = .zero

    /// The largest `stateHorizon` of the stages: 0 when no stage keeps state across batches.
    public let stateHorizon: Int64
    /// Event-time clocks of the source partitions, for replay points.
    private var clocks: [Int32: PartitionClock] = [:]
    /// The stage that repartitions through an internal topic, if any.
    public var repartitioning: (any Repartitioning)? { stages.lazy.compactMap { $0 as? any Repartitioning }.first }

    /// A stage's error without location (a file it names cannot be read: `cannot read '.../rules.yaml'`)
    /// gets the location of the stage's value it mentions (`rules: rules.yaml`), else of its `kind:`.
    static func locate(_ error: PipelineError, in stage: StageSpec) -> PipelineError {
        guard error.location == nil else { return error }
        var e = error
        let mentioned = (stage.node.entries ?? []).filter { entry in
            guard let text = entry.value.string, text.count >= 3 else { return false }
            return error.message.contains(text)
        }
        e.location = mentioned.max { $0.value.string!.count < $1.value.string!.count }?.value.location ?? stage.kindLocation
        return e
    }

    /// Builds every stage of the spec. Errors carry the stage's YAML location. `clock`: where the stages read
    /// processing time (`ProcessingClock.frozen()` for offline runs over a recording).
    public init(spec: PipelineSpec, registry: StageRegistry, logger: Logger, clock: ProcessingClock = .live) throws {
        self.spec = spec
        self.logger = logger
        self.decoder = RecordDecoder(limits: spec.source.limits, threads: spec.source.decodeThreads)
        var stages: [any Stage] = []
        var names: [String] = []
        /// The specs of `stages`, in step.
        var built: [StageSpec] = []
        var counters: [(String, StageCounter)] = []
        let all = spec.stages + spec.outputs
        var errors: [PipelineError] = []
        for (i, s) in all.enumerated() {
            guard let factory = registry.factory(for: s.kind) else {
                errors.append(PipelineError(
                    code: .unknownKind, message: "unknown stage kind '\(s.kind)'", location: s.kindLocation,
                    hint: PipelineError.suggestion(for: s.kind, among: registry.order)))
                continue
            }
            var stageLogger = logger
            stageLogger[metadataKey: "stage"] = "\(s.kind)"
            let context = StageContext(logger: stageLogger, baseDirectory: spec.baseDirectory, position: "\(i)", roles: spec.roles, clock: clock)
            do {
                let stage = try factory.build(s.node, context: context)
                // One internal topic and one merger per pipeline: a second repartitioning stage would run but
                // its partials would never be merged (issue 15). Several window sizes are one `windows` stage's.
                if stage is any Repartitioning, let first = stages.firstIndex(where: { $0 is any Repartitioning }) {
                    let firstAt = built[first].kindLocation
                    let hint = s.kind == "windows" && names[first] == "windows"
                        ? "for several window sizes, list the further sizes under 'more_windows' of the first 'windows' stage (line \(firstAt.line)), e.g. 'more_windows: [{window: 1h, counts_topic: metrics.counts.hourly}]'"
                        : "use one stage"
                    errors.append(PipelineError(
                        code: .invalid, message: "a second '\(s.kind)' stage: only one stage merges across workers (the first is '\(names[first])')",
                        location: s.kindLocation, hint: hint))
                }
                stages.append(stage)
                built.append(s)
                names.append(s.kind)
                for c in context.counters { counters.append((s.kind, c)) }
            } catch let e as PipelineError {
                errors.append(Self.locate(e, in: s))
            } catch let e as PipelineErrors {
                errors.append(contentsOf: e.errors.map { Self.locate($0, in: s) })
            } catch {
                errors.append(Self.locate(
                    PipelineError(code: .invalid, message: "stage '\(s.kind)': \(error)", underlying: error), in: s))
            }
        }
        if errors.count == 1 { throw errors[0] }
        if !errors.isEmpty { throw PipelineErrors(errors) }
        self.stages = stages
        self.stageNames = names
        self.live = EngineCounters(
            kinds: names, stageCounters: counters,
            mergeCounters: stages.lazy.compactMap { ($0 as? any Repartitioning)?.merger.counters }.first ?? [])
        self.stateHorizon = stages.map(\.stateHorizon).max() ?? 0
    }

    /// Decodes the batch's records and runs every stage and output over it. When the records would pass
    /// `source.limits.max_batch_bytes` once decoded, the batch is cut after the record that reaches it: the
    /// records after it are moved to the end of `rest` (bytes included), for the caller to process next.
    public func process(_ batch: inout EventBatch, output: inout OutputBuffer, rest: inout EventBatch) throws {
        try process(&batch, output: &output, bounded: true) { batch, first in batch.moveRecords(from: first, to: &rest) }
    }

    /// Decodes the batch's records and runs every stage and output over it, however many bytes they decode to
    /// (tests and tools with inputs they trust; a worker bounds its batches with `process(_:output:rest:)`).
    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        try process(&batch, output: &output, bounded: false) { _, _ in }
    }

    private func process(_ batch: inout EventBatch, output: inout OutputBuffer, bounded: Bool, cut: (inout EventBatch, Int) -> Void) throws {
        let firstNew = batch.eventCount
        let clock = ContinuousClock()
        var t0 = clock.now
        if stageTime.count != stages.count { stageTime = Array(repeating: .zero, count: stages.count) }
        if bounded {
            let done = decoder.decodeAll(&batch)
            if done < batch.records.count { cut(&batch, done) }
        } else {
            let budget = decoder.limits.maxBatchBytes
            decoder.limits.maxBatchBytes = .max
            defer { decoder.limits.maxBatchBytes = budget }
            decoder.decodeAll(&batch)
        }
        if measureTime {
            let t = clock.now
            decodeTime += t - t0
            t0 = t
        }
        live.records.add(batch.records.count)
        var bytes = 0
        for r in batch.records {
            if r.status == .failed { reasonTally[Int(r.reason.rawValue)] += 1 }
            if r.json.isPresent { bytes += r.json.count }
        }
        addTally(to: live.failedRecords)
        live.events.add(batch.eventCount - firstNew)
        live.bytes.add(bytes)
        if batch.invalidHeaders > 0 { live.badHeaders.add(batch.invalidHeaders) }

        var (alive, dropped, failed) = statusCounts(batch)
        for (i, stage) in stages.enumerated() {
            let messages = output.messages.count
            try stage.process(&batch, output: &output)
            if measureTime {
                let t = clock.now
                stageTime[i] += t - t0
                t0 = t
            }
            let (l, d, f) = statusCounts(batch)
            let c = live.stages[i]
            c.received.add(alive)
            c.emitted.add(l)
            c.dropped.add(d - dropped)
            c.failed.add(f - failed)
            c.written.add(output.messages.count - messages)
            alive = l; dropped = d; failed = f
        }
        if failed > 0 {
            batch.withView { v in
                for i in 0..<v.eventCount where v.event(i).status == .failed { reasonTally[Int(v.event(i).reason.rawValue)] += 1 }
            }
            addTally(to: live.failedEvents)
        }
        if stateHorizon > 0 { advanceClocks(batch) }
    }

    /// Adds the batch's per-reason tallies to `counters` and clears them.
    private func addTally(to counters: [StageCounter]) {
        for i in reasonTally.indices where reasonTally[i] != 0 {
            counters[i].add(reasonTally[i])
            reasonTally[i] = 0
        }
    }

    /// Per partition of the batch: the last record's offset and the newest live event time.
    private func advanceClocks(_ batch: borrowing EventBatch) {
        // A batch holds a few partitions, its records in runs of one: a short list, looked up again only where
        // the partition changes (two dictionaries per batch cost about 1% of the whole job before).
        seen.removeAll(keepingCapacity: true)
        var k = -1
        batch.withView { v in
            for r in batch.records where r.status != .dropped {
                if k < 0 || seen[k].partition != r.partition {
                    k = seen.firstIndex { $0.partition == r.partition } ?? -1
                    if k < 0 {
                        seen.append(SeenPartition(partition: r.partition, first: r.offset, last: r.offset, newest: 0, hasNewest: false))
                        k = seen.count - 1
                    }
                }
                var newest = seen[k].newest, has = seen[k].hasNewest
                if r.eventCount > 0 {
                    for e in Int(r.firstEvent)..<Int(r.firstEvent + r.eventCount) where v.isLiveTrack(e) {
                        let t = v.time(e)
                        if !has || t > newest { newest = t; has = true }
                    }
                }
                seen[k].last = r.offset
                seen[k].newest = newest
                seen[k].hasNewest = has
            }
        }
        for c in seen {
            if clocks[c.partition] == nil { clocks[c.partition] = PartitionClock(start: ReplayPoint(offset: c.first, maxEventTime: nil)) }
            clocks[c.partition]!.advance(lastOffset: c.last, batchMax: c.hasNewest ? c.newest : nil)
        }
    }

    /// A source partition of one batch (`advanceClocks`): its first and last record's offsets, its newest live
    /// event time.
    private struct SeenPartition {
        var partition: Int32
        var first: Int64
        var last: Int64
        var newest: Int64
        var hasNewest: Bool
    }
    /// Reused by `advanceClocks`.
    private var seen: [SeenPartition] = []

    /// What to commit beside offset `next` of a source partition: where re-reading must start to rebuild
    /// the stages' state. Nil when no stage keeps state or the partition was not read.
    public func replayPoint(partition: Int32, next: Int64) -> ReplayPoint? {
        guard stateHorizon > 0, clocks[partition] != nil else { return nil }
        return clocks[partition]!.replayPoint(next: next, horizon: stateHorizon)
    }

    /// A source partition is about to be re-read from `point`: reset its clock and tell the stages.
    public func restore(partition: Int32, from point: ReplayPoint) {
        clocks[partition] = PartitionClock(start: point)
        for s in stages { s.restore(partition: partition, maxEventTime: point.maxEventTime) }
    }

    /// Tells the stages that partitions went away.
    public func partitionsRevoked(_ partitions: [Int32]) {
        for p in partitions { clocks[p] = nil }
        for s in stages { s.partitionsRevoked(partitions) }
    }

    /// End of a bounded run: every stage writes out its state.
    public func finish(output: inout OutputBuffer) throws {
        for (i, s) in stages.enumerated() {
            let messages = output.messages.count
            try s.finish(output: &output)
            live.stages[i].written.add(output.messages.count - messages)
        }
    }

    @inline(__always)
    private func statusCounts(_ batch: borrowing EventBatch) -> (Int, Int, Int) {
        let c = (batch.eventCount - batch.droppedCount - batch.failedCount, batch.droppedCount, batch.failedCount)
        assert(c == recount(batch), "a stage set Event.status directly; use EventBatch.drop(_:) / fail(_:reason:)")
        return c
    }

    private func recount(_ batch: borrowing EventBatch) -> (Int, Int, Int) {
        var c = (0, 0, 0)
        for i in 0..<batch.eventCount {
            switch batch.event(i).status {
            case .live: c.0 += 1
            case .dropped: c.1 += 1
            case .failed: c.2 += 1
            }
        }
        return c
    }

    /// A human summary of the counts (for `bench` and logs).
    public func summaryLines() -> [String] {
        var lines: [String] = []
        let d = decodeCounts
        let bad = zip(DeadLetterReason.allCases, d.failedRecords).filter { $0.1 > 0 }.map { "\($0.0)=\($0.1)" }
        lines.append("decode: records=\(d.records) events=\(d.events) bytes=\(d.bytes) rejected_records={\(bad.joined(separator: ","))}")
        if measureTime { lines.append("decode: time=\(decodeTime.rounded)") }
        for (i, n) in stageNames.enumerated() {
            let c = counts[i]
            let time = measureTime && i < stageTime.count ? " time=\(stageTime[i].rounded)" : ""
            if i >= spec.stages.count {
                // An output passes every live event on; what it wrote is what matters (a dead-letter output
                // writes the rejected records and events, not the live ones it is shown).
                lines.append("\(n): written=\(c.written) (of \(c.received) live events seen)\(time)")
            } else {
                let written = c.written > 0 ? " written=\(c.written)" : ""
                lines.append("\(n): received=\(c.received) emitted=\(c.emitted) dropped=\(c.dropped) failed=\(c.failed)\(written)\(time)")
            }
        }
        for (s, c) in counters { lines.append("\(s).\(c.name)=\(c.value)") }
        return lines
    }
}
