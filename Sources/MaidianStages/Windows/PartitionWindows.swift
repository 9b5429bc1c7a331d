import MaidianEvents

/// The aggregates of one window: text key hash → aggregate, the list in creation order, and the text keys.
final class WindowAggregates {
    var table = HashTable64(capacity: 64)
    var list: [Int32] = []
    /// The aggregates' `metrics.counts` keys, back to back (see `Aggregate.keyStart`).
    var keys: [UInt8] = []
}

/// A window aggregate of one source partition: one future `metrics.counts` key.
struct Aggregate {
    var windowEnd: Int64
    var count: Int64 = 0
    var users = AggregateUsers()
    var isDwell: Bool
    var sum: Int64 = 0
    var durations = DurationDigest()
    /// The combo (`WindowsStage.combos`) and window start of the tuple that created it: its output head is
    /// written from them when the window closes.
    var combo: Int32
    var windowStart: Int64
    /// Its key in its window's `keys`.
    var keyStart: Int32
    var keyCount: Int32

    /// What a freed slot holds once its aggregate was moved out (`WindowsEmitter.closeWindow`).
    static let vacant = Aggregate(windowEnd: 0, isDwell: false, combo: -1, windowStart: 0, keyStart: 0, keyCount: 0)
}

/// The distinct users of an aggregate: most have a handful, kept inline without a hash set; from the fifth
/// on, a `UserSet` (the same set, so the same partial).
struct AggregateUsers {
    private var first: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    /// Users in `first`; -1 once they moved to `set`.
    private var small = 0
    private(set) var set = UserSet()

    @inline(__always)
    mutating func insert(_ h: UInt64) {
        switch small {
        case 0: first.0 = h
        case 1: if first.0 == h { return }; first.1 = h
        case 2: if first.0 == h || first.1 == h { return }; first.2 = h
        case 3: if first.0 == h || first.1 == h || first.2 == h { return }; first.3 = h
        case 4:
            if first.0 == h || first.1 == h || first.2 == h || first.3 == h { return }
            for x in [first.0, first.1, first.2, first.3, h] { set.insert(x) }
            small = -1
            return
        default:
            set.insert(h)
            return
        }
        small += 1
    }

    /// Users part of a partial (as `InternalMessage` encodes a `UserSet`).
    func encode(into out: inout [UInt8]) {
        if small < 0 { set.encode(into: &out); return }
        out.append(0)
        out.appendLE(Int32(small))
        // The first `small` (at most four, distinct) sorted by a sorting network, in locals: no allocation.
        var (a, b, c, d) = first
        @inline(__always) func order(_ x: inout UInt64, _ y: inout UInt64) { if x > y { swap(&x, &y) } }
        switch small {
        case 2: order(&a, &b)
        case 3: order(&a, &b); order(&b, &c); order(&a, &b)
        case 4: order(&a, &b); order(&c, &d); order(&a, &c); order(&b, &d); order(&b, &c)
        default: break
        }
        if small > 0 { out.appendLE(a) }
        if small > 1 { out.appendLE(b) }
        if small > 2 { out.appendLE(c) }
        if small > 3 { out.appendLE(d) }
    }
}

/// An open page visit. 24 bytes; with its share of the install's array, well under the 300-byte budget.
struct Visit {
    var page: Int32
    var rules: Int32
    var dims: Int32
    /// The `distinct_id` of the page-enter (in the partition's `idBytes`): a visit closed by `timeout` or
    /// `end_of_input` carries it, though the install may have logged in since.
    var idStart: UInt32
    var enter: Int64
}

struct TrailEntry {
    var time: Int64
    var event: Int32
    var page: Int32
    var element: Int32
    /// How far the partition's newest event time was ahead of `time` when the event's record arrived (ms, held
    /// at `Int32.max`): when it arrived in the partition's clock, which decides whether a takeover re-reads it.
    /// In what was padding: 24 bytes an entry with or without it.
    var arrivalLag: Int32
}

