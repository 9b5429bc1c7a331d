// The access layer stages program against: what an event says (fields, properties by name or by their
// `KnownProperty` bit), what stages add (typed properties, drops, failures, flags) and what they leave for
// later stages (match hits). Stages use these instead of reaching into the arenas with pointers, so the
// byte handling (bounds, escapes, hashing) is written once, here.

/// Which of a batch's arenas a `BatchText` is in.
public enum Arena: UInt8, Sendable {
    /// Record keys and header values, as received.
    case input
    /// The decoded JSON of the records.
    case json
    /// Bytes written by stages.
    case scratch
}

/// A piece of text of a batch: where its bytes are and whether they are JSON-escaped (raw string content
/// of the JSON arena, between the quotes) or plain. Absent when the field is missing or not a string.
public struct BatchText: Sendable, Equatable {
    /// Where the bytes are in `arena`; absent when the field is missing or not a string.
    public var span: Span
    /// Which of the batch's arenas `span` points into.
    public var arena: Arena
    /// The bytes are JSON string content with escapes (`\n`, `\u00e9`): compare the decoded text.
    public var escaped: Bool

    /// The text at `span` of `arena`; `escaped` when the bytes hold JSON escapes.
    @inlinable public init(span: Span, arena: Arena, escaped: Bool = false) {
        self.span = span
        self.arena = arena
        self.escaped = escaped
    }

    /// No text: a missing field or one that is not a string.
    public static let absent = BatchText(span: .absent, arena: .json)
    /// Whether the field was sent as a string.
    @inlinable public var isPresent: Bool { span.isPresent }
    /// Bytes as stored (escapes counted as written).
    @inlinable public var count: Int { span.isPresent ? span.count : 0 }
}

extension EventBatch {
    // MARK: - events

    /// Number of events in the batch; events are numbered `0 ..< eventCount`.
    @inlinable public var eventCount: Int { events.count }

    /// Event `i`'s entry, a copy (read its fields; change it only through the methods of this layer).
    @inlinable public func event(_ i: Int) -> Event { events[i] }

    /// Number of input records; records are numbered `0 ..< recordCount`.
    @inlinable public var recordCount: Int { records.count }

    /// Input record `r`.
    @inlinable public func record(_ r: Int) -> InputRecord { records[r] }

    /// Property entry `k` (an index of `propertyRange` or from `propertyIndex`), a copy.
    @inlinable public func property(_ k: Int) -> Property { properties[k] }

    /// Match hit `h` (an index of `hitRange`), a copy.
    @inlinable public func hit(_ h: Int) -> MatchHit { hits[h] }

    /// Hit `h`'s rule id (action rules: their identifier) as a JSON string, quotes included (`withBytes` gives
    /// it as written).
    @inlinable public func id(ofHit h: Int) -> BatchText { BatchText(span: hits[h].id, arena: .scratch) }

    /// Hit `h`'s content value (`group_by_content` rules) as a JSON string, quotes included; absent otherwise.
    @inlinable public func content(ofHit h: Int) -> BatchText {
        let hit = hits[h]
        return BatchText(span: hit.content, arena: hit.contentInScratch ? .scratch : .json)
    }

    /// Whether event `i` is still flowing (not dropped or failed).
    @inlinable public func isLive(_ i: Int) -> Bool { events[i].status == .live }

    /// Whether event `i` is live and a `track`/`track_signup` event (profile updates are forwarded untouched).
    @inlinable public func isLiveTrack(_ i: Int) -> Bool {
        let ev = events[i]
        return ev.status == .live && ev.type.isTrack
    }

    /// The input record event `i` came from.
    @inlinable public func record(of i: Int) -> InputRecord { records[Int(events[i].record)] }

    /// The source partition of event `i`.
    @inlinable public func partition(of i: Int) -> Int32 { records[Int(events[i].record)].partition }

    /// `event` of event `i` when it is a string, raw (escapes as sent).
    @inlinable public func eventName(_ i: Int) -> BatchText {
        let ev = events[i]
        return ev.eventNameIsString ? BatchText(span: ev.eventName, arena: .json, escaped: ev.eventNameEscaped) : .absent
    }

