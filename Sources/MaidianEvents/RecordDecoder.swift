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
    private let nameCache = NameCache()
    /// Output of the streaming path (frames without a declared size), reused.
    private var streamBuffer: [UInt8] = []
    /// Scanner padding: the JSON arena always has this many readable bytes after any record.
    static let padding = 16

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
        let firstProp = batch.properties.count
        var outcome: (DeadLetterReason, String)? = nil
        let maxEvents = limits.maxEventsPerRecord
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
                        scanEvent(&s, &ev, &batch.properties, names)
                    } else {
                        s.skipValue(depth: 1)
                        ev.status = .failed
                        ev.reason = .notObject
                    }
                    ev.bytes.end = Int32(s.pos)
                    batch.appendDecoded(ev)
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
            batch.removeDecoded(from: firstEvent)
            batch.properties.removeSubrange(firstProp...)
            failRecord(&batch, r, reason, detail)
            return
        }
        batch.records[r].firstEvent = Int32(firstEvent)
        batch.records[r].eventCount = Int32(batch.events.count - firstEvent)
    }

    /// Scans one event object, recording the fields stages need. Does not decide validity: the validate stage does.
    @inline(__always)
    private func scanEvent(_ s: inout JSONScanner, _ ev: inout Event, _ props: inout [Property], _ names: KnownNameTable.View) {
        let p = s.p
        s.pos += 1  // {
        s.skipWhitespace()
        if s.peek() == 0x7D { ev.closingBrace = Int32(s.pos); s.pos += 1; return }
        while !s.failed {
            s.skipWhitespace()
            guard s.peek() == 0x22 else { s.fail("expected a key"); return }
            let (key, _) = s.scanKey()
            s.skipWhitespace()
            guard s.peek() == 0x3A else { s.fail("expected ':'"); return }
            s.pos += 1
            s.skipWhitespace()
            let field = key.escaped ? TopField.other : TopField.classify(p, key.start, key.end)
            let c = s.peek()
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
                } else { s.skipValue(depth: 1); ev.eventName = .absent; ev.eventNameIsString = false }
            case .time:
                let vs = s.pos
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
                } else { s.skipValue(depth: 1); ev.distinctIDKind = 2 }
            case .properties:
                let vs = s.pos
                if c == 0x7B {
                    ev.propertiesKind = 1
                    scanProperties(&s, &ev, &props, names)
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
            case .lib:
                let vs = s.pos
                let k = s.skipValue(depth: 1)
                ev.lib = k == .object ? Span(vs, s.pos) : .absent
            case .other:
                s.skipValue(depth: 1)
            }
            s.skipWhitespace()
            let d = s.peek()
            if d == 0x2C { s.pos += 1; continue }
            if d == 0x7D { ev.closingBrace = Int32(s.pos); s.pos += 1; return }
            s.fail("expected ',' or '}'")
        }
    }

    @inline(__always)
    private func scanProperties(_ s: inout JSONScanner, _ ev: inout Event, _ props: inout [Property], _ names: KnownNameTable.View) {
        let p = s.p
        ev.firstProperty = Int32(props.count)
        var known: UInt64 = 0
        var issues: UInt8 = 0
        var longest = 0
        s.pos += 1  // {
        s.skipWhitespace()
        if s.peek() == 0x7D { s.pos += 1; return }
        var count: Int32 = 0
        while !s.failed {
            s.skipWhitespace()
            guard s.peek() == 0x22 else { s.fail("expected a key"); return }
            let key = s.scanString()
            var (nameValid, bit) = key.escaped ? (false, UInt64(0)) : nameCache.lookup(p, key.start, key.end, names)
            s.skipWhitespace()
            guard s.peek() == 0x3A else { s.fail("expected ':'"); return }
            s.pos += 1
            s.skipWhitespace()
            let vs = s.pos
            let c = s.peek()
            var kind: ValueKind
            var escaped = false
            var decodedLength = 0
            var nonString = false
            switch c {
            case 0x22:
                let v = s.scanString()
                kind = .string
                escaped = v.escaped
                decodedLength = v.decodedLength
            case 0x2D, 0x30...0x39:
                kind = .number
                s.skipNumber()
            case 0x5B:
                kind = .array
                nonString = !s.scanArrayAllStrings()
            default:
                kind = s.skipValue(depth: 2)
            }
            if key.escaped {
                let decoded = unescapeJSONString(UnsafeRawBufferPointer(start: p + key.start, count: key.end - key.start))
                nameValid = decoded.withUnsafeBufferPointer { isValidName($0.baseAddress!, 0, $0.count) }
                bit = 0
            }
            known |= bit
            if !nameValid { issues |= PropertyIssues.invalidName }
            switch kind {
            case .null: issues |= PropertyIssues.null
            case .object: if bit != KnownProperty.elementContent.bit { issues |= PropertyIssues.object }
            case .array: if nonString { issues |= PropertyIssues.nonStringArrayElement }
            case .string: if decodedLength > longest { longest = decodedLength }
            default: break
            }
            props.append(Property(
                name: Span(key.start, key.end), value: Span(vs, s.pos), kind: kind, nameValid: nameValid,
                nameEscaped: key.escaped, valueEscaped: escaped, arrayHasNonString: nonString,
                decodedLength: Int32(truncatingIfNeeded: decodedLength), fix: .keep, replacement: .absent))
            count += 1
            s.skipWhitespace()
            let d = s.peek()
            if d == 0x2C { s.pos += 1; continue }
            if d == 0x7D { s.pos += 1; break }
            s.fail("expected ',' or '}'")
        }
        ev.propertyCount = count
        ev.known = known
        ev.propertyIssues = issues
        ev.longestString = Int32(truncatingIfNeeded: longest)
    }
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

    @inline(__always)
    static func classify(_ p: UnsafePointer<UInt8>, _ s: Int, _ e: Int) -> TopField {
        @inline(__always) func eq(_ lit: StaticString) -> Bool {
            lit.withUTF8Buffer { b in memEqual(p + s, b.baseAddress!, b.count) }
        }
        switch e - s {
        case 3: return eq("lib") ? .lib : .other
        case 4: return eq("time") ? .time : (eq("type") ? .type : .other)
        case 5: return eq("event") ? .event : .other
        case 7: return eq("project") ? .project : .other
        case 9: return eq("_track_id") ? .trackID : .other
        case 10: return eq("properties") ? .properties : .other
        case 11: return eq("distinct_id") ? .distinctID : (eq("_flush_time") ? .flushTime : .other)
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