/// What a partition keeps per install (`anonymous_id`, else `distinct_id`: wire format §5): open visits
/// and the crash trail, so that a login mid-visit keeps both. The install's latest `distinct_id` is in the
/// partition's `idBytes` (one allocation for all installs instead of one each).
struct UserState {
    // The 8-byte fields first, then the 4-byte ones: 48 bytes a state, where interleaving them took 56 (issue 5
    // allows 300 bytes per open visit, and a partition holds one state per install; bench/README.md).
    /// Hash64 of the install id.
    var hash: UInt64
    /// Hash64 of the latest `distinct_id` (decoded): an event with the same id, most events, is told apart from
    /// a login without reading `idBytes` (ids are told apart by their hashes, as users are counted).
    var idHash: UInt64 = 0
    var visits: [Visit] = []
    /// A ring once full: the oldest entry at `trailStart`.
    var trail: [TrailEntry] = []
    /// The latest `distinct_id` in `idBytes`; `UInt32.max`: a free slot.
    var idStart: UInt32
    /// Newest collector time (`received_at`, else the record timestamp) of the install's uploads in seconds,
    /// rounded up: a visit times out by the watermark only once the install has been silent for the timeout.
    var lastReceived: UInt32 = 0
    var trailStart: Int32 = 0
}

enum Role: UInt8 {
    case pageEnter = 0, pageLeave, click, appStart, appEnd, crash
}

/// An event waiting until the watermark passes it, so that pairing sees events in event-time order.
struct PendingEvent {
    var time: Int64
    /// Arrival order: the record's offset and the event's index in it (`PendingEvent.sequence`), the same
    /// whichever batches a re-read makes; the offset also names the record's late contributions.
    var seq: Int64
    var user: Int32
    /// The event's `distinct_id` in the partition's `idBytes`.
    var idStart: UInt32
    var role: Role
    var page: Int32
    var element: Int32
    var event: Int32
    var rules: Int32
    var dims: Int32
    var appVersion: Int32
    /// `TrailEntry.arrivalLag` of the event (in what was padding: 56 bytes an event with or without it).
    var arrivalLag: Int32
}

/// `TrailEntry.arrivalLag` of an event at `time` whose record arrived when the partition's newest event time
/// was `newest`.
@inline(__always) func arrivalLag(time: Int64, newest: Int64) -> Int32 {
    let lag = saturatingSub(newest, time)
    return lag <= 0 ? 0 : Int32(clamping: lag)
}

extension PendingEvent {
    /// Bits of `seq` below the record offset.
    static let indexBits: Int64 = 20

    @inline(__always) static func sequence(offset: Int64, index: Int) -> Int64 {
        (offset << indexBits) | Int64(min(index, (1 << indexBits) - 1))
    }

    /// The offset of the event's record.
    @inline(__always) var offset: Int64 { seq >> Self.indexBits }
}

/// A min-heap by (time, arrival). The heap holds only the order and a slot number (24 bytes an entry): a sift
/// moves those, not the 56-byte events, which stay put in `slots` from push to pop.
struct PendingHeap {
    private struct Entry {
        var time: Int64
        var seq: Int64
        var slot: Int32
    }

