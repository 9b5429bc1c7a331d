/// Limits on one input record (SPEC section 1). Defaults are SPEC's.
public struct RecordLimits: Sendable, Equatable {
    /// Largest accepted record value as received (compressed), bytes.
    public var maxCompressedBytes: Int = 1 << 20
    /// Decompression stops past this many bytes: no decompression bombs.
    public var maxDecompressedBytes: Int = 16 << 20
    /// Largest number of events in one record.
    public var maxEventsPerRecord: Int = 10_000
    public init() {}
    public init(maxCompressedBytes: Int, maxDecompressedBytes: Int, maxEventsPerRecord: Int) {
        self.maxCompressedBytes = maxCompressedBytes
        self.maxDecompressedBytes = maxDecompressedBytes
        self.maxEventsPerRecord = maxEventsPerRecord
    }
}

/// Turns the records of a batch into events: zstd or raw JSON, limits, record-level dead letters, and one
/// validating scan per record that finds every event's fields and properties in place.
///
/// One decoder per worker thread: it owns a reused zstd context.
public final class RecordDecoder {
    public var limits: RecordLimits
    private let zstd = ZstdDecompressor()
    private let knownNames = KnownNameTable()
    /// Keys of events and keys of `properties` objects (see `NameCache`).
    private let topKeys = NameCache()
    private let propertyKeys = NameCache()
    /// The current record's events and properties (see `scanRecord`).
    private let events = ScanBuffer<Event>(capacity: 64)
    private let props = ScanBuffer<Property>(capacity: 1024)
    /// Output of the streaming path (frames without a declared size), reused.
    private var streamBuffer: [UInt8] = []
    /// Scanner padding: the JSON arena always has this many readable bytes after any record (the key cache
    /// compares whole words up to 32 bytes from a key's quote).
    static let padding = 32

    public init(limits: RecordLimits = RecordLimits()) {
        self.limits = limits
    }

    /// Decodes every record of the batch that has not been decoded yet.
    public func decodeAll(_ batch: inout EventBatch) {
        for r in 0..<batch.records.count where !batch.records[r].json.isPresent && batch.records[r].status == .live {
            decode(&batch, record: r)
        }
    }

    private func failRecord(_ batch: inout EventBatch, _ r: Int, _ reason: DeadLetterReason, _ detail: String) {
        batch.records[r].status = .failed
        batch.records[r].reason = reason
        batch.records[r].detail = batch.addDetail(detail)
    }

