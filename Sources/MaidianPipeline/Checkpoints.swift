import MaidianEvents

/// Where re-reading a partition must start so that stateful stages rebuild their state, and what to tell
/// them when it does. Committed as Kafka offset metadata beside the offset (see docs/recovery.md).
public struct ReplayPoint: Sendable, Equatable {
    /// First offset to re-read.
    public var offset: Int64
    /// Newest event time seen before `offset` (nil: none).
    public var maxEventTime: Int64?
    /// Of the record at `offset`, the first item to take: an internal record can bundle several messages,
    /// and those before this one were taken before the checkpoint. 0 for a source partition.
    public var item: Int32
    /// Source partitions: a bounded run (`--until-end`) ended here, and the windows stage wrote out every window
    /// and visit it had. The group's mergers then take nothing newer (docs/recovery.md §3a), so a later run that
    /// finds records from this offset on stops instead of leaving them out of the windowed counts.
    public var finished: Bool

    /// A replay point; `item` and `finished` matter only for internal partitions and bounded runs.
    public init(offset: Int64, maxEventTime: Int64?, item: Int32 = 0, finished: Bool = false) {
        self.offset = offset
        self.maxEventTime = maxEventTime
        self.item = item
        self.finished = finished
    }

    /// The metadata text: `maidian/1 replay_from=<offset> max_time=<ms or ->`, then ` item=<n>` when `item` is
    /// not 0 and ` finished` when `finished` (so every point without them reads as before).
    public var metadata: String {
        "maidian/1 replay_from=\(offset) max_time=\(maxEventTime.map(String.init) ?? "-")" + (item != 0 ? " item=\(item)" : "")
            + (finished ? " finished" : "")
    }

    /// Parses `metadata`; nil for anything else (another tool's metadata, or none).
    public init?(metadata: String) {
        var parts = metadata.split(separator: " ")
        finished = parts.count > 3 && parts.last == "finished"
        if finished { parts.removeLast() }
        guard parts.count == 3 || parts.count == 4, parts[0] == "maidian/1",
              parts[1].hasPrefix("replay_from="), let o = Int64(parts[1].dropFirst(12)),
              parts[2].hasPrefix("max_time=") else { return nil }
        let m = parts[2].dropFirst(9)
        if m == "-" { maxEventTime = nil } else if let v = Int64(m) { maxEventTime = v } else { return nil }
        if parts.count == 4 {
            guard parts[3].hasPrefix("item="), let i = Int32(parts[3].dropFirst(5)), i > 0 else { return nil }
            item = i
        } else {
            item = 0
        }
        offset = o
    }
}

/// The newest event time of one source partition as it grew with offsets: `samples[i]` says that every
/// record up to `offset` held event times at most `maxTime`. Newest event time only grows, so the replay
/// point for a state horizon H is just after the last sample still more than H behind.
struct PartitionClock {
    struct Sample {
        var offset: Int64
        var maxTime: Int64?
    }

    var maxTime: Int64?
    var samples: [Sample] = []

    init(start: ReplayPoint) {
        maxTime = start.maxEventTime
        samples = [Sample(offset: start.offset - 1, maxTime: start.maxEventTime)]
    }

    mutating func advance(lastOffset: Int64, batchMax: Int64?) {
        if let b = batchMax, maxTime.map({ b > $0 }) ?? true { maxTime = b }
        // A restored first sample stays put: it stands for the point re-reading started from, which a commit
        // within the horizon must point back to.
        if let last = samples.last, last.maxTime == maxTime, samples.count > 1 || last.maxTime == nil {
            samples[samples.count - 1].offset = max(last.offset, lastOffset)
        } else {
            samples.append(Sample(offset: lastOffset, maxTime: maxTime))
        }
    }

    /// The replay point for a commit of `next` (every record before it is done) with state horizon `horizon`.
    mutating func replayPoint(next: Int64, horizon: Int64) -> ReplayPoint {
        // The clock at `next - 1`, or a lower bound of it (the last sample at or before it).
        guard let atNext = samples.lastIndex(where: { $0.offset <= next - 1 }) else {
            return ReplayPoint(offset: samples[0].offset + 1, maxEventTime: samples[0].maxTime)
        }
        guard let m = samples[atNext].maxTime else {
            // No event time up to that sample: no state before it. (Not `next`: the records after the sample,
            // of the batch holding `next - 1`, may have had events.)
            return ReplayPoint(offset: samples[atNext].offset + 1, maxEventTime: nil)
        }
        let threshold = m &- horizon
        var j = -1
        for i in 0...atNext {
            if let t = samples[i].maxTime, t >= threshold { break }
            j = i
        }
        guard j >= 0 else { return ReplayPoint(offset: samples[0].offset + 1, maxEventTime: samples[0].maxTime) }
        if j > 0 { samples.removeFirst(j) }
        return ReplayPoint(offset: samples[0].offset + 1, maxEventTime: samples[0].maxTime)
    }
}