    private var heap: [Entry] = []
    /// The events by slot; a popped event's slot is reused (`free`).
    private var slots: [PendingEvent] = []
    private var free: [Int32] = []

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }

    @inline(__always) private static func less(_ a: Entry, _ b: Entry) -> Bool {
        a.time < b.time || (a.time == b.time && a.seq < b.seq)
    }

    /// The time of the first event, or nil.
    @inline(__always) var topTime: Int64? { heap.first?.time }

    mutating func push(_ e: PendingEvent) {
        let slot: Int32
        if let f = free.popLast() {
            slot = f
            slots[Int(f)] = e
        } else {
            slot = Int32(slots.count)
            slots.append(e)
        }
        let entry = Entry(time: e.time, seq: e.seq, slot: slot)
        heap.append(entry)
        // Sift up with a hole: parents move down, `entry` is written once.
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            if !Self.less(entry, heap[parent]) { break }
            heap[i] = heap[parent]
            i = parent
        }
        heap[i] = entry
    }

    /// Changes every queued event in place (the heap order does not depend on what `body` may change).
    mutating func update(_ body: (inout PendingEvent) -> Void) {
        for k in heap.indices { body(&slots[Int(heap[k].slot)]) }
    }

    /// Removes the first entry and returns its slot (the heap is not empty).
    @inline(__always)
    private mutating func popSlot() -> Int32 {
        let first = heap[0].slot
        let last = heap.removeLast()
        let n = heap.count
        if n > 0 {
            // Bottom-up: the hole goes down to a leaf by the smaller child (one comparison a level, and the
            // loop's end is predictable), then `last`, which belongs near the bottom, goes up from there. Keys
            // are distinct (an arrival is a record offset and an event index, and records hold far fewer than
            // 2^20 events: `maxEventsPerRecord`), so events come out in the same order as by sifting `last` down.
            var i = 0
            while true {
                let l = 2 &* i &+ 1
                if l >= n { break }
                var m = l
                if l &+ 1 < n && Self.less(heap[l &+ 1], heap[l]) { m = l &+ 1 }
                heap[i] = heap[m]
                i = m
            }
            while i > 0 {
                let parent = (i &- 1) / 2
                if !Self.less(last, heap[parent]) { break }
                heap[i] = heap[parent]
                i = parent
            }
            heap[i] = last
        }
        free.append(first)
        return first
    }

    mutating func pop() -> PendingEvent? {
        guard !heap.isEmpty else { return nil }
        return slots[Int(popSlot())]
    }

    /// Pops, in order, every event at or before `time` into `out` (appended). The slots are found first, then
    /// the events read: an event waited in its slot since it was queued (out of the caches by now), and these
    /// reads, independent of one another, overlap their cache misses.
    mutating func pop(upTo time: Int64, into out: inout [PendingEvent]) {
        let first = free.count
        while let t = heap.first?.time, t <= time { _ = popSlot() }
        out.reserveCapacity(out.count + free.count - first)
        for k in first..<free.count { out.append(slots[Int(free[k])]) }
    }
}

/// What identifies a window aggregate by numbers: the metric (0 pv, 1 click, 2 dwell), the rule text, the
/// dims (a dims identity for pv and click, a visit's dims for dwell), the content (-1: none) and the window.
/// Several tuples may name one aggregate (their text keys are equal).
struct AggregateTuple: Equatable {
    var metric: Int32
    var rule: Int32
    var dims: Int32
    var content: Int32
    var windowStart: Int64

    /// The tuple without its window.
    var combo: AggregateTuple { AggregateTuple(metric: metric, rule: rule, dims: dims, content: content, windowStart: 0) }

    @inline(__always) var hash: UInt64 {
        var h = Hash64()
        h.add(UInt64(UInt32(bitPattern: metric)) << 32 | UInt64(UInt32(bitPattern: rule)))
        h.add(UInt64(UInt32(bitPattern: dims)) << 32 | UInt64(UInt32(bitPattern: content)))
        h.add(UInt64(bitPattern: windowStart))
        return h.value
    }
}

/// A late contribution's identity: the aggregate tuple and the offset of the record that caused it (the
/// merger replaces a contribution it already has, so a re-read record does not count twice).
struct LateTuple: Hashable {
    var tuple: AggregateTuple
    var offset: Int64
    static func == (a: LateTuple, b: LateTuple) -> Bool { a.offset == b.offset && a.tuple == b.tuple }
    func hash(into hasher: inout Hasher) { hasher.combine(tuple.hash); hasher.combine(offset) }
}

/// `a - b`, or `Int64.min` where that overflows (watermarks of partitions with absurd times).
@inline(__always) func saturatingSub(_ a: Int64, _ b: Int64) -> Int64 {
    let (r, o) = a.subtractingReportingOverflow(b)
    return o ? (b > 0 ? .min : .max) : r
}