    /// Decodes one record into events.
    public func decode(_ batch: inout EventBatch, record r: Int) {
        let value = batch.records[r].value
        let n = value.count
        if n > limits.maxCompressedBytes {
            failRecord(&batch, r, .tooLarge, "record value is \(n) bytes, more than the limit of \(limits.maxCompressedBytes)")
            return
        }
        let jsonStart = batch.jsonCount
        var kind = 0  // 1 zstd, 2 raw JSON
        batch.input.withUnsafeBufferPointer { inp in
            let v = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(inp)[Int(value.start)..<Int(value.end)])
            if n >= 4 && v[0] == 0x28 && v[1] == 0xB5 && v[2] == 0x2F && v[3] == 0xFD {
                kind = 1
            } else {
                var i = 0
                while i < n, v[i] == 0x20 || v[i] == 0x0A || v[i] == 0x0D || v[i] == 0x09 { i += 1 }
                if i < n && v[i] == 0x5B { kind = 2 }
            }
        }
        let limit = limits.maxDecompressedBytes
        switch kind {
        case 1:
            var err: ZstdError?
            var declared: Int? = nil
            batch.input.withUnsafeBytes { inp in
                declared = zstd.declaredSize(UnsafeRawBufferPointer(rebasing: inp[Int(value.start)..<Int(value.end)]))
            }
            if let size = declared, size > limit {
                failRecord(&batch, r, .tooLarge, "the zstd frames declare \(size) bytes, more than the limit of \(limit)")
                return
            }
            if let size = declared {
                // Fast path: every frame declares its size; decompress in one call straight into the arena.
                batch.reserveJSON(size + RecordDecoder.padding)
                let at = batch.jsonCount
                batch.input.withUnsafeBytes { inp in
                    let v = UnsafeRawBufferPointer(rebasing: inp[Int(value.start)..<Int(value.end)])
                    batch.json.withUnsafeMutableBytes { out in
                        do {
                            _ = try zstd.decompressExactly(v, into: UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + size)]))
                        } catch {
                            err = error as? ZstdError ?? ZstdError(code: .corrupt, message: "\(error)")
                        }
                    }
                }
                if err == nil { batch.jsonCount += size }
            } else {
                // Streaming with the cap, for frames that do not declare their size.
                streamBuffer.removeAll(keepingCapacity: true)
                batch.input.withUnsafeBytes { inp in
                    let v = UnsafeRawBufferPointer(rebasing: inp[Int(value.start)..<Int(value.end)])
                    do {
                        _ = try zstd.decompress(v, into: &streamBuffer, limit: limit)
                    } catch {
                        err = error as? ZstdError ?? ZstdError(code: .corrupt, message: "\(error)")
                    }
                }
                if err == nil { streamBuffer.withUnsafeBytes { batch.appendJSON($0) } }
            }
            if let err {
                if err.code == .tooLarge {
                    failRecord(&batch, r, .tooLarge, "decompressed value passes the limit of \(limit) bytes")
                } else {
                    failRecord(&batch, r, .badZstd, "zstd: \(err.message)")
                }
                return
            }
        case 2:
            if n > limit {
                failRecord(&batch, r, .tooLarge, "JSON value is \(n) bytes, more than the limit of \(limit)")
                return
            }
            let copy = Array(batch.input[Int(value.start)..<Int(value.end)])
            copy.withUnsafeBytes { batch.appendJSON($0) }
        default:
            failRecord(&batch, r, .badEncoding, n == 0 ? "empty record value" : "record value is neither zstd (magic 28 B5 2F FD) nor a JSON array")
            return
        }
        let jsonEnd = batch.jsonCount
        // Padding lets the scanner read whole words near the end; zeros stop every fast path.
        batch.reserveJSON(RecordDecoder.padding)
        _ = batch.json.withUnsafeMutableBytes { UnsafeMutableRawBufferPointer(rebasing: $0[jsonEnd..<(jsonEnd + RecordDecoder.padding)]).initializeMemory(as: UInt8.self, repeating: 0) }
        batch.jsonCount += RecordDecoder.padding
        batch.records[r].json = Span(jsonStart, jsonEnd)
        scanRecord(&batch, r, jsonStart, jsonEnd)
    }

    private func scanRecord(_ batch: inout EventBatch, _ r: Int, _ start: Int, _ end: Int) {
        let firstEvent = batch.events.count
        let propBase = batch.properties.count
        var outcome: (DeadLetterReason, String)? = nil
        let maxEvents = limits.maxEventsPerRecord
        // Events and properties go to the decoder's own buffers first and into the batch in one copy per record:
        // no per-element array bookkeeping, and nothing to take back from the batch when the record is malformed.
        events.count = 0
        props.count = 0
        var failedEvents = 0
        knownNames.withView { names in
        batch.json.withUnsafeBufferPointer { jb in
            var s = JSONScanner(base: jb.baseAddress!, start: start, end: end)
            s.skipWhitespace()
            if s.peek() != 0x5B {
                let kind = s.skipValue()
                s.skipWhitespace()
                if s.failed || s.pos != end {
                    outcome = (.badJSON, "malformed JSON at byte \(s.failed ? s.errorPos - start : s.pos - start): \(s.failed ? "\(s.errorWhat)" : "trailing data")")
                } else {
                    outcome = (.notArray, "the JSON value is \(kindName(kind)), not an array")
                }
                return
            }
            s.pos += 1
            s.skipWhitespace()
            var index: Int32 = 0
            if s.peek() == 0x5D {
                s.pos += 1
            } else {
                while !s.failed {
                    if Int(index) >= maxEvents {
                        outcome = (.tooLarge, "record holds more than \(maxEvents) events")
                        return
                    }
                    s.skipWhitespace()
                    var ev = Event(record: Int32(r), index: index, start: s.pos)
                    if s.peek() == 0x7B {
                        scanEvent(&s, &ev, propBase, names)
                    } else {
                        s.skipValue(depth: 1)
                        ev.status = .failed
                        ev.reason = .notObject
                        failedEvents += 1
                    }
                    ev.bytes.end = Int32(s.pos)
                    events.append(ev)
                    index += 1
                    s.skipWhitespace()
                    let c = s.peek()
                    if c == 0x2C { s.pos += 1; continue }
                    if c == 0x5D { s.pos += 1; break }
                    s.fail("expected ',' or ']'")
                }
            }
            s.skipWhitespace()
            if !s.failed && s.pos != end { s.fail("trailing data after the array") }
            if s.failed {
                outcome = (.badJSON, "malformed JSON at byte \(s.errorPos - start): \(s.errorWhat)")
            }
        }
        }
        if let (reason, detail) = outcome {
            failRecord(&batch, r, reason, detail)
            return
        }
        batch.properties.append(contentsOf: props.elements)
        batch.appendDecoded(events.elements, failed: failedEvents)
        batch.records[r].firstEvent = Int32(firstEvent)
        batch.records[r].eventCount = Int32(events.count)
    }

    /// Scans one event object, recording the fields stages need. Does not decide validity: the validate stage does.
    @inline(__always)
    private func scanEvent(_ s: inout JSONScanner, _ ev: inout Event, _ propBase: Int, _ names: KnownNameTable.View) {
        let p = s.p
        let cache = topKeys
        s.pos += 1  // {
        if s.nextByte() == 0x7D { ev.closingBrace = Int32(s.pos); s.pos += 1; return }
        var prev = NameCache.head
        while !s.failed {
            let key = scanKey(&s, cache, &prev, names)
            if s.failed { return }
            let field = key.slot != NameCache.none ? cache.entries[Int(key.slot)].field
                : (key.escaped ? TopField.other : TopField.classify(p, key.start, key.end))
            let c = s.nextByte()
            let vs = s.pos
            switch field {
            case .type:
                if c == 0x22 {
                    let v = s.scanString()
                    ev.typeName = Span(v.start, v.end)
                    ev.type = v.escaped ? .unknown : classifyType(p, v.start, v.end)
                } else { s.skipValue(depth: 1); ev.type = .notString; ev.typeName = .absent }
            case .event:
                if c == 0x22 {
                    let v = s.scanString()
                    ev.eventName = Span(v.start, v.end)
                    ev.eventNameEscaped = v.escaped
                    ev.eventNameIsString = true
                    ev.eventNameValid = v.escaped ? isValidEscapedName(p, v.start, v.end) : isValidName(p, v.start, v.end)
                    ev.eventNameHash = rawHash(p, v.start, v.end)
                } else {
                    s.skipValue(depth: 1); ev.eventName = .absent; ev.eventNameIsString = false
                    ev.eventNameValid = false; ev.eventNameHash = 0
                }
            case .time:
                if c == 0x2D || (c >= 0x30 && c <= 0x39) {
                    let (isInt, v) = s.scanNumber()
                    ev.timeKind = isInt ? 1 : 2
                    ev.time = v
                    ev.clientTime = v
                } else { s.skipValue(depth: 1); ev.timeKind = 2 }
                ev.timeValue = Span(vs, s.pos)
            case .flushTime:
                if c == 0x2D || (c >= 0x30 && c <= 0x39) {
                    let (isInt, v) = s.scanNumber()
                    ev.hasFlushTime = isInt
                    ev.flushTime = v
                } else { s.skipValue(depth: 1); ev.hasFlushTime = false }
            case .trackID:
                if c == 0x2D || (c >= 0x30 && c <= 0x39) {
                    let (isInt, v) = s.scanNumber()
                    ev.hasTrackID = isInt
                    ev.trackID = v
                } else { s.skipValue(depth: 1); ev.hasTrackID = false }
            case .distinctID:
                if c == 0x22 {
                    let v = s.scanString()
                    ev.distinctID = Span(v.start, v.end)
                    ev.distinctIDEscaped = v.escaped
                    ev.distinctIDKind = 1
                    ev.distinctIDLength = Int32(v.decodedLength)
                    ev.distinctIDHash = rawHash(p, v.start, v.end)
                } else { s.skipValue(depth: 1); ev.distinctIDKind = 2; ev.distinctIDHash = 0 }
            case .properties:
                if c == 0x7B {
                    ev.propertiesKind = 1
                    scanProperties(&s, &ev, propBase, names)
                } else {
                    ev.propertiesKind = 2
                    s.skipValue(depth: 1)
                }
                ev.properties = Span(vs, s.pos)
            case .project:
                if c == 0x22 {
                    let v = s.scanString()
                    ev.project = v.escaped ? .absent : Span(v.start, v.end)
                } else { s.skipValue(depth: 1) }
            case .lib, .other:
                // Only `lib` is kept; both are often the same bytes as last time (see `NameCache`).
                var k: ValueKind
                let memo = cache.memoMatch(key.slot, p, vs, s.end)
                if memo > 0 {
                    k = cache.entries[Int(key.slot)].memoKind
                    s.pos = vs &+ memo
                } else {
                    k = s.skipValue(depth: 1)
                    if !s.failed { cache.remember(key.slot, p, vs, s.pos, k, escaped: false, nonString: false, decodedLength: 0) }
                }
                if field == .lib { ev.lib = k == .object ? Span(vs, s.pos) : .absent }
            }
            let d = s.nextByte()
            if d == 0x2C { s.pos += 1; continue }
            if d == 0x7D { ev.closingBrace = Int32(s.pos); s.pos += 1; return }
            s.fail("expected ',' or '}'")
        }
    }

    /// Reads an object key and its `:`: the key that followed `prev` last time when the bytes say so (see
    /// `NameCache`), else `scanKeySlow`. Leaves `s` after the `:`; `prev` becomes the key's slot.
    @inline(__always)
    private func scanKey(_ s: inout JSONScanner, _ cache: NameCache, _ prev: inout Int32, _ names: KnownNameTable.View) -> KeyInfo {
        let guess = cache.entries[Int(prev)].next
        let t = cache.matchKey(guess, s.p, s.pos, s.end)
        if t > 0 {
            let start = s.pos &+ 1
            s.pos &+= t
            prev = guess
            return KeyInfo(slot: guess, start: start, end: start &+ t &- 3, escaped: false)
        }
        return scanKeySlow(&s, cache, &prev, names)
    }

    /// A full key scan and a cache lookup (slot `NameCache.none` for escaped, very long or spaced keys).
    @inline(never)
    private func scanKeySlow(_ s: inout JSONScanner, _ cache: NameCache, _ prev: inout Int32, _ names: KnownNameTable.View) -> KeyInfo {
        guard s.nextByte() == 0x22 else { s.fail("expected a key"); return KeyInfo(slot: NameCache.none, start: s.pos, end: s.pos, escaped: false) }
        let key = s.scanString()
        let slot = key.escaped || s.failed ? NameCache.none : cache.lookup(s.p, key.start, key.end, names)
        cache.entries[Int(prev)].next = slot
        prev = slot
        if s.nextByte() == 0x3A { s.pos += 1 } else { s.fail("expected ':'") }
        return KeyInfo(slot: slot, start: key.start, end: key.end, escaped: key.escaped)
    }

    @inline(__always)
    private func scanProperties(_ s: inout JSONScanner, _ ev: inout Event, _ propBase: Int, _ names: KnownNameTable.View) {
        let p = s.p
        let cache = propertyKeys
        ev.firstProperty = Int32(truncatingIfNeeded: propBase &+ props.count)
        var known: UInt64 = 0
        var issues: UInt8 = 0
        var longest = 0
        s.pos += 1  // {
        if s.nextByte() == 0x7D { s.pos += 1; return }
        var count: Int32 = 0
        var prev = NameCache.head
        while !s.failed {
            let key = scanKey(&s, cache, &prev, names)
            if s.failed { return }
            var nameValid: Bool
            var bit: UInt64
            if key.slot != NameCache.none {
                nameValid = cache.entries[Int(key.slot)].valid
                bit = cache.entries[Int(key.slot)].bit
            } else {
                (nameValid, bit) = nameFacts(p, key, names)
            }
            let c = s.nextByte()
            let vs = s.pos
            var kind = ValueKind.string
            var escaped = false
            var decodedLength = 0
            var nonString = false
            switch c {
            case 0x22:
                let v = s.scanString()
                escaped = v.escaped
                decodedLength = v.decodedLength
            case 0x2D, 0x30...0x39:
                kind = .number
                _ = s.scanNumber()
            case 0x74, 0x66, 0x6E:
                kind = s.scanLiteral(c)
            case 0x5B:
                kind = .array
                nonString = !s.scanArrayAllStrings()
            default:
                kind = s.skipValue(depth: 2)
            }
            // Issue bits without a branch per kind: most properties have none.
            known |= bit
            issues |= (nameValid ? 0 : PropertyIssues.invalidName)
                | (kind == .null ? PropertyIssues.null : 0)
                | (kind == .object && bit != KnownProperty.elementContent.bit ? PropertyIssues.object : 0)
                | (nonString ? PropertyIssues.nonStringArrayElement : 0)
            longest = Swift.max(longest, decodedLength)
            props.append(Property(
                name: Span(key.start, key.end), value: Span(vs, s.pos), kind: kind, nameValid: nameValid,
                nameEscaped: key.escaped, valueEscaped: escaped, arrayHasNonString: nonString,
                decodedLength: Int32(truncatingIfNeeded: decodedLength), fix: .keep, replacement: .absent))
            count += 1
            let d = s.nextByte()
            if d == 0x2C { s.pos += 1; continue }
            if d == 0x7D { s.pos += 1; break }
            s.fail("expected ',' or '}'")
        }
        ev.propertyCount = count
        ev.known = known
        ev.propertyIssues = issues
        ev.longestString = Int32(truncatingIfNeeded: longest)
    }

    @inline(__always)
    private func rawHash(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> UInt64 {
        var h = Hash64()
        h.add(p + start, end &- start)
        return h.value
    }

    /// Whether escaped string content is, unescaped, a valid name.
    @inline(never)
    private func isValidEscapedName(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        let decoded = unescapeJSONString(UnsafeRawBufferPointer(start: p + start, count: end - start))
        return decoded.withUnsafeBufferPointer { isValidName($0.baseAddress!, 0, $0.count) }
    }

    /// Validity and known-property bit of a key the cache does not hold (escaped, long or spaced).
    @inline(never)
    private func nameFacts(_ p: UnsafePointer<UInt8>, _ key: KeyInfo, _ names: KnownNameTable.View) -> (Bool, UInt64) {
        if key.escaped { return (isValidEscapedName(p, key.start, key.end), 0) }
        return (isValidName(p, key.start, key.end), names.classify(p, key.start, key.end))
    }
}