    /// `distinct_id` of event `i` when it is a string, raw (escapes as sent).
    @inlinable public func distinctID(_ i: Int) -> BatchText {
        let ev = events[i]
        return ev.distinctIDKind == .string ? BatchText(span: ev.distinctID, arena: .json, escaped: ev.distinctIDEscaped) : .absent
    }

    /// The event time of event `i` in ms (after calibration, the calibrated time).
    @inlinable public func time(_ i: Int) -> Int64 { events[i].time }

    /// The `type` of event `i`.
    @inlinable public func eventType(_ i: Int) -> EventType { events[i].type }

    /// `_track_id` of event `i` when it sent an integer one.
    @inlinable public func trackID(_ i: Int) -> Int64? {
        let ev = events[i]
        return ev.hasTrackID ? ev.trackID : nil
    }

    /// `Hash64` of event `i`'s raw `event` name (between the quotes, escapes as sent), as the decoder worked
    /// it out; 0 when it is no string.
    @inlinable public func eventNameHash(_ i: Int) -> UInt64 { events[i].eventNameHash }

    /// `Hash64` of event `i`'s raw `distinct_id` (escapes as sent); 0 when it is no string.
    @inlinable public func distinctIDHash(_ i: Int) -> UInt64 { events[i].distinctIDHash }

    /// `Hash64` of event `i`'s decoded `anonymous_id` (its install, wire format §5); 0 when it sent none.
    @inlinable public func anonymousIDHash(_ i: Int) -> UInt64 { events[i].anonymousIDHash }

    /// Event `i`'s `lib` object as it sits in the JSON arena (braces included, not a string: read its bytes
    /// with `withBytes`, which leaves them as they are); absent when the event has none.
    @inlinable public func lib(_ i: Int) -> BatchText { BatchText(span: events[i].lib, arena: .json) }

    /// The entries of event `i`'s `properties` (dropped ones included), as indices into `properties`.
    @inlinable public func propertyRange(_ i: Int) -> Range<Int> {
        let ev = events[i]
        return Int(ev.firstProperty) ..< Int(ev.firstProperty &+ ev.propertyCount)
    }

    /// Whether the client sent `known` in event `i`'s properties (kept or not): a bit test, no scan.
    @inlinable public func sent(_ i: Int, _ known: KnownProperty) -> Bool { events[i].known & known.bit != 0 }

    /// Sets the event time of event `i` (calibration); the output writes it in place of the client's. Not
    /// inlinable: the time's setter stays internal (only corrected events pay the call).
    public mutating func setTime(_ i: Int, _ t: Int64) {
        events[i].time = t
        events[i].calibrated = true
    }

    // MARK: - flags between stages

    /// Whether event `i` carries `flag` (`EventFlag`).
    @inlinable public func hasFlag(_ i: Int, _ flag: UInt32) -> Bool { events[i].flags & flag != 0 }

    /// Sets `flag` (`EventFlag`) on event `i`, for later stages.
    @inlinable public mutating func setFlag(_ i: Int, _ flag: UInt32) { events[i]._flags |= flag }

    /// The rules event `i` matched (match stage), as indices into `hits`.
    @inlinable public func hitRange(_ i: Int) -> Range<Int> {
        let ev = events[i]
        return Int(ev.firstHit) ..< Int(ev.firstHit + ev.hitCount)
    }

    /// Records that the rules event `i` matched are `hits[r]` (the match stage, after appending them).
    @inlinable public mutating func setHitRange(_ i: Int, _ r: Range<Int>) {
        events[i]._firstHit = Int32(truncatingIfNeeded: r.lowerBound)
        events[i]._hitCount = Int32(truncatingIfNeeded: r.count)
    }

    /// Drops property `k` from the output (validate; it is listed in `$dropped_properties` by the caller).
    /// Call `markFixed` for its event.
    @inlinable public mutating func dropProperty(_ k: Int) { properties[k].fix = .drop }