/// The start of the `every`-long epoch-aligned window holding `time` (saturated, never trapping, for any time).
@inline(__always) func alignedStart(_ time: Int64, every: Int64) -> Int64 {
    let r = time % every
    return saturatingSub(time, r < 0 ? r + every : r)
}

/// `a + b`, saturated at the ends of `Int64`.
@inline(__always) func saturatingAdd(_ a: Int64, _ b: Int64) -> Int64 {
    let (r, o) = a.addingReportingOverflow(b)
    return o ? (b > 0 ? .max : .min) : r
}

/// The windows of one window size of one source partition (the stage's sizes: `window`, then `more_windows`):
/// its open aggregates and its late contributions. Sizes share nothing else: each has its own windows, keys
/// and partials.
final class SizeWindows {
    /// The size's window length, ms.
    let window: Int64
    /// The size as its partials name it: 0 for the first size (`window`, whose partials carry no size, as
    /// before there were sizes), else its length.
    let tag: Int64

    @exclusivity(unchecked) var aggregates: [Aggregate] = []
    @exclusivity(unchecked) var freeAggregates: [Int32] = []
    /// Window end → its aggregates.
    @exclusivity(unchecked) var windows: [Int64: WindowAggregates] = [:]
    /// Tuple hash → index in `tuples` / `tupleAggregates`: the aggregates of open windows by numbers, so
    /// counting an event builds no text key. Rebuilt when windows close.
    @exclusivity(unchecked) var tupleTable = HashTable64(capacity: 256)
    @exclusivity(unchecked) var tuples: [AggregateTuple] = []
    @exclusivity(unchecked) var tupleAggregates: [Int32] = []
    /// Late contributions by (tuple, record offset), in `lateAggregates`, keys in `lateKeys`.
    @exclusivity(unchecked) var lateTable: [LateTuple: Int32] = [:]
    @exclusivity(unchecked) var lateAggregates: [Aggregate] = []
    @exclusivity(unchecked) var lateOffsets: [Int64] = []
    @exclusivity(unchecked) var lateKeys: [UInt8] = []
    @exclusivity(unchecked) var lastWindow: WindowAggregates?
    @exclusivity(unchecked) var lastWindowEnd: Int64 = 0

    init(window: Int64, tag: Int64) {
        self.window = window
        self.tag = tag
    }

    /// The start of the window holding `time`.
    @inline(__always)
    func windowStart(of time: Int64) -> Int64 { alignedStart(time, every: window) }

    /// The window ending at `end`, created when new (the last one asked for is kept at hand).
    @inline(__always)
    func window(end: Int64) -> WindowAggregates {
        if let w = lastWindow, lastWindowEnd == end { return w }
        let w: WindowAggregates
        if let existing = windows[end] { w = existing } else { w = WindowAggregates(); windows[end] = w }
        lastWindow = w
        lastWindowEnd = end
        return w
    }

    /// The aggregate of `tuple`, or -1.
    @inline(__always)
    func aggregate(_ tuple: AggregateTuple) -> Int32 {
        var h = tuple.hash
        while let v = tupleTable.get(h) {
            if tuples[Int(v)] == tuple { return tupleAggregates[Int(v)] }
            h = h &* 0x9E37_79B9_7F4A_7C15 &+ 1  // a 64-bit collision: probe on
        }
        return -1
    }

    /// Records that `tuple` names aggregate `a`.
    func addTuple(_ tuple: AggregateTuple, _ a: Int32) {
        var h = tuple.hash
        while tupleTable.get(h) != nil { h = h &* 0x9E37_79B9_7F4A_7C15 &+ 1 }
        tupleTable.set(h, Int64(tuples.count))
        tuples.append(tuple)
        tupleAggregates.append(a)
    }

