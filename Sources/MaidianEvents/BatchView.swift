// The read-only view of a whole batch for the per-event hot paths (windows reads a dozen fields of every
// event): the arenas as buffer pointers, so a read costs no array bounds check, retain or uniqueness check
// in release builds, and the readers of texts, properties and ids written once, here, beside the rest of the
// access layer. Stages get one from `EventBatch.withView` and read through its accessors.

/// The arenas of a batch, valid only inside `EventBatch.withView`. Element reads are
/// checked in debug builds and unchecked in release builds, as `ByteView`'s are.
///
/// Stages read through the accessors (events, records and hits by index, byte views of spans, texts of
/// properties). The buffer members are public only while the windows files still index them directly; new
/// code should not.
public struct BatchView {
    /// The JSON arena in use: the records' decompressed JSON that events and properties point into.
    public let json: UnsafeBufferPointer<UInt8>
    /// The scratch arena: bytes stages wrote (added properties, replacement values, hit ids).
    public let scratch: UnsafeBufferPointer<UInt8>
    /// Every event's property entries (each event's range starts at `Event.firstProperty`).
    public let properties: UnsafeBufferPointer<Property>
    /// Rules matched by events (each event's range starts at `Event.firstHit`).
    public let hits: UnsafeBufferPointer<MatchHit>
    /// The batch's events, in record order.
    public let events: UnsafeBufferPointer<Event>
    /// The batch's input records.
    public let records: UnsafeBufferPointer<InputRecord>
    /// Added-property list entries, linked per event through `AddedProperty.next`.
    public let added: UnsafeBufferPointer<AddedProperty>
    /// Record keys and headers as received.
    public let input: UnsafeBufferPointer<UInt8>

    @inlinable init(
        json: UnsafeBufferPointer<UInt8>, scratch: UnsafeBufferPointer<UInt8>, properties: UnsafeBufferPointer<Property>,
        hits: UnsafeBufferPointer<MatchHit>, events: UnsafeBufferPointer<Event>, records: UnsafeBufferPointer<InputRecord>,
        added: UnsafeBufferPointer<AddedProperty>, input: UnsafeBufferPointer<UInt8>
    ) {
        self.json = json
        self.scratch = scratch
        self.properties = properties
        self.hits = hits
        self.events = events
        self.records = records
        self.added = added
        self.input = input
    }

    // MARK: - events, records, hits

    /// Number of records; records are numbered `0 ..< recordCount`.
    @inlinable public var recordCount: Int { records.count }
    /// Number of events; events are numbered `0 ..< eventCount`.
    @inlinable public var eventCount: Int { events.count }
    /// Record `r`.
    @inlinable public func record(_ r: Int) -> InputRecord { records[r] }
    /// Event `i` (a copy of its entry: read its fields through the accessors below where there is one).
    @inlinable public func event(_ i: Int) -> Event { events[i] }
    /// Match hit `h` (an index of `hitRange`).
    @inlinable public func hit(_ h: Int) -> MatchHit { hits[h] }
    /// Property entry `k` (an index of `propertyRange` or of a `PropertyFinder`'s `found`).
    @inlinable public func property(_ k: Int) -> Property { properties[k] }

    /// Whether event `i` is live and a `track`/`track_signup` event.
    @inlinable public func isLiveTrack(_ i: Int) -> Bool {
        let ev = events[i]
        return ev.status == .live && ev.type.isTrack
    }
    /// The event time of event `i` in ms (after calibration, the calibrated time).
    @inlinable public func time(_ i: Int) -> Int64 { events[i].time }
    /// Whether event `i` carries `flag` (`EventFlag`).
    @inlinable public func hasFlag(_ i: Int, _ flag: UInt32) -> Bool { events[i].flags & flag != 0 }
    /// The rules event `i` matched (match stage), as indices for `hit(_:)`.
    @inlinable public func hitRange(_ i: Int) -> Range<Int> {
        let ev = events[i]
        return Int(ev.firstHit) ..< Int(ev.firstHit &+ ev.hitCount)
    }
    /// The entries of event `i`'s `properties` (dropped ones included), as indices for `property(_:)`.
    @inlinable public func propertyRange(_ i: Int) -> Range<Int> {
        let ev = events[i]
        return Int(ev.firstProperty) ..< Int(ev.firstProperty &+ ev.propertyCount)
    }

    // MARK: - bytes

    /// The bytes of a span of the JSON arena (event fields, property names and values).
    @inlinable public func jsonBytes(_ s: Span) -> ByteView { ByteView(UnsafeBufferPointer(rebasing: json[Int(s.start) ..< Int(s.end)])) }
    /// The bytes of a span of the scratch arena (what stages wrote: match hits' ids, added properties).
    @inlinable public func scratchBytes(_ s: Span) -> ByteView { ByteView(UnsafeBufferPointer(rebasing: scratch[Int(s.start) ..< Int(s.end)])) }
    /// The bytes of a span of the input arena (record keys and header values).
    @inlinable public func inputBytes(_ s: Span) -> ByteView { ByteView(UnsafeBufferPointer(rebasing: input[Int(s.start) ..< Int(s.end)])) }