    /// Replaces property `k`'s value by the JSON value at `value` in the scratch arena (written with the
    /// `appendScratch` methods or `PropertyRepair`). Call `markFixed` for its event.
    @inlinable public mutating func replaceProperty(_ k: Int, with value: Span) {
        properties[k].replacement = value
        properties[k].fix = .replace
    }

    /// Whether some property of event `i` has a fix other than keep (then readers check `Property.fix`).
    @inlinable public func hasFixes(_ i: Int) -> Bool { events[i].hasFixes }

    /// Notes that a property of event `i` got a fix (validate), so later stages look at the fixes.
    @inlinable public mutating func markFixed(_ i: Int) { events[i]._hasFixes = true }

    // MARK: - properties

    /// Index (into `properties`) of the first kept property of event `i` named `name`, or nil.
    public func propertyIndex(event i: Int, name: [UInt8]) -> Int? {
        name.withUnsafeBufferPointer { propertyIndex(event: i, nameBytes: $0) }
    }

    /// `propertyIndex(event:name:)` for a name given as bytes.
    func propertyIndex(event e: Int, nameBytes n: UnsafeBufferPointer<UInt8>) -> Int? {
        let ev = events[e]
        if ev.propertyCount == 0 { return nil }
        return json.withUnsafeBufferPointer { j in
            properties.withUnsafeBufferPointer { props in
                let lo = Int(ev.firstProperty), hi = lo + Int(ev.propertyCount)
                for i in lo..<hi {
                    let p = props[i]
                    if p.fix == .drop || p.name.count != n.count { continue }
                    if n.count == 0 || Bytes.equal(j.baseAddress! + Int(p.name.start), n.baseAddress!, n.count) { return i }
                }
                return nil
            }
        }
    }

    /// Whether event `i` has a kept property named `name` (never overwrite what the client sent).
    public func hasProperty(event i: Int, name: [UInt8]) -> Bool {
        propertyIndex(event: i, name: name) != nil
    }

    /// The value of property `k` (an index from `propertyIndex`) when it is a string: raw content between
    /// the quotes, escapes as sent.
    @inlinable public func stringValue(ofProperty k: Int) -> BatchText {
        let p = properties[k]
        guard p.kind == .string, p.fix == .keep else { return .absent }
        return BatchText(span: Span(start: p.value.start + 1, end: p.value.end - 1), arena: .json, escaped: p.valueEscaped)
    }

    /// Index of the first property of event `i` that is `known` and not dropped, or nil: found by the byte
    /// the scanner set (`Property.known`), no name compared. A dropped one is skipped (a later copy of the
    /// name may be kept).
    @inlinable public func propertyIndex(event i: Int, _ known: KnownProperty) -> Int? {
        let ev = events[i]
        guard ev.known & known.bit != 0 else { return nil }
        let raw = UInt8(known.rawValue)
        return properties.withUnsafeBufferPointer { props in
            var k = Int(ev.firstProperty)
            let hi = k + Int(ev.propertyCount)
            while k < hi {
                if props[k].known == raw && props[k].fix != .drop { return k }
                k &+= 1
            }
            return nil
        }
    }

    /// Calls `body` with the index and `KnownProperty` raw value of each not-dropped property of event `i`
    /// that is a known one, in order, until it returns false.
    @inlinable public func forEachKnownProperty(event i: Int, _ body: (_ index: Int, _ known: UInt8) -> Bool) {
        let ev = events[i]
        properties.withUnsafeBufferPointer { props in
            var k = Int(ev.firstProperty)
            let hi = k + Int(ev.propertyCount)
            while k < hi {
                let p = props[k]
                if p.known != KnownProperty.none && p.fix != .drop && !body(k, p.known) { return }
                k &+= 1
            }
        }
    }

    /// The raw content (between the quotes) of property `k` when it is a kept, non-empty string, or absent.
    @inlinable public func stringContent(ofProperty k: Int) -> Span {
        let p = properties[k]
        guard p.kind == .string, p.fix == .keep, p.value.count > 2 else { return .absent }
        return Span(start: p.value.start + 1, end: p.value.end - 1)
    }