    /// Forgets every tuple (a compaction renumbered what they name); counting finds the aggregates by key again.
    func forgetTuples() {
        tupleTable = HashTable64(capacity: 256)
        tuples = []
        tupleAggregates = []
    }

    /// Forgets the tuples of windows no longer open (after `windows` lost some).
    func dropClosedTuples() {
        lastWindow = nil
        let oldTuples = tuples, oldAggregates = tupleAggregates
        tuples.removeAll(keepingCapacity: true)
        tupleAggregates.removeAll(keepingCapacity: true)
        tupleTable = HashTable64(capacity: max(256, oldTuples.count))
        for (k, t) in oldTuples.enumerated() where windows[t.windowStart + window] != nil { addTuple(t, oldAggregates[k]) }
    }
}

/// Everything the windows stage keeps for one source partition.
final class PartitionWindows {
    let partition: Int32
    /// Newest event time (track events) seen on the partition.
    @exclusivity(unchecked) var maxTime: Int64?

    /// The first size's windows (most pipelines have no other: kept at hand for the per-event path).
    let first: SizeWindows
    /// Every size's windows, `first` first.
    let sizes: [SizeWindows]
    /// Windows ending at or before this were closed (their partials written), whatever their size: events for
    /// them count as late contributions (`late*`), written per record after the batch.
    @exclusivity(unchecked) var closedUpTo: Int64 = .min
    /// While a late event is counted and paired: its record's watermark. Windows ending at or before it are late
    /// contributions even when the partition closes them only at the batch's end: where batches end differs
    /// when a partition is read again after a takeover, and a contribution must not go into a window's partial
    /// in one run and into a late partial in the other (both would be counted).
    @exclusivity(unchecked) var recordWatermark: Int64 = .min
    /// Newest collector time (`received_at`, else record timestamp) on the partition.
    @exclusivity(unchecked) var collectorNow: Int64 = .min

    /// distinct_id hash → index in `users`.
    @exclusivity(unchecked) var userByHash = HashTable64(capacity: 1024)
    @exclusivity(unchecked) var users: [UserState] = []
    /// The users' `distinct_id`s back to back, each after its length (2 bytes, little-endian; `idStart`s point
    /// at it), and how many of its bytes belong to ids no longer referred to (compacted when they are the
    /// larger part).
    @exclusivity(unchecked) var idBytes: [UInt8] = []
    var idGarbage = 0
    /// Per user: the newest event time taken (a user with events still pending is not forgotten). Beside
    /// `users`, so the per-event update reads a small dense array.
    @exclusivity(unchecked) var lastTimes: [Int64] = []
    @exclusivity(unchecked) var freeUsers: [Int32] = []
    @exclusivity(unchecked) var pending = PendingHeap()

    /// Last record of the partition in the current batch.
    @exclusivity(unchecked) var lastRecord: Int32 = -1
    /// The partition's first record in the current batch (first after re-read ones): outputs the batch causes
    /// are attributed to it. Not the last record: the ones before it have no outputs of their own, so their
    /// offsets could be committed before those outputs are delivered, and a takeover would lose them.
    @exclusivity(unchecked) var ownerRecord: Int32 = -1
    var progressSent: Int64 = .min
    var idleSent = false
    /// Processing time of the partition's last input (`ProcessingClock`): idle detection.
    var lastInput: ContinuousClock.Instant
    var lastSweep: Int64 = .min

    /// `windows`: the stage's window lengths, ms, the first size first.
    init(partition: Int32, maxTime: Int64?, windows: [Int64], now: ContinuousClock.Instant) {
        self.lastInput = now
        self.partition = partition
        self.maxTime = maxTime
        sizes = windows.enumerated().map { SizeWindows(window: $0.element, tag: $0.offset == 0 ? 0 : $0.element) }
        first = sizes[0]
    }

    var watermark: Int64? { maxTime }

    /// Whether a size has late contributions to write.
    var hasLate: Bool { sizes.contains { !$0.lateAggregates.isEmpty } }

