import MaidianEvents
import MaidianPipeline

/// Drops retried copies of events (SPEC section 2, duplicates): two events with the same
/// (`distinct_id`, `_track_id`, client `time`, `event`) within `window` of event time are one event; the later
/// copy is dropped and counted. Events without `_track_id` are never duplicates.
///
/// Memory is per source partition (an install's uploads stay in one partition) in two generations of at most
/// `window` of event time each, so an entry lives between one and two windows and the state stays bounded.
public final class DedupStage: Stage {
    public struct Config: Decodable, Sendable {
        public var window: ConfigDuration = ConfigDuration(milliseconds: 600_000)
        enum CodingKeys: String, CodingKey { case window }
        public init() {}
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            window = try c.decodeIfPresent(ConfigDuration.self, forKey: .window) ?? ConfigDuration(milliseconds: 600_000)
            if window.milliseconds <= 0 { throw PipelineError(code: .badValue, message: "window must be positive") }
        }
    }

    public static let kind = "dedup"
    public static let summary = "drops retried copies of events (same distinct_id, _track_id, time, event)"

    /// Seen keys of one partition: 64-bit key hash → event time of the first copy.
    final class Memory {
        var current = HashTable64()
        var previous = HashTable64()
        var generationStart: Int64 = .min
    }

    let window: Int64
    /// Per source partition, indexed by partition number (small integers).
    var memories: [Memory?] = []
    let duplicates: StageCounter

    public init(config: Config, context: StageContext) throws {
        self.window = config.window.milliseconds
        self.duplicates = context.counter("duplicates")
    }

    /// Memory reaches back up to two windows of event time.
    public var stateHorizon: Int64 { 2 * window }

    /// Number of remembered keys (tests and state-size reports).
    public var rememberedKeys: Int { memories.reduce(0) { $0 + ($1.map { $0.current.count + $0.previous.count } ?? 0) } }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        let n = batch.events.count
        var partition: Int32 = -1
        var m: Memory! = nil
        for i in 0..<n {
            let ev = batch.events[i]
            guard ev.status == .live, ev.type.isTrack, ev.hasTrackID else { continue }
            let p = batch.records[Int(ev.record)].partition
            if p != partition {
                partition = p
                m = memory(for: p)
            }
            let key = batch.json.withUnsafeBufferPointer { j in DedupStage.keyHash(ev, j.baseAddress!) }
            let t = ev.time
            // Generations are aligned to multiples of `window` in event time (not to the first event seen), so
            // a worker that re-reads a partition from a checkpoint (docs/recovery.md) rotates at the same
            // events as the worker before it and remembers the same keys once two windows are re-read.
            if m.generationStart == .min { m.generationStart = floorDiv(t, window) * window }
            if t &- m.generationStart >= window {
                // Rotate: the older generation is now more than a window behind the newest event time.
                swap(&m.previous, &m.current)
                m.current.removeAll()
                m.generationStart = floorDiv(t, window) * window
            }
            // One probe in the current generation finds a copy or remembers this event.
            if let seen = m.current.getOrInsert(key, t) {
                if abs(t &- seen) <= window {
                    batch.drop(i)
                    duplicates.add()
                } else {
                    m.current.set(key, t)
                }
                continue
            }
            if let seen = m.previous.get(key), abs(t &- seen) <= window {
                batch.drop(i)
                duplicates.add()
            }
        }
    }

    private func memory(for partition: Int32) -> Memory {
        let p = Int(partition)
        if p >= memories.count { memories.append(contentsOf: repeatElement(nil, count: p + 1 - memories.count)) }
        if let m = memories[p] { return m }
        let m = Memory()
        memories[p] = m
        return m
    }

    public func partitionsRevoked(_ partitions: [Int32]) {
        for p in partitions where Int(p) < memories.count { memories[Int(p)] = nil }
    }

    @inline(__always)
    static func keyHash(_ ev: Event, _ j: UnsafePointer<UInt8>) -> UInt64 {
        var h = Hash64()
        h.add(j + Int(ev.distinctID.start), ev.distinctID.count)
        h.add(UInt64(bitPattern: ev.trackID))
        h.add(UInt64(bitPattern: ev.clientTime))
        h.add(j + Int(ev.eventName.start), ev.eventName.count)
        return h.value
    }
}