    /// Property `k`'s JSON value as written (quotes and escapes included, not decoded by `withBytes`), or the
    /// replacement a stage wrote for it: absent when it was dropped.
    @inlinable public func value(ofProperty k: Int) -> BatchText {
        let p = properties[k]
        switch p.fix {
        case .keep: return BatchText(span: p.value, arena: .json)
        case .replace: return BatchText(span: p.replacement, arena: .scratch)
        case .drop: return .absent
        }
    }

    /// Property `k`'s name (its raw string content; `withBytes` decodes it).
    @inlinable public func name(ofProperty k: Int) -> BatchText {
        let p = properties[k]
        return BatchText(span: p.name, arena: .json, escaped: p.nameEscaped)
    }

    /// Whether the span `s` of the JSON arena holds exactly `bytes`.
    @inlinable public func jsonEqual(_ s: Span, _ bytes: [UInt8]) -> Bool {
        guard s.count == bytes.count else { return false }
        return withJSON { $0[s].equals(bytes) }
    }

    /// Whether the span `s` of the JSON arena holds exactly `text`.
    @inlinable public func jsonEqual(_ s: Span, _ text: StaticString) -> Bool {
        guard s.count == text.utf8CodeUnitCount else { return false }
        return withJSON { $0[s].equals(text) }
    }

    /// Byte `i` of the JSON arena (an offset inside a span of an event or property), for readers of short
    /// values such as a number's digits.
    @inlinable public func jsonByte(at i: Int) -> UInt8 { json[i] }

    /// Appends the bytes of span `s` of the JSON arena to `out`, as they are (no decoding).
    @inlinable public func appendJSONBytes(_ s: Span, to out: inout [UInt8]) {
        out.append(bytesOf: json, Int(s.start) ..< Int(s.end))
    }

    /// Whether two spans of the JSON arena hold the same bytes.
    @inlinable public func jsonEqual(_ a: Span, _ b: Span) -> Bool {
        guard a.count == b.count else { return false }
        if a.start == b.start { return true }
        return withJSON { $0[a].equals($0[b]) }
    }

    // MARK: - texts

    /// Calls `body` with the decoded bytes of `t` (unescaped when escaped: that path allocates, and escaped
    /// names and ids are rare); an absent text gives an empty view.
    @inlinable
    public func withBytes<R>(of t: BatchText, _ body: (ByteView) -> R) -> R {
        func arena(_ a: UnsafeBufferPointer<UInt8>) -> R {
            let slice = UnsafeBufferPointer(rebasing: a[Int(t.span.start)..<Int(t.span.end)])
            if t.escaped {
                return unescapeJSONString(UnsafeRawBufferPointer(slice)).withByteView(body)
            }
            return body(ByteView(slice))
        }
        guard t.isPresent else { return body(ByteView(UnsafeBufferPointer(start: nil, count: 0))) }
        switch t.arena {
        case .input: return input.withUnsafeBufferPointer(arena)
        case .json: return json.withUnsafeBufferPointer(arena)
        case .scratch: return scratch.withUnsafeBufferPointer(arena)
        }
    }

    /// The number of the member of `set` that `t` (decoded) equals, or nil; nil for an absent text.
    @inlinable public func index(of t: BatchText, in set: TextSet) -> Int? {
        guard t.isPresent else { return nil }
        return withBytes(of: t) { set.index(of: $0) }
    }

    /// `t`, decoded, as a String (messages, tests and other rare paths).
    public func string(_ t: BatchText) -> String? {
        guard t.isPresent else { return nil }
        return withBytes(of: t) { $0.string }
    }

    // MARK: - writing the scratch arena

    // A stage writes a JSON fragment (`"name":value`, for `linkAdded`) or a replacement value by noting
    // `scratchEnd`, appending, and taking `Span(start, scratchEnd)`: no closure, no copy of the arena.

    /// Where the next byte appended to the scratch arena goes.
    @inlinable public var scratchEnd: Int { scratch.count }

    /// Appends one byte to the scratch arena.
    @inlinable public mutating func appendScratch(_ byte: UInt8) { scratch.append(byte) }

    /// Appends bytes to the scratch arena.
    @inlinable public mutating func appendScratch(_ bytes: [UInt8]) { scratch.append(contentsOf: bytes) }

