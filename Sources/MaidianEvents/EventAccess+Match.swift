import CPrefetch

// What a per-event loop reads of every event before deciding to look closer (`match` reads this for each
// event of a batch), read in place: copying an `Event` (over 200 bytes) out of the batch was a `memcpy`
// call per event, and the optimizer does not always turn `events[i].field` into a plain load.

/// The head of one event: liveness, type, name and where its properties and `lib` are.
public struct EventHead: Sendable {
    /// Still flowing (not dropped or failed).
    public var isLive: Bool
    /// A `track`/`track_signup` event.
    public var isTrack: Bool
    /// `event`'s raw string content in the JSON arena (absent when missing or not a string).
    public var eventName: Span
    /// `event` is a string with escapes.
    public var eventNameEscaped: Bool
    /// The decoder's `Hash64` of `eventName`'s bytes.
    public var eventNameHash: UInt64
    /// The event's properties: `properties[firstProperty ..< firstProperty + propertyCount]`.
    public var firstProperty: Int32
    /// Number of the event's entries in `properties`, dropped ones included.
    public var propertyCount: Int32
    /// The event's `lib` object in the JSON arena (absent when missing).
    public var lib: Span

    /// The head of `ev` (tools that hold a copy of the event).
    @inlinable public init(_ ev: Event) {
        isLive = ev.isLive
        isTrack = ev.type.isTrack
        eventName = ev.eventNameIsString ? ev.eventName : .absent
        eventNameEscaped = ev.eventNameEscaped
        eventNameHash = ev.eventNameHash
        firstProperty = ev.firstProperty
        propertyCount = ev.propertyCount
        lib = ev.lib
    }

    @inlinable init(_ e: UnsafePointer<Event>) {
        isLive = e.pointee.isLive
        isTrack = e.pointee.type.isTrack
        eventName = e.pointee.eventNameIsString ? e.pointee.eventName : .absent
        eventNameEscaped = e.pointee.eventNameEscaped
        eventNameHash = e.pointee.eventNameHash
        firstProperty = e.pointee.firstProperty
        propertyCount = e.pointee.propertyCount
        lib = e.pointee.lib
    }

    /// The indexes (into the batch's properties) of the event's properties.
    @inlinable public var properties: Range<Int> { Int(firstProperty) ..< Int(firstProperty) + Int(propertyCount) }
}

extension EventBatch {
    /// The head of event `i`, read field by field in place.
    @inlinable public func head(_ i: Int) -> EventHead {
        precondition(i >= 0 && i < events.count, "event index out of range")
        return events.withUnsafeBufferPointer { EventHead($0.baseAddress! + i) }
    }
}

extension EventRoles.Table {
    /// The role of the event whose head is `head` (by its name, compared as sent: role names need no
    /// escapes), or nil when its name is no role's.
    @inlinable public func role(of head: EventHead, in batch: borrowing EventBatch) -> RoleKind? {
        guard head.eventName.isPresent, !head.eventNameEscaped else { return nil }
        return batch.withJSON { j in role(of: j[head.eventName], hash: head.eventNameHash) }
    }
}

extension EventBatch {
    // Writing fragments into the scratch arena from bytes a stage holds (its own tables) or from the batch's
    // arenas: one copy each (a slice of an array appended element-wise, or of `scratch` itself, would not be).

    /// Appends `bytes` to the scratch arena.
    @inlinable public mutating func appendToScratch(_ bytes: ByteView) {
        scratch.append(contentsOf: bytes.base)
    }

    /// Appends one byte to the scratch arena.
    @inlinable public mutating func appendToScratch(_ byte: UInt8) {
        scratch.append(byte)
    }

    /// Appends the bytes of `span` of the JSON arena to the scratch arena.
    @inlinable public mutating func appendToScratch(json span: Span) {
        json.withUnsafeBufferPointer { j in
            scratch.append(contentsOf: UnsafeBufferPointer(rebasing: j[Int(span.start) ..< Int(span.end)]))
        }
    }

    /// Appends a copy of the bytes of `span` of the scratch arena itself (a replaced value) to it.
    @inlinable public mutating func appendToScratch(scratch span: Span) {
        let n = span.count
        guard n > 0 else { return }
        let at = scratch.count
        scratch.append(contentsOf: repeatElement(0, count: n))
        scratch.withUnsafeMutableBufferPointer { s in
            (s.baseAddress! + at).update(from: s.baseAddress! + Int(span.start), count: n)
        }
    }
}