    /// The install of `hash` whose event's `distinct_id` has the hash `idHash` (`appendID` writes the decoded
    /// id when it is new to the install: the install's first event, or a login).
    @inline(__always)
    func user(hash: UInt64, idHash: UInt64, appendID: (inout [UInt8]) -> Void, time: Int64) -> Int32 {
        if let u = userByHash.get(hash) {
            if users[Int(u)].idHash != idHash { changeID(Int32(u), idHash: idHash, appendID: appendID) }
            return Int32(u)
        }
        let u = newUser(hash: hash, idStart: appendEntry(appendID), time: time)
        users[Int(u)].idHash = idHash
        return u
    }

    /// Appends an id (its length, then the bytes `appendID` writes) and returns where it starts.
    private func appendEntry(_ appendID: (inout [UInt8]) -> Void) -> UInt32 {
        let start = idBytes.count
        // Grown by half when full rather than doubled: the arena is most of a user's bytes beside its state, and
        // doubling left up to as much again unused (issue 5's 300 bytes per open visit, bench/README.md).
        if idBytes.capacity - start < 256 { idBytes.reserveCapacity(start + max(start / 2, 4096)) }
        idBytes.append(0)
        idBytes.append(0)
        appendID(&idBytes)
        let n = min(idBytes.count - start - 2, Int(UInt16.max))
        idBytes[start] = UInt8(truncatingIfNeeded: n)
        idBytes[start + 1] = UInt8(truncatingIfNeeded: n >> 8)
        idBytes.removeLast(idBytes.count - start - 2 - n)
        return UInt32(start)
    }

    /// The bytes an id takes in `idBytes`.
    @inline(__always)
    func idSize(_ start: UInt32) -> Int { 2 + Int(idBytes[Int(start)]) | Int(idBytes[Int(start) + 1]) << 8 }

    /// The install's `distinct_id` changed (a login; or an escaped id, compared decoded): appended unless it is
    /// the same; the old bytes stay for the visits and pending events that refer to them until compaction.
    @inline(never)
    private func changeID(_ u: Int32, idHash: UInt64, appendID: (inout [UInt8]) -> Void) {
        users[Int(u)].idHash = idHash
        let old = users[Int(u)].idStart
        let start = appendEntry(appendID)
        let size = idSize(start)
        let same = size == idSize(old) && idBytes.withByteView { $0[Int(old) ..< (Int(old) + size)].equals($0[Int(start) ..< (Int(start) + size)]) }
        if same {
            idBytes.removeLast(size)
            return
        }
        idGarbage += idSize(old)
        users[Int(u)].idStart = start
    }

    /// Calls `body` with the bytes of the id at `start` in `idBytes`.
    @inline(__always)
    func withID<R>(start: UInt32, _ body: (ByteView) -> R) -> R {
        idBytes.withByteView { b in
            let s = Int(start)
            let n = Int(b[s]) | Int(b[s + 1]) << 8
            return body(b[(s + 2)..<(s + 2 + n)])
        }
    }

    private func newUser(hash: UInt64, idStart: UInt32, time: Int64) -> Int32 {
        let state = UserState(hash: hash, idStart: idStart)
        let u: Int32
        if let free = freeUsers.popLast() {
            u = free
            users[Int(u)] = state
            lastTimes[Int(u)] = time
        } else {
            u = Int32(users.count)
            users.append(state)
            lastTimes.append(time)
        }
        userByHash.set(hash, Int64(u))
        return u
    }

    /// Indexes of the users in use, in index order.
    var liveUsers: [Int32] {
        var out: [Int32] = []
        for (i, s) in users.enumerated() where s.idStart != .max { out.append(Int32(i)) }
        return out
    }