    /// The raw bytes of event `i`'s `event` name (escapes as sent); empty when it is no string.
    @inlinable public func eventNameBytes(_ i: Int) -> ByteView {
        let s = events[i].eventName
        return s.isPresent ? jsonBytes(s) : ByteView(UnsafeBufferPointer(start: nil, count: 0))
    }

    /// `Hash64` of event `i`'s raw `event` name (as `eventNameBytes(i).hash`), from the decoder when it has it.
    @inlinable public func eventNameHash(_ i: Int) -> UInt64 {
        let h = events[i].eventNameHash
        return h != 0 ? h : eventNameBytes(i).hash
    }

    /// Event `i`'s `lib` object as it sits in the JSON arena (braces included); empty when absent.
    @inlinable public func libBytes(_ i: Int) -> ByteView {
        let s = events[i].lib
        return s.isPresent ? jsonBytes(s) : ByteView(UnsafeBufferPointer(start: nil, count: 0))
    }

    /// `Hash64` of event `i`'s decoded `anonymous_id` (its install, wire format §5), or 0 when it sent none.
    @inlinable public func anonymousIDHash(_ i: Int) -> UInt64 { events[i].anonymousIDHash }

    // MARK: - texts

    /// Bytes of a text value as they sit in an arena; `escaped`: they hold a backslash and must be decoded.
    public struct Text {
        @usableFromInline var base: UnsafePointer<UInt8>?
        /// Bytes as stored (escapes counted as written).
        public var count: Int
        /// The bytes hold a backslash escape and must be decoded before use.
        public var escaped: Bool

        @inlinable init(base: UnsafePointer<UInt8>?, count: Int, escaped: Bool) {
            self.base = base
            self.count = count
            self.escaped = escaped
        }

        /// The bytes as stored (escapes as written).
        @inlinable public var raw: ByteView { ByteView(UnsafeBufferPointer(start: base, count: count)) }

        /// Appends the decoded text.
        @inlinable @inline(__always) public func append(to out: inout [UInt8]) {
            guard let base, count > 0 else { return }
            let raw = UnsafeRawBufferPointer(start: base, count: count)
            if escaped { out.append(contentsOf: unescapeJSONString(raw)) } else { out.append(contentsOf: raw) }
        }

        /// Calls `body` with the decoded text (decoding into a temporary only when escaped).
        @inlinable @inline(__always) public func withDecoded<R>(_ body: (ByteView) -> R) -> R {
            if escaped, let base {
                let decoded = unescapeJSONString(UnsafeRawBufferPointer(start: base, count: count))
                return decoded.withUnsafeBufferPointer { body(ByteView($0)) }
            }
            return body(ByteView(UnsafeBufferPointer(start: base, count: count)))
        }
    }

    /// A JSON string's content (between the quotes at `span`) in `arena`.
    @inlinable @inline(__always) public static func stringText(_ arena: UnsafeBufferPointer<UInt8>, _ span: Span) -> Text {
        let lo = Int(span.start) &+ 1, hi = Int(span.end) &- 1
        guard hi > lo else { return Text(base: nil, count: 0, escaped: false) }
        let base = arena.baseAddress! + lo
        return Text(base: base, count: hi &- lo, escaped: Bytes.hasBackslash(base, hi &- lo))
    }

    /// The content of the JSON string at `span` (quotes included) of the JSON arena.
    @inlinable public func jsonString(_ span: Span) -> Text { Self.stringText(json, span) }
    /// The content of the JSON string at `span` (quotes included) of the scratch arena.
    @inlinable public func scratchString(_ span: Span) -> Text { Self.stringText(scratch, span) }

    /// A kept property's value as text: a string's content, a number's or boolean's JSON text; nil for other
    /// kinds or `k < 0`. (A string without backslashes decodes to itself, so only those with one are decoded.)
    @inlinable @inline(__always) public func text(ofProperty k: Int) -> Text? {
        guard k >= 0 else { return nil }
        let p = properties[k]
        switch p.kind {
        case .string:
            return p.fix == .replace ? Self.stringText(scratch, p.replacement) : Self.stringText(json, p.value)
        case .number, .bool:
            return Text(base: json.baseAddress! + Int(p.value.start), count: p.value.count, escaped: false)
        default:
            return nil
        }
    }