extension EventBatch {
    /// One pass over the kept properties of the event `head` describes: `found[s]` becomes the index of the
    /// first kept property of slot `s`, or -1. A property that is a known one (`Property.known`) goes to slot
    /// `slotOfKnown[known]` (-1: not wanted), found without reading its name; one other name, `extra`, is
    /// compared by its bytes and goes to slot `extraSlot`. `found` keeps its size (every slot is set).
    @inlinable public func firstProperties(of head: EventHead, slotOfKnown: [Int8], extra: StaticString, extraSlot: Int,
                                           into found: inout [Int]) {
        var none: [Int32] = []
        firstProperties(of: head, slotOfKnown: slotOfKnown, extra: extra, extraSlot: extraSlot, into: &found, others: &none)
    }

    /// The same, and in the same pass the indices of the kept properties `known` does not place (a name that is
    /// no known one's, or an escaped one), in order, into `others` as far as it has room (it keeps its size).
    /// Returns how many there are: more than `others.count` means some were left out. A stage looking for
    /// names of its own by their bytes then compares these few instead of passing over every property again.
    @inlinable @discardableResult
    public func firstProperties(of head: EventHead, slotOfKnown: [Int8], extra: StaticString, extraSlot: Int,
                                into found: inout [Int], others: inout [Int32]) -> Int {
        precondition(extraSlot >= 0 && extraSlot < found.count && slotOfKnown.count >= 256, "slots out of range")
        let lo = Int(head.firstProperty), hi = lo + Int(head.propertyCount)
        precondition(lo >= 0 && hi <= properties.count, "event properties out of range")
        let extraCount = extra.utf8CodeUnitCount
        var otherCount = 0
        json.withUnsafeBufferPointer { j in
            properties.withUnsafeBufferPointer { props in
                slotOfKnown.withUnsafeBufferPointer { known in
                    others.withUnsafeMutableBufferPointer { o in
                        found.withUnsafeMutableBufferPointer { f in
                            for s in f.indices { f[s] = -1 }
                            var k = lo
                            while k < hi {
                                let p = props[k]
                                if p.fix != .drop {
                                    if p.known == KnownProperty.none || p.nameEscaped {
                                        if otherCount < o.count { o[otherCount] = Int32(truncatingIfNeeded: k) }
                                        otherCount &+= 1
                                    }
                                    if p.known != KnownProperty.none {
                                        let s = Int(known[Int(p.known)])
                                        if s >= 0 && s < f.count && f[s] < 0 { f[s] = k }
                                    } else if p.name.count == extraCount && f[extraSlot] < 0
                                                && Bytes.equal(j.baseAddress! + Int(p.name.start), extra) {
                                        f[extraSlot] = k
                                    }
                                }
                                k &+= 1
                            }
                        }
                    }
                }
            }
        }
        return otherCount
    }
}

extension EventBatch {
    // What the match stage leaves for later stages and reads back while it writes (hits, the scratch arena's end,
    // an event's record), so that it does not index the storage arrays itself.

    /// Number of match hits recorded so far in the batch: the index the next `appendHit` gets.
    @inlinable public var matchHitCount: Int { hits.count }

    /// Records one match hit (its id and content spans point into the scratch or JSON arena); the match stage
    /// then gives each event its range with `setHitRange`.
    @inlinable public mutating func appendHit(_ hit: MatchHit) { hits.append(hit) }

    /// Appends `head`, then the pieces `pieces[piece(n)]` for each `n` of `list` separated by `separator`, then
    /// `tail`, to the scratch arena with one growth (the match stage's `$matched_rules`: a few short ids; a call
    /// per piece cost more than the copies).
    @inlinable public mutating func appendJoinedToScratch(head: ByteView, pieces: ByteView, list: [Int], separator: UInt8, tail: UInt8,
                                                          piece: (Int) -> Range<Int>) {
        var total = head.count + 1 + max(list.count - 1, 0)
        for n in list { total += piece(n).count }
        let at = scratch.count
        scratch.append(contentsOf: repeatElement(0, count: total))
        scratch.withUnsafeMutableBufferPointer { s in
            var o = at
            @inline(__always) func put(_ v: ByteView) {
                for i in 0..<v.count { s[o &+ i] = v[i] }
                o &+= v.count
            }
            put(head)
            for (k, n) in list.enumerated() {
                if k > 0 { s[o] = separator; o &+= 1 }
                put(pieces[piece(n)])
            }
            s[o] = tail
        }
    }