    /// Calls `body` with each page-text number (a page or an app version; `isElement` false) and each element-
    /// identifier number (`isElement` true) the state holds: open visits, trails and the events waiting to be
    /// paired. `WindowsStage.compactTexts` marks them with it, then renumbers them.
    func updateTextNumbers(_ body: (_ number: inout Int32, _ isElement: Bool) -> Void) {
        for u in liveUsers {
            for k in users[Int(u)].visits.indices { body(&users[Int(u)].visits[k].page, false) }
            for k in users[Int(u)].trail.indices {
                body(&users[Int(u)].trail[k].page, false)
                body(&users[Int(u)].trail[k].element, true)
            }
        }
        pending.update { e in
            body(&e.page, false)
            body(&e.appVersion, false)
            body(&e.element, true)
        }
    }

    /// Calls `body` with each visit-dims number the state holds (open visits and the events waiting to be
    /// paired; -1 where none): `WindowsStage.compactCombos` marks them with it, then renumbers them.
    func updateVisitDims(_ body: (_ dims: inout Int32) -> Void) {
        for u in liveUsers {
            for k in users[Int(u)].visits.indices { body(&users[Int(u)].visits[k].dims) }
        }
        pending.update { body(&$0.dims) }
    }

    /// Forgets users with nothing open whose last activity is older than `before`, in event time and in
    /// arrival: a late upload's events are old in event time but arrived now, and a crash arriving late
    /// after them takes them on its trail (`WindowsEmitter.writeTrail` keeps entries that arrived within
    /// `trail_max_age` of its record's watermark). Forgotten by event time alone, the install vanished at
    /// the next sweep, and sweeps fall where batches end: whether a later late crash still saw the entries
    /// depended on batch boundaries, so a worker that took the partition over (its re-read ends a batch
    /// where the replay ends) could write a shorter trail than one that never stopped (docs/recovery.md §2).
    /// `before` is at most the sweep's watermark less `trail_max_age`, so an install forgotten here has no
    /// entry any later crash could take.
    func expireUsers(before: Int64) {
        var removed = false
        for u in liveUsers {
            let s = users[Int(u)]
            if s.visits.isEmpty && lastTimes[Int(u)] < before && !s.trail.contains(where: { saturatingAdd($0.time, Int64($0.arrivalLag)) >= before }) {
                idGarbage += idSize(s.idStart)
                users[Int(u)] = UserState(hash: 0, idStart: .max)
                lastTimes[Int(u)] = .min
                freeUsers.append(u)
                removed = true
            }
        }
        guard removed else { return }
        // The table has no removal: rebuild it from the users kept (once per window of event time at most).
        var table = HashTable64(capacity: max(1024, users.count - freeUsers.count))
        for u in liveUsers { table.set(users[Int(u)].hash, Int64(u)) }
        userByHash = table
        if idGarbage > idBytes.count / 2 { compactIDs() }
    }

    /// Copies the ids still referred to (kept installs', their open visits' and pending events') into a new
    /// arena; a reference to an install's current id bytes shares the install's copy.
    private func compactIDs() {
        var compact: [UInt8] = []
        compact.reserveCapacity(idBytes.count - idGarbage)
        var moved: [UInt32: UInt32] = [:]  // old start -> new start (equal bytes at one start are one copy)
        idBytes.withByteView { old in
            func move(_ start: UInt32) -> UInt32 {
                if let m = moved[start] { return m }
                let m = UInt32(compact.count)
                let s = Int(start), size = 2 + (Int(old[s]) | Int(old[s + 1]) << 8)
                compact.append(old[s..<(s + size)])
                moved[start] = m
                return m
            }
            for u in liveUsers {
                let s = users[Int(u)]
                users[Int(u)].idStart = move(s.idStart)
                for k in s.visits.indices { users[Int(u)].visits[k].idStart = move(s.visits[k].idStart) }
            }
            pending.update { $0.idStart = move($0.idStart) }
        }
        idBytes = compact
        idGarbage = 0
    }

    /// Open visits over all users (for the state-size report).
    var openVisits: Int { liveUsers.reduce(0) { $0 + users[Int($1)].visits.count } }
    var userCount: Int { liveUsers.count }
}