    /// The text of a property an earlier stage added to the event (a preset such as `$province`, a rule
    /// parameter), as `text(ofProperty:)` reads the event's own: nil when none was added or it is no string,
    /// number or boolean.
    public func text(ofAdded name: UnsafeBufferPointer<UInt8>, _ ev: Event) -> Text? {
        guard ev.addedHead >= 0,
              let (span, kind) = EventBatch.addedProperty(head: ev.addedHead, added: added, scratch: scratch, name: name)
        else { return nil }
        switch kind {
        case .string: return Self.stringText(scratch, span)
        case .number, .bool: return Text(base: scratch.baseAddress! + Int(span.start), count: span.count, escaped: false)
        default: return nil
        }
    }

    /// `text(ofAdded:_:)` for event `i` and a name given as a view.
    public func text(ofAdded name: ByteView, event i: Int) -> Text? { text(ofAdded: name.base, events[i]) }

    /// Appends property `k`'s text to `out`; false when it has none.
    @inlinable @inline(__always) public func appendText(ofProperty k: Int, to out: inout [UInt8]) -> Bool {
        guard let t = text(ofProperty: k) else { return false }
        t.append(to: &out)
        return true
    }

    /// `$app_version` inside the event's `lib` object, decoded, appended to `out`; false when there is none.
    /// A shallow scan for the key (the first `"$app_version"` followed by a string), as the SDKs write `lib`.
    public func appendLibAppVersion(_ ev: Event, to out: inout [UInt8]) -> Bool {
        guard ev.lib.isPresent, ev.lib.count > 2 else { return false }
        let key: StaticString = "\"$app_version\""
        let keyCount = key.utf8CodeUnitCount
        let lo = Int(ev.lib.start), hi = Int(ev.lib.end)
        let j = json.baseAddress!
        var i = lo
        while i + keyCount < hi {
            if j[i] == 0x22 && Bytes.equal(j + i, key) {
                var k = i + keyCount
                while k < hi && (j[k] == 0x20 || j[k] == 0x3A || j[k] == 0x0A || j[k] == 0x09 || j[k] == 0x0D) { k += 1 }
                guard k < hi, j[k] == 0x22 else { return false }
                var e = k + 1
                while e < hi && j[e] != 0x22 { e += j[e] == 0x5C ? 2 : 1 }
                Self.stringText(json, Span(k, e + 1)).append(to: &out)
                return true
            }
            i += 1
        }
        return false
    }

    /// `appendLibAppVersion(_:to:)` for event `i`.
    public func appendLibAppVersion(event i: Int, to out: inout [UInt8]) -> Bool { appendLibAppVersion(events[i], to: &out) }

    /// The event's `distinct_id` text, decoded.
    public func appendDistinctID(_ ev: Event, to out: inout [UInt8]) {
        let lo = Int(ev.distinctID.start), n = ev.distinctID.count
        let raw = UnsafeRawBufferPointer(start: json.baseAddress! + lo, count: n)
        if ev.distinctIDEscaped { out.append(contentsOf: unescapeJSONString(raw)) } else { out.append(contentsOf: raw) }
    }

    /// `appendDistinctID(_:to:)` for event `i`.
    public func appendDistinctID(event i: Int, to out: inout [UInt8]) { appendDistinctID(events[i], to: &out) }

    /// Hash64 of the decoded `distinct_id` (users are counted by it, across partitions and workers). The
    /// decoder already hashed the raw bytes, which are the decoded ones when nothing is escaped.
    @inlinable @inline(__always) public func userHash(_ ev: Event) -> UInt64 {
        if !ev.distinctIDEscaped && ev.distinctIDHash != 0 { return ev.distinctIDHash }
        return Self.decodedIDHash(self, ev)
    }

    /// `userHash(_:)` for event `i`.
    @inlinable public func userHash(event i: Int) -> UInt64 { userHash(events[i]) }

    /// The rare path of `userHash`: an escaped (or unhashed) id, decoded and hashed.
    @usableFromInline static func decodedIDHash(_ v: BatchView, _ ev: Event) -> UInt64 {
        var id: [UInt8] = []
        v.appendDistinctID(ev, to: &id)
        var h = Hash64()
        id.withUnsafeBufferPointer { if let b = $0.baseAddress { h.add(b, $0.count) } }
        return h.value
    }
}

extension EventBatch {
    /// Runs `body` with a view of the batch's arenas (see `BatchView`); the view must not escape `body`.
    @inlinable
    public func withView<R>(_ body: (BatchView) throws -> R) rethrows -> R {
        try json.withUnsafeBufferPointer { j in
            try scratch.withUnsafeBufferPointer { s in
                try properties.withUnsafeBufferPointer { p in
                    try hits.withUnsafeBufferPointer { h in
                        try events.withUnsafeBufferPointer { e in
                            try records.withUnsafeBufferPointer { r in
                                try added.withUnsafeBufferPointer { a in
                                    try input.withUnsafeBufferPointer { i in
                                        try body(BatchView(json: j, scratch: s, properties: p, hits: h, events: e, records: r, added: a, input: i))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
