import MaidianEvents
import MaidianPipeline

/// Drops retried copies of events (wire format §2, duplicates): two events with the same
/// (`distinct_id`, `_track_id`, client `time`, `event`) within `window` of event time are one event; the later
/// copy is dropped and counted. Events without `_track_id` are never duplicates.
///
/// Memory is per source partition (an install's uploads stay in one partition) in two generations of at most
/// `window` of event time each, so an entry lives between one and two windows and the state stays bounded.
public final class DedupStage: Stage {
    /// The stage's options: `window` (pipelines/README.md documents it).
    public struct Config: Decodable, Sendable, DeclaredSettings {
        enum Settings {
            static let window = Setting("window", default: ConfigDuration.minutes(10),
                "how far apart in event time two copies still count as one (a duration, more than 0)", example: "5m")
        }
        public static let settings = ConfigSpec(Settings.window)
        /// How far apart in event time two copies still count as one.
        public var window = Settings.window.default
        /// The default window (10 minutes).
        public init() {}
        public init(from decoder: any Decoder) throws {
            let s = try decoder.settings(Self.settings)
            window = try s(Settings.window)
            if window.milliseconds <= 0 { throw PipelineError(code: .badValue, message: "window must be positive") }
        }
    }

    public static let kind = "dedup"
    public static let summary = "drops retried copies of events (same distinct_id, _track_id, time, event)"

    /// Seen keys of one partition: 64-bit key hash → event time of the first copy.
    struct Memory {
        // Small at first: partitions this worker never sees cost next to nothing; the tables grow as needed.
        var current = HashTable64(capacity: 8)
        var previous = HashTable64(capacity: 8)
        var generationStart: Int64 = .min
    }

    let window: Int64
    /// Per source partition, indexed by partition number (small integers). A value type, moved into a local
    /// while a batch runs: no reference counting and no run-time exclusivity checks per event.
    var memories: [Memory] = []
    let duplicates: StageCounter
    /// Reused per batch: the events found to be copies.
    private var drops: [Int] = []

    public init(config: Config, context: StageContext) throws {
        self.window = config.window.milliseconds
        self.duplicates = context.counter("duplicates")
    }

    /// Memory reaches back up to two windows of event time.
    public var stateHorizon: Int64 { 2 * window }

    /// Number of remembered keys (tests and state-size reports).
    public var rememberedKeys: Int { memories.reduce(0) { $0 + $1.current.count + $1.previous.count } }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        var mems = memories
        memories = []
        drops.removeAll(keepingCapacity: true)
        for i in 0..<batch.eventCount where batch.isLiveTrack(i) && batch.event(i).hasTrackID {
            let p = Int(batch.partition(of: i))
            if p >= mems.count { mems.append(contentsOf: repeatElement(Memory(), count: p + 1 - mems.count)) }
            let ev = batch.event(i)
            if isDuplicate(&mems[p], DedupStage.keyHash(ev), ev.time) { drops.append(i) }
        }
        memories = mems
        for i in drops {
            batch.drop(i)
            duplicates.add()
        }
    }

    /// Whether an event with `key` at time `t` repeats one seen within the window; remembers it if not.
    @inline(__always)
    private func isDuplicate(_ m: inout Memory, _ key: UInt64, _ t: Int64) -> Bool {
        // Generations are aligned to multiples of `window` in event time (not to the first event seen), so a
        // worker that re-reads a partition from a checkpoint (docs/recovery.md) rotates at the same events as
        // the worker before it and remembers the same keys once two windows are re-read.
        if m.generationStart == .min { m.generationStart = alignedStart(t) }
        if t >= m.generationStart && DedupStage.distance(t, m.generationStart) >= UInt64(window) {
            // Rotate: the older generation is now more than a window behind the newest event time.
            swap(&m.previous, &m.current)
            m.current.removeAll()
            m.generationStart = alignedStart(t)
        }
        // One probe in the current generation finds a copy or remembers this event.
        if let seen = m.current.getOrInsert(key, t) {
            if DedupStage.distance(t, seen) <= UInt64(window) { return true }
            m.current.set(key, t)
            return false
        }
        if let seen = m.previous.get(key), DedupStage.distance(t, seen) <= UInt64(window) { return true }
        return false
    }

    /// `|a - b|` without overflow, whatever the two times (validate keeps them in the wire format's range, but a pipeline
    /// may run dedup without it).
    @inline(__always)
    static func distance(_ a: Int64, _ b: Int64) -> UInt64 {
        a >= b ? UInt64(bitPattern: a &- b) : UInt64(bitPattern: b &- a)
    }

    /// The start of the window-aligned generation holding `t`; near the 64-bit minimum, where that start is not
    /// representable, the smallest value that is not the "unset" marker.
    @inline(__always)
    private func alignedStart(_ t: Int64) -> Int64 {
        let (start, overflow) = floorDiv(t, window).multipliedReportingOverflow(by: window)
        return overflow || start == .min ? .min + 1 : start
    }

    /// Forgets what the revoked partitions remembered: their next owner builds its own memory.
    public func partitionsRevoked(_ partitions: [Int32]) {
        for p in partitions where Int(p) < memories.count { memories[Int(p)] = Memory() }
    }

    /// The duplicate key, from the raw-byte hashes the decoder computed (no trip back to the JSON arena).
    @inline(__always)
    static func keyHash(_ ev: Event) -> UInt64 {
        var h = Hash64()
        h.add(ev.distinctIDHash)
        h.add(UInt64(bitPattern: ev.trackID))
        h.add(UInt64(bitPattern: ev.clientTime))
        h.add(ev.eventNameHash)
        return h.value
    }
}