    /// Appends `source[range]` (a piece of a stage's own table) to the scratch arena: one copy, no slice.
    @inlinable public mutating func appendScratch(bytesOf source: [UInt8], _ range: Range<Int>) {
        scratch.append(bytesOf: source, range)
    }

    /// Appends the bytes of span `s` of the JSON arena to the scratch arena, as they are (raw string content
    /// of validated JSON is a valid JSON string body already).
    @inlinable public mutating func appendScratch(json s: Span) {
        scratch.append(bytesOf: json, Int(s.start) ..< Int(s.end))
    }

    // MARK: - keeping and reusing batches (tools)

    /// Number of added-property links (`linkAdded`) in the batch: what stages added, counted.
    @inlinable public var addedPropertyCount: Int { added.count }

    /// Makes room for `events` events, `added` added-property links and `scratchBytes` more bytes of the
    /// scratch arena, so stages then run without growing them (a benchmark's copy of a batch, as a worker's
    /// reused batch).
    public mutating func reserveRoom(events: Int, added: Int, scratchBytes: Int) {
        self.events.reserveCapacity(events)
        self.added.reserveCapacity(added)
        scratch.reserveCapacity(scratch.count + scratchBytes)
    }

    /// Frees what a decoded batch kept only for decoding: the input arena (record keys and header values)
    /// and the JSON arena's spare room. For batches held in memory after the run (benchmarks); the records'
    /// spans into the input arena are then stale.
    public mutating func keepDecodedOnly() {
        json = Array(json[0 ..< jsonCount])
        input = []
    }

    // MARK: - adding properties

    /// Adds `"name":"value"` (escaped) to event `i`.
    public mutating func addProperty(event i: Int, name: [UInt8], string value: String) {
        linkAdded(event: i, fragment(name: name, string: value))
    }

    /// Adds `"name":value` to event `i`.
    public mutating func addProperty(event i: Int, name: [UInt8], integer value: Int64) {
        let start = beginFragment(name)
        JSONOut.appendInt(value, to: &scratch)
        linkAdded(event: i, Span(start, scratch.count))
    }

    /// Adds `"name":true|false` to event `i`.
    public mutating func addProperty(event i: Int, name: [UInt8], bool value: Bool) {
        linkAdded(event: i, fragment(name: name, bool: value))
    }

    /// Adds `"name":<value>` to event `i`, where `value` is a JSON value the caller vouches for (an array,
    /// an object written with `JSONOut`).
    public mutating func addProperty(event i: Int, name: [UInt8], json value: [UInt8]) {
        let start = beginFragment(name)
        scratch.append(contentsOf: value)
        linkAdded(event: i, Span(start, scratch.count))
    }

    /// A `"name":"value"` fragment in the scratch arena, to link to many events with `linkAdded`.
    public mutating func fragment(name: [UInt8], string value: String) -> Span {
        let start = beginFragment(name)
        JSONOut.appendString(value, to: &scratch)
        return Span(start, scratch.count)
    }

    /// A `"name":true|false` fragment in the scratch arena, to link to many events with `linkAdded`.
    public mutating func fragment(name: [UInt8], bool value: Bool) -> Span {
        let start = beginFragment(name)
        JSONOut.appendRaw(value ? "true" : "false", to: &scratch)
        return Span(start, scratch.count)
    }

    /// Writes `"name":` (the name escaped) into the scratch arena; returns where the fragment starts.
    mutating func beginFragment(_ name: [UInt8]) -> Int {
        let start = scratch.count
        scratch.append(0x22)
        name.withUnsafeBytes { JSONOut.appendEscaped($0, to: &scratch) }
        scratch.append(0x22)
        scratch.append(0x3A)
        return start
    }
}

extension EventBatch {
    /// Adds the `"name":value` of a `KnownProperty` with an integer value to event `i`.
    @inlinable public mutating func addProperty(event i: Int, _ known: KnownProperty, integer value: Int64) {
        addProperty(event: i, name: known.name) { JSONOut.appendInt(value, to: &$0) }
    }
}