/// An object key as `RecordDecoder.scanKey` read it: its cache slot and raw content.
struct KeyInfo {
    var slot: Int32
    var start: Int
    var end: Int
    var escaped: Bool
}

/// A growable buffer of trivial values the decoder reuses for every record (no per-append array checks).
final class ScanBuffer<Element> {
    private(set) var base: UnsafeMutablePointer<Element>
    private var capacity: Int
    var count = 0

    init(capacity: Int) {
        self.capacity = Swift.max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    @inline(__always) func append(_ e: Element) {
        if count == capacity { grow() }
        (base + count).initialize(to: e)
        count &+= 1
    }

    @inline(never) private func grow() {
        let bigger = UnsafeMutablePointer<Element>.allocate(capacity: capacity * 2)
        bigger.moveInitialize(from: base, count: count)
        base.deallocate()
        base = bigger
        capacity *= 2
    }

    var elements: UnsafeBufferPointer<Element> { UnsafeBufferPointer(start: base, count: count) }
}

private func kindName(_ k: ValueKind) -> String {
    switch k {
    case .string: return "a string"
    case .number: return "a number"
    case .bool: return "a boolean"
    case .null: return "null"
    case .array: return "an array"
    case .object: return "an object"
    }
}

/// The top-level event fields the scanner records.
enum TopField {
    case type, event, time, flushTime, trackID, distinctID, properties, project, lib, other

