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
        precondition(extraSlot >= 0 && extraSlot < found.count && slotOfKnown.count >= 256, "slots out of range")
        let lo = Int(head.firstProperty), hi = lo + Int(head.propertyCount)
        precondition(lo >= 0 && hi <= properties.count, "event properties out of range")
        let extraCount = extra.utf8CodeUnitCount
        json.withUnsafeBufferPointer { j in
            properties.withUnsafeBufferPointer { props in
                slotOfKnown.withUnsafeBufferPointer { known in
                    found.withUnsafeMutableBufferPointer { f in
                        for s in f.indices { f[s] = -1 }
                        var k = lo
                        while k < hi {
                            let p = props[k]
                            if p.fix != .drop {
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
}