    /// The index of the input record event `i` came from (for output records tied to it).
    @inlinable public func recordIndex(of i: Int) -> Int32 { events[i].record }
}

/// The kept properties of one event, looked up by name while `EventBatch.withPropertyLookup` runs (`where:`
/// conditions read a few names per event). The first kept property of a name wins, as everywhere.
public struct EventPropertyLookup {
    /// The batch's JSON and scratch arenas.
    public let json: ByteView, scratch: ByteView
    @usableFromInline let props: UnsafeBufferPointer<Property>
    @usableFromInline let range: Range<Int>

    @inlinable init(json: ByteView, scratch: ByteView, props: UnsafeBufferPointer<Property>, range: Range<Int>) {
        self.json = json
        self.scratch = scratch
        self.props = props
        self.range = range
    }

    /// The first kept (not dropped) property called `name` (raw name bytes as sent), or nil.
    @inlinable public func first(named name: ByteView) -> Property? {
        let n = name.count
        for k in range {
            let p = props[k]
            guard p.fix != .drop, p.name.count == n, json[p.name].equals(name) else { continue }
            return p
        }
        return nil
    }

    /// The first kept property called `name`, where `known` is the `KnownProperty` raw value `name` is
    /// (`KnownProperty.none`: none, then the names' bytes are compared): a known name is found by
    /// `Property.known`, without reading name bytes. An escaped name is never equal to a known one's raw bytes.
    @inlinable public func first(named name: ByteView, known: UInt8) -> Property? {
        guard known != KnownProperty.none else { return first(named: name) }
        for k in range {
            let p = props[k]
            if p.known == known && p.fix != .drop && !p.nameEscaped { return p }
        }
        return nil
    }

    /// A property's value bytes as they are now: its replacement (scratch) when replaced, else the JSON text
    /// (quotes and brackets included).
    @inlinable public func value(of p: Property) -> ByteView {
        p.fix == .replace ? scratch[p.replacement] : json[p.value]
    }
}

extension EventBatch {
    /// Calls `body` with a by-name look-up of the kept properties of the event `head` describes.
    @inlinable public func withPropertyLookup<R>(of head: EventHead, _ body: (EventPropertyLookup) -> R) -> R {
        let lo = Int(head.firstProperty), hi = lo + Int(head.propertyCount)
        precondition(lo >= 0 && hi <= properties.count, "event properties out of range")
        return json.withUnsafeBufferPointer { j in
            scratch.withUnsafeBufferPointer { s in
                properties.withUnsafeBufferPointer { props in
                    body(EventPropertyLookup(json: ByteView(j), scratch: ByteView(s), props: props, range: lo..<hi))
                }
            }
        }
    }
}

extension EventBatch {
    /// Asks the CPU to start loading what a per-event loop reads of event `i`: its property entries and its
    /// JSON text (up to 4 KiB), into the outer caches. A hint, a few events ahead of the loop: a batch is read
    /// once, front to back, and each event's first touches of these otherwise wait on memory one after the
    /// other (the hardware prefetchers stop at page boundaries). Reads nothing; an index out of range is ignored.
    public func prefetch(event i: Int) {
        guard i >= 0 && i < events.count else { return }
        @inline(__always) func lines(_ base: UnsafeRawPointer, _ count: Int) {
            var o = 0
            while o < count { maidian_prefetch(base + o); o &+= 64 }
            maidian_prefetch(base + (count - 1))
        }
        events.withUnsafeBufferPointer { evs in
            let e = evs.baseAddress! + i
            let lo = Int(e.pointee.firstProperty), n = Int(e.pointee.propertyCount)
            let text = e.pointee.bytes
            properties.withUnsafeBufferPointer { props in
                guard lo >= 0, n > 0, lo + n <= props.count else { return }
                lines(UnsafeRawPointer(props.baseAddress! + lo), n * MemoryLayout<Property>.stride)
            }
            json.withUnsafeBufferPointer { j in
                let start = Int(text.start), count = min(Int(text.end) - start, 4096)
                guard start >= 0, count > 0, start + count <= j.count else { return }
                lines(UnsafeRawPointer(j.baseAddress! + start), count)
            }
        }
    }
}