    /// Which field the key `p[s..<e]` names: compares whole words (little-endian ASCII constants). Reads up
    /// to 8 bytes from `s`, which the arena's padding allows.
    @inline(__always)
    static func classify(_ p: UnsafePointer<UInt8>, _ s: Int, _ e: Int) -> TopField {
        let raw = UnsafeRawPointer(p + s)
        let w = raw.loadUnaligned(as: UInt64.self)
        switch e &- s {
        case 3: return w & 0xFF_FFFF == 0x62_696C ? .lib : .other  // "lib"
        case 4:
            let v = w & 0xFFFF_FFFF
            return v == 0x656D_6974 ? .time : (v == 0x6570_7974 ? .type : .other)  // "time", "type"
        case 5: return w & 0xFF_FFFF_FFFF == 0x74_6E65_7665 ? .event : .other  // "event"
        case 7: return w & 0xFF_FFFF_FFFF_FFFF == 0x74_6365_6A6F_7270 ? .project : .other  // "project"
        case 9: return w == 0x695F_6B63_6172_745F && p[s &+ 8] == 0x64 ? .trackID : .other  // "_track_i" "d"
        case 10:  // "properti" "es"
            return w == 0x6974_7265_706F_7270 && raw.loadUnaligned(fromByteOffset: 8, as: UInt16.self) == 0x7365 ? .properties : .other
        case 11:
            let last = raw.loadUnaligned(fromByteOffset: 3, as: UInt64.self)
            if w == 0x7463_6E69_7473_6964 && last == 0x6469_5F74_636E_6974 { return .distinctID }  // "distinct" "tinct_id"
            if w == 0x745F_6873_756C_665F && last == 0x656D_6974_5F68_7375 { return .flushTime }  // "_flush_t" "ush_time"
            return .other
        default: return .other
        }
    }
}

@inline(__always)
func classifyType(_ p: UnsafePointer<UInt8>, _ s: Int, _ e: Int) -> EventType {
    @inline(__always) func eq(_ lit: StaticString) -> Bool {
        lit.withUTF8Buffer { b in b.count == e - s && memEqual(p + s, b.baseAddress!, b.count) }
    }
    if eq("track") { return .track }
    if eq("track_signup") { return .trackSignup }
    if eq("profile_set") { return .profileSet }
    if eq("profile_set_once") { return .profileSetOnce }
    if eq("profile_increment") { return .profileIncrement }
    if eq("profile_delete") { return .profileDelete }
    if eq("profile_append") { return .profileAppend }
    if eq("profile_unset") { return .profileUnset }
    return .unknown
}
