/// Limits on one input record (wire format §1). Defaults are the wire format's.
public struct RecordLimits: Sendable, Equatable {
    /// Largest accepted record value as received (compressed), bytes.
    public var maxCompressedBytes: Int = 1 << 20
    /// Decompression stops past this many bytes: no decompression bombs.
    public var maxDecompressedBytes: Int = 16 << 20
    /// Largest number of events in one record.
    public var maxEventsPerRecord: Int = 10_000
    /// Most decoded bytes one batch holds (its JSON arena plus its events' and properties' entries): a poll
    /// whose records would pass it is cut after the record that reaches it, and the rest is processed as the
    /// next batch. With the per-record limits this bounds a worker's memory whatever the input (issue 13).
    public var maxBatchBytes: Int = 64 << 20
    /// The wire format's limits: 1 MiB compressed, 16 MiB decompressed, 10,000 events a record, 64 MiB a batch.
    public init() {}
    /// Limits with the given per-record bounds (bytes, bytes, events) and the default batch bound.
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
    /// The size bounds every record and batch is checked against; past them a record is dead-lettered `too_large`.
    public var limits: RecordLimits
    private let zstd = ZstdDecompressor()
    private let knownNames = KnownNameTable()
    /// Keys of events and keys of `properties` objects (see `NameCache`).
    private let topKeys = NameCache()
    private let propertyKeys = NameCache()
    /// The current record's events and properties (see `scanRecord`).
    private let events = ScanBuffer<Event>(capacity: 64)
    private let props = ScanBuffer<Property>(capacity: 1024)
    /// The exact duplicate-key check's keys (start, end, escaped) and their hashes, reused.
    private var keySpans: [(Int, Int, Bool)] = []
    private var keyHashes: [(UInt64, Int32)] = []
    /// Output of the streaming path (frames without a declared size), reused.
    private var streamBuffer: [UInt8] = []
    /// Scanner padding: the JSON arena always has this many readable bytes after any record (the key cache
    /// compares whole words up to 32 bytes from a key's quote).
    static let padding = 32

    /// Helper threads for decompression (`threads - 1` of them), if any.
    private let crew: InflateCrew?
    /// The zstd values a batch's threads decompress (`decodeAllShared`), reused.
    private var plan: [InflateEntry] = []
    /// The arena they decompress into; it then becomes the batch's JSON arena and the batch's old one comes
    /// back here (swapped, never copied).
    private var sharedArena: [UInt8] = []
    /// The batch's input arena while the helpers read it (swapped out of the batch, so that the batch's other
    /// arrays can change meanwhile).
    private var heldInput: [UInt8] = []
    /// Batches decoded with the helpers (tests check that the path ran).
    private(set) var sharedBatches = 0

    /// A decoder on the calling thread and `threads - 1` helper threads that decompress zstd values while it
    /// scans (`source.decode_threads`). The helpers end with the decoder.
    public init(limits: RecordLimits = RecordLimits(), threads: Int = 1) {
        self.limits = limits
        crew = threads > 1 ? InflateCrew(helpers: threads - 1) : nil
    }

    deinit { crew?.stop() }

    /// CPU seconds the helper threads spent decompressing (0 without helpers).
    public var helperCPUSeconds: Double { crew?.helperCPUSeconds ?? 0 }

    /// Decodes every record of the batch that has not been decoded yet, until the batch holds
    /// `limits.maxBatchBytes` (`decodedBytes`). Returns how many records are done: the records after them
    /// were left undecoded (the caller processes them as another batch).
    @discardableResult
    public func decodeAll(_ batch: inout EventBatch) -> Int {
        if let crew, batch.jsonCount == 0, batch.records.count >= 2 * InflateCrew.chunk { return decodeAllShared(&batch, crew) }
        return decodeAllInOrder(&batch)
    }

    /// `decodeAll` on this thread alone.
    private func decodeAllInOrder(_ batch: inout EventBatch) -> Int {
        let budget = limits.maxBatchBytes
        let n = batch.records.count
        for r in 0..<n where !batch.records[r].json.isPresent && batch.records[r].status == .live {
            decode(&batch, record: r)
            if r &+ 1 < n && batch.decodedBytes >= budget { return r &+ 1 }
        }
        return n
    }

    /// `decodeAll` with helper threads, with the same outcome record for record (events, dead letters, where the
    /// batch bound cuts). The zstd values that are one frame declaring a size within the limits, the common case,
    /// get their places in a fresh arena up front, in record order, and are decompressed there by every thread
    /// (`InflateCrew`) while this thread scans them in record order. At the first record that needs anything
    /// else (raw JSON, several frames, no declared size, a frame that does not fill its size), this thread waits
    /// for the helpers, the arena becomes the batch's, and the rest goes on as without helpers: records already
    /// decompressed are scanned where they are, the others take the general path after the planned places.
    private func decodeAllShared(_ batch: inout EventBatch, _ crew: InflateCrew) -> Int {
        let budget = limits.maxBatchBytes
        let n = batch.records.count
        let padding = RecordDecoder.padding
        plan.removeAll(keepingCapacity: true)
        var planned = 0
        batch.input.withUnsafeBytes { inp in
            for r in 0..<n where !batch.records[r].json.isPresent && batch.records[r].status == .live {
                if planned >= budget { break }  // what the bound cuts off is decoded with the next batch
                let value = batch.records[r].value
                guard value.count <= limits.maxCompressedBytes else { continue }
                let v = UnsafeRawBufferPointer(rebasing: inp[Int(value.start)..<Int(value.end)])
                guard ZstdDecompressor.hasMagic(v), let size = zstd.firstFrameContentSize(v), size <= limits.maxDecompressedBytes else { continue }
                plan.append(InflateEntry(record: Int32(r), inputStart: Int(value.start), inputEnd: Int(value.end), at: planned, size: size, ok: false))
                planned += size + padding
            }
        }
        if plan.count < 2 * InflateCrew.chunk { return decodeAllInOrder(&batch) }
        sharedBatches += 1
        if sharedArena.count < planned { sharedArena.append(contentsOf: repeatElement(0, count: planned - sharedArena.count)) }
        // What decoding without helpers would have put in the JSON arena so far: the batch bound counts that.
        var usedJSON = 0
        var cut: Int? = nil
        var resume: Int? = nil
        var p = 0
        swap(&batch.input, &heldInput)
        heldInput.withUnsafeBytes { inp in
            sharedArena.withUnsafeMutableBytes { arena in
                plan.withUnsafeMutableBufferPointer { entries in
                    crew.begin(input: inp.baseAddress!, arena: arena.baseAddress!, entries: entries.baseAddress!, count: entries.count)
                    defer { crew.end() }
                    let json = UnsafePointer(arena.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    for r in 0..<n where !batch.records[r].json.isPresent && batch.records[r].status == .live {
                        guard p < entries.count, entries[p].record == r else { resume = r; break }
                        // Entries are taken in order: once a chunk's first is tried, so are the others.
                        if p % InflateCrew.chunk == 0 { crew.waitFor(entry: p, using: zstd) }
                        guard entries[p].ok else { resume = r; break }
                        let e = entries[p]
                        p += 1
                        // Padding: zeros stop every fast path of the scanner (the helpers never write there).
                        (arena.baseAddress! + e.at + e.size).initializeMemory(as: UInt8.self, repeating: 0, count: padding)
                        let scanned = scanEvents(json, r, e.at, e.at + e.size, batch.properties.count)
                        batch.records[r].json = Span(e.at, e.at + e.size)
                        finishRecord(&batch, r, scanned)
                        usedJSON += e.size + padding
                        if r + 1 < n && usedJSON + batch.decodedBytes >= budget { cut = r + 1; break }  // jsonCount is 0 here
                    }
                }
            }
        }
        swap(&batch.input, &heldInput)
        swap(&batch.json, &sharedArena)
        if let cut {
            // The planned places past the cut stay unused: the bound counts only what the batch holds.
            batch.jsonCount = usedJSON
            return cut
        }
        batch.jsonCount = planned
        guard let resume else { return n }
        for r in resume..<n where !batch.records[r].json.isPresent && batch.records[r].status == .live {
            if p < plan.count && plan[p].record == r && plan[p].ok {
                let e = plan[p]
                p += 1
                let end = e.at + e.size
                _ = batch.json.withUnsafeMutableBytes { UnsafeMutableRawBufferPointer(rebasing: $0[end..<(end + padding)]).initializeMemory(as: UInt8.self, repeating: 0) }
                batch.records[r].json = Span(e.at, end)
                scanRecord(&batch, r, e.at, end)
                usedJSON += e.size + padding
            } else {
                if p < plan.count && plan[p].record == r { p += 1 }
                let before = batch.jsonCount
                decode(&batch, record: r)
                usedJSON += batch.jsonCount - before
            }
            if r + 1 < n && usedJSON + batch.decodedBytes - batch.jsonCount >= budget { return r + 1 }
        }
        return n
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
            if decodeSingleFrame(&batch, value, limit) { break }
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

    /// The common case of a zstd value: one frame that declares its size, decompressed in one call straight into
    /// the arena, without first walking every frame's blocks for the total (`declaredSize`). False for anything
    /// else (several frames, no declared size, over the limit, corrupt data): the general path then decides
    /// and explains.
    @inline(__always)
    private func decodeSingleFrame(_ batch: inout EventBatch, _ value: Span, _ limit: Int) -> Bool {
        var size = -1
        batch.input.withUnsafeBytes { inp in
            size = zstd.firstFrameContentSize(UnsafeRawBufferPointer(rebasing: inp[Int(value.start)..<Int(value.end)])) ?? -1
        }
        guard size >= 0 && size <= limit else { return false }
        batch.reserveJSON(size + RecordDecoder.padding)
        let at = batch.jsonCount
        var ok = false
        batch.input.withUnsafeBytes { inp in
            batch.json.withUnsafeMutableBytes { out in
                ok = zstd.decompressFilling(UnsafeRawBufferPointer(rebasing: inp[Int(value.start)..<Int(value.end)]),
                                            into: UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + size)]))
            }
        }
        if ok { batch.jsonCount += size }
        return ok
    }

    private func scanRecord(_ batch: inout EventBatch, _ r: Int, _ start: Int, _ end: Int) {
        let propBase = batch.properties.count
        let scanned = batch.json.withUnsafeBufferPointer { jb in scanEvents(jb.baseAddress!, r, start, end, propBase) }
        finishRecord(&batch, r, scanned)
    }

    /// Scans the JSON of record `r` (`base[start..<end]`, padded) into the decoder's own buffers: events and
    /// properties go there first and into the batch in one copy per record (`finishRecord`): no per-element array
    /// bookkeeping, and nothing to take back from the batch when the record is malformed. Reads no batch: the
    /// JSON may still be in the decoder's arena (`decodeAllShared`).
    private func scanEvents(_ base: UnsafePointer<UInt8>, _ r: Int, _ start: Int, _ end: Int, _ propBase: Int) -> (outcome: (DeadLetterReason, String)?, failedEvents: Int) {
        var outcome: (DeadLetterReason, String)? = nil
        let maxEvents = limits.maxEventsPerRecord
        events.count = 0
        props.count = 0
        var failedEvents = 0
        knownNames.withView { names in
            var s = JSONScanner(base: base, start: start, end: end)
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
                        if ev.status == .failed { failedEvents += 1 }
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
        return (outcome, failedEvents)
    }

    /// Moves a scanned record's events and properties into the batch, or dead-letters the record.
    private func finishRecord(_ batch: inout EventBatch, _ r: Int, _ scanned: (outcome: (DeadLetterReason, String)?, failedEvents: Int)) {
        if let (reason, detail) = scanned.outcome {
            failRecord(&batch, r, reason, detail)
            return
        }
        let firstEvent = batch.events.count
        batch.properties.append(contentsOf: props.elements)
        batch.appendDecoded(events.elements, failed: scanned.failedEvents)
        batch.records[r].firstEvent = Int32(firstEvent)
        batch.records[r].eventCount = Int32(events.count)
    }

    /// Scans one event object, recording the fields stages need. Does not decide validity: the validate stage
    /// does. Like `scanProperties`, the common case runs on local variables and hands anything else to `s`.
    @inline(never)  // its own inlining budget: everything it calls on the common path inlines into it
    private func scanEvent(_ s: inout JSONScanner, _ ev: inout Event, _ propBase: Int, _ names: KnownNameTable.View) {
        let p = s.p
        let end = s.end
        let cache = topKeys
        let entries = cache.entries
        s.pos += 1  // {
        if s.nextByte() == 0x7D { ev.closingBrace = Int32(s.pos); s.pos += 1; return }
        cache.beginObject()
        var prev = NameCache.head
        var pos = s.pos
        while true {
            guard let key = readKey(&s, &pos, cache, &prev, names) else { return }
            let field = key.field
            let c = nextByte(&s, &pos)
            let vs = pos
            switch field {
            case .type, .event, .distinctID, .project, .anonymousID:
                guard c == 0x22 else {
                    s.pos = pos
                    s.skipValue(depth: 1)
                    if s.failed { return }
                    pos = s.pos
                    switch field {
                    case .type: ev.type = .notString; ev.typeName = .absent
                    case .event: ev.eventName = .absent; ev.eventNameIsString = false; ev.eventNameValid = false; ev.eventNameHash = 0
                    case .distinctID: ev.distinctIDKind = .other; ev.distinctIDHash = 0
                    case .anonymousID: ev.anonymousIDHash = 0
                    default: break
                    }
                    break
                }
                guard let (escaped, decodedLength) = readString(&s, &pos) else { return }
                let cs = vs &+ 1, ce = pos &- 1
                switch field {
                case .type:
                    ev.typeName = Span(cs, ce)
                    ev.type = escaped ? .unknown : classifyType(p, cs, ce)
                case .event:
                    ev.eventName = Span(cs, ce)
                    ev.eventNameEscaped = escaped
                    ev.eventNameIsString = true
                    ev.eventNameValid = escaped ? isValidEscapedName(p, cs, ce) : isValidName(p, cs, ce)
                    ev.eventNameHash = rawHash(p, cs, ce)
                case .distinctID:
                    ev.distinctID = Span(cs, ce)
                    ev.distinctIDEscaped = escaped
                    ev.distinctIDKind = .string
                    ev.distinctIDLength = Int32(decodedLength)
                    ev.distinctIDHash = rawHash(p, cs, ce)
                case .anonymousID:
                    ev.anonymousIDHash = ce == cs ? 0 : (escaped ? decodedHash(p, cs, ce) : rawHash(p, cs, ce))
                default:
                    ev.project = escaped ? .absent : Span(cs, ce)
                }
            case .time, .flushTime, .trackID:
                var isNumber = false
                var isInteger = false
                var value: Int64 = 0
                if c == 0x2D || c &- 0x30 < 10 {
                    isNumber = true
                    let j = s.plainIntegerEnd(pos)
                    if j >= 0 {
                        isInteger = true
                        value = s.plainIntegerValue(pos, j)
                        pos = j
                    } else {
                        s.pos = pos
                        (isInteger, value) = s.scanNumber()
                        if s.failed { return }
                        pos = s.pos
                    }
                } else {
                    s.pos = pos
                    s.skipValue(depth: 1)
                    if s.failed { return }
                    pos = s.pos
                }
                switch field {
                case .time:
                    ev.timeKind = isInteger ? .integer : .other
                    if isNumber { ev.time = value; ev.clientTime = value }
                    ev.timeValue = Span(vs, pos)
                case .flushTime:
                    // A flush time outside the wire format's time range cannot calibrate anything (and its difference
                    // with `received_at` could overflow): the event is taken as sent without one.
                    ev.hasFlushTime = isInteger && EventTimeRange.contains(value)
                    if isNumber { ev.flushTime = value }
                default:
                    ev.hasTrackID = isInteger
                    if isNumber { ev.trackID = value }
                }
            case .properties:
                s.pos = pos
                if c == 0x7B {
                    ev.propertiesKind = .object
                    scanProperties(&s, &ev, propBase, names)
                } else {
                    ev.propertiesKind = .other
                    s.skipValue(depth: 1)
                }
                if s.failed { return }
                pos = s.pos
                ev.properties = Span(vs, pos)
            case .lib, .other:
                // Only `lib` is kept; both are often the same bytes as last time (see `NameCache`).
                var k: ValueKind
                let memo = cache.memoMatch(key.slot, p, vs, end)
                if memo > 0 {
                    k = entries[Int(key.slot)].memoKind
                    pos = vs &+ memo
                } else {
                    let (n, closed) = c == 0x22 ? s.shortPlainString(pos) : (0, false)
                    if closed {
                        k = .string
                        pos &+= n &+ 2
                    } else {
                        s.pos = pos
                        k = s.skipValue(depth: 1)
                        if s.failed { return }
                        pos = s.pos
                    }
                    cache.remember(key.slot, p, vs, pos, k, escaped: false, nonString: false, decodedLength: 0)
                }
                if field == .lib { ev.lib = k == .object ? Span(vs, pos) : .absent }
            }
            let d = nextByte(&s, &pos)
            if d == 0x2C { pos &+= 1; continue }
            s.pos = pos
            if d == 0x7D {
                ev.closingBrace = Int32(pos)
                s.pos += 1
                if cache.duplicate || (cache.unsure && eventHasDuplicateKeys(p, Int(ev.bytes.start), end)) {
                    ev.status = .failed
                    ev.reason = .duplicateKey
                }
                return
            }
            s.fail("expected ',' or '}'")
            return
        }
    }

    /// Reads an object key and its `:` at `pos`: the key that followed `prev` last time when the bytes say so
    /// (see `NameCache`), else `scanKeySlow`. Moves `pos` after the `:`; `prev` becomes the key's slot. Nil
    /// when the JSON is malformed there (`s` holds the error).
    @inline(__always)
    private func readKey(_ s: inout JSONScanner, _ pos: inout Int, _ cache: NameCache, _ prev: inout Int32, _ names: KnownNameTable.View) -> KeyInfo? {
        let (guess, token) = cache.predict(after: prev, s.p, pos, s.end)
        let t = token.length
        if t > 0 {
            let key = KeyInfo(slot: guess, start: pos &+ 1, end: pos &+ t &- 2, escaped: false,
                              valid: token.valid, bit: token.bit, field: token.field)
            prev = guess
            pos &+= t
            cache.see(guess)
            return key
        }
        s.pos = pos
        let key = scanKeySlow(&s, cache, &prev, names)
        if s.failed { return nil }
        pos = s.pos
        cache.see(key.slot)
        return key
    }

    /// Reads the string whose opening quote is at `pos` (short plain ones without leaving local variables) and
    /// moves `pos` past it. Nil when it is malformed (`s` holds the error).
    @inline(__always)
    private func readString(_ s: inout JSONScanner, _ pos: inout Int) -> (escaped: Bool, decodedLength: Int)? {
        let (k, closed) = s.shortPlainString(pos)
        if closed {
            pos &+= k &+ 2
            return (false, k)
        }
        let v = s.scanStringRest(pos &+ 1, Swift.min(pos &+ 1 &+ k, s.end))
        if s.failed { return nil }
        pos = s.pos
        return (v.escaped, v.decodedLength)
    }

    /// The byte at `pos` after skipping whitespace, as `JSONScanner.nextByte`. `p[pos]` is readable up to `end`
    /// included: the arena's padding is zeros, which take the general path.
    @inline(__always)
    private func nextByte(_ s: inout JSONScanner, _ pos: inout Int) -> UInt8 {
        let c = s.p[pos]
        if c > 0x20 { return c }
        s.pos = pos
        let d = s.nextByte()
        pos = s.pos
        return d
    }

    /// A full key scan and a cache lookup (slot `NameCache.none` for escaped, very long or spaced keys).
    @inline(never)
    private func scanKeySlow(_ s: inout JSONScanner, _ cache: NameCache, _ prev: inout Int32, _ names: KnownNameTable.View) -> KeyInfo {
        guard s.nextByte() == 0x22 else {
            s.fail("expected a key")
            return KeyInfo(slot: NameCache.none, start: s.pos, end: s.pos, escaped: false, valid: false, bit: 0, field: .other)
        }
        let key = s.scanString()
        let slot = key.escaped || s.failed ? NameCache.none : cache.lookup(s.p, key.start, key.end, names)
        cache.link(prev, slot)
        prev = slot
        if s.nextByte() == 0x3A { s.pos += 1 } else { s.fail("expected ':'") }
        var info = KeyInfo(slot: slot, start: key.start, end: key.end, escaped: key.escaped, valid: false, bit: 0, field: .other)
        if slot != NameCache.none {
            let t = cache.entries[Int(slot)].token
            (info.valid, info.bit, info.field) = (t.valid, t.bit, t.field)
        } else if !s.failed {
            // Not cached (escaped, very long, or spaced before the colon): work the facts out here.
            (info.valid, info.bit) = nameFacts(s.p, info, names)
            info.field = key.escaped ? .other : TopField.classify(s.p, key.start, key.end)
        }
        return info
    }

    /// Scans a `properties` object into `Property` entries. The common case (predicted key, then a short plain
    /// string, a plain integer or a literal, then `,` or `}` without whitespace) runs on local variables; anything
    /// else hands the position to the general scanner (`s`) and takes it back, so results are the same.
    @inline(never)  // its own inlining budget: everything it calls on the common path inlines into it
    private func scanProperties(_ s: inout JSONScanner, _ ev: inout Event, _ propBase: Int, _ names: KnownNameTable.View) {
        let cache = propertyKeys
        ev.firstProperty = Int32(truncatingIfNeeded: propBase &+ props.count)
        var known: UInt64 = 0
        var issues: UInt8 = 0
        var longest = 0
        s.pos += 1  // {
        if s.nextByte() == 0x7D { s.pos += 1; return }
        var count: Int32 = 0
        cache.beginObject()
        var prev = NameCache.head
        var pos = s.pos
        var out = props.reserve()
        defer { props.count = out.count }
        while true {
            guard let key = readKey(&s, &pos, cache, &prev, names) else { return }
            let nameValid = key.valid
            let bit = key.bit
            // Value.
            let c = nextByte(&s, &pos)
            let vs = pos
            var kind = ValueKind.string
            var escaped = false
            var decodedLength = 0
            var nonString = false
            if c == 0x22 {
                guard let v = readString(&s, &pos) else { return }
                (escaped, decodedLength) = v
            } else if c == 0x2D || c &- 0x30 < 10 {
                kind = .number
                let j = s.plainIntegerEnd(pos)
                if j >= 0 {
                    pos = j
                } else {
                    s.pos = pos
                    _ = s.scanNumber()
                    if s.failed { return }
                    pos = s.pos
                }
            } else {
                s.pos = pos
                switch c {
                case 0x74, 0x66, 0x6E:
                    kind = s.scanLiteral(c)
                case 0x5B:
                    kind = .array
                    nonString = !s.scanArrayAllStrings()
                default:
                    kind = s.skipValue(depth: 2)
                }
                if s.failed { return }
                pos = s.pos
            }
            // Issue bits without a branch per kind: most properties have none.
            known |= bit
            issues |= (nameValid ? 0 : PropertyIssues.invalidName)
                | (kind == .null ? PropertyIssues.null : 0)
                | (kind == .object && bit != KnownProperty.elementContent.bit ? PropertyIssues.object : 0)
                | (nonString ? PropertyIssues.nonStringArrayElement : 0)
                | (bit & KnownProperty.serverOwnedBits != 0 ? PropertyIssues.serverOwned : 0)
            longest = Swift.max(longest, decodedLength)
            out.append(Property(
                name: Span(key.start, key.end), value: Span(vs, pos), kind: kind, nameValid: nameValid,
                nameEscaped: key.escaped, valueEscaped: escaped, arrayHasNonString: nonString,
                decodedLength: Int32(truncatingIfNeeded: decodedLength), fix: .keep,
                known: bit == 0 ? KnownProperty.none : UInt8(truncatingIfNeeded: bit.trailingZeroBitCount), replacement: .absent), props)
            count &+= 1
            let d = nextByte(&s, &pos)
            if d == 0x2C { pos &+= 1; continue }
            if d == 0x7D { pos &+= 1; break }
            s.pos = pos
            s.fail("expected ',' or '}'")
            return
        }
        s.pos = pos
        ev.propertyCount = count
        if cache.duplicate || (cache.unsure && propertiesHaveDuplicateKeys(s.p, Int(ev.firstProperty) &- propBase, out.count)) {
            ev.status = .failed
            ev.reason = .duplicateKey
        }
        ev.known = known
        ev.propertyIssues = issues
        ev.longestString = Int32(truncatingIfNeeded: longest)
    }

    /// The exact duplicate check when the slots could not tell (see `NameCache.unsure`): the keys of the event
    /// object at `p[start]` (`{`), scanned again. Rare: escaped or very long keys.
    @inline(never)
    private func eventHasDuplicateKeys(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        keySpans.removeAll(keepingCapacity: true)
        var s = JSONScanner(base: p, start: start &+ 1, end: end)
        while true {
            guard s.nextByte() == 0x22 else { break }
            let key = s.scanString()
            keySpans.append((key.start, key.end, key.escaped))
            guard s.nextByte() == 0x3A else { break }
            s.pos &+= 1
            s.skipValue(depth: 1)
            guard !s.failed, s.nextByte() == 0x2C else { break }
            s.pos &+= 1
        }
        return hasDuplicateNames(p)
    }

    /// The exact duplicate check for the `count` properties at `first` in the decoder's buffer.
    @inline(never)
    private func propertiesHaveDuplicateKeys(_ p: UnsafePointer<UInt8>, _ first: Int, _ count: Int) -> Bool {
        keySpans.removeAll(keepingCapacity: true)
        for k in first..<count {
            let prop = props.base[k]
            keySpans.append((Int(prop.name.start), Int(prop.name.end), prop.nameEscaped))
        }
        return hasDuplicateNames(p)
    }

    /// Whether two of `keySpans` name the same member once unescaped: hashes sorted, equal neighbours compared
    /// byte for byte (n log n whatever the keys).
    private func hasDuplicateNames(_ p: UnsafePointer<UInt8>) -> Bool {
        if keySpans.count < 2 { return false }
        func name(_ k: Int) -> [UInt8] {
            let (start, end, escaped) = keySpans[k]
            let raw = UnsafeRawBufferPointer(start: p + start, count: end &- start)
            return escaped ? unescapeJSONString(raw) : Array(raw)
        }
        keyHashes.removeAll(keepingCapacity: true)
        for k in keySpans.indices {
            let (start, end, escaped) = keySpans[k]
            var h = Hash64()
            if escaped {
                name(k).withUnsafeBufferPointer { h.add($0.baseAddress!, $0.count) }
            } else {
                h.add(p + start, end &- start)
            }
            keyHashes.append((h.value, Int32(k)))
        }
        keyHashes.sort { $0.0 < $1.0 }
        for k in 1..<keyHashes.count where keyHashes[k].0 == keyHashes[k &- 1].0 {
            if name(Int(keyHashes[k].1)) == name(Int(keyHashes[k &- 1].1)) { return true }
        }
        return false
    }

    @inline(__always)
    private func rawHash(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> UInt64 {
        var h = Hash64()
        h.add(p + start, end &- start)
        return h.value
    }

    /// `Hash64` of escaped string content, unescaped.
    @inline(never)
    private func decodedHash(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> UInt64 {
        let decoded = unescapeJSONString(UnsafeRawBufferPointer(start: p + start, count: end - start))
        var h = Hash64()
        decoded.withUnsafeBufferPointer { if let b = $0.baseAddress { h.add(b, $0.count) } }
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
        if key.escaped {
            // Escapes must not hide a known name (`"$l\u0061te"` is `$late`, which the server owns).
            let decoded = unescapeJSONString(UnsafeRawBufferPointer(start: p + key.start, count: key.end - key.start))
            return decoded.withUnsafeBufferPointer {
                (isValidName($0.baseAddress!, 0, $0.count), names.classify($0.baseAddress!, 0, $0.count))
            }
        }
        return (isValidName(p, key.start, key.end), names.classify(p, key.start, key.end))
    }
}

/// An object key as `RecordDecoder.readKey` read it: its cache slot, raw content and what is known about it.
struct KeyInfo {
    var slot: Int32
    var start: Int
    var end: Int
    var escaped: Bool
    /// A valid name (wire format §2) (unescaped); its `KnownProperty` bit (0 for escaped names); the top-level field.
    var valid: Bool
    var bit: UInt64
    var field: TopField
}

/// A growable buffer of trivial values the decoder reuses for every record (no per-append array checks).
final class ScanBuffer<Element> {
    // Unchecked exclusivity: one decoder on one thread, and no access to these overlaps another (the run-time
    // check costs more than a small append).
    @exclusivity(unchecked) private(set) var base: UnsafeMutablePointer<Element>
    @exclusivity(unchecked) private(set) var capacity: Int
    @exclusivity(unchecked) var count = 0

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

    @inline(never) func grow() {
        let bigger = UnsafeMutablePointer<Element>.allocate(capacity: capacity * 2)
        bigger.moveInitialize(from: base, count: count)
        base.deallocate()
        base = bigger
        capacity *= 2
    }

    var elements: UnsafeBufferPointer<Element> { UnsafeBufferPointer(start: base, count: count) }

    /// An appender that keeps the count in a local (write it back to `count` when done).
    @inline(__always) func reserve() -> Appender { Appender(base: base, capacity: capacity, count: count) }

    struct Appender {
        var base: UnsafeMutablePointer<Element>
        var capacity: Int
        var count: Int

        @inline(__always) mutating func append(_ e: Element, _ owner: ScanBuffer) {
            if count == capacity {
                owner.count = count
                owner.grow()
                base = owner.base
                capacity = owner.capacity
            }
            (base + count).initialize(to: e)
            count &+= 1
        }
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
    case type, event, time, flushTime, trackID, distinctID, properties, project, lib, anonymousID, other

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
        case 12:  // "anonymou" "ymous_id"
            let last = raw.loadUnaligned(fromByteOffset: 4, as: UInt64.self)
            return w == 0x756F_6D79_6E6F_6E61 && last == 0x6469_5F73_756F_6D79 ? .anonymousID : .other
        default: return .other
        }
    }
}

@inline(__always)
func classifyType(_ p: UnsafePointer<UInt8>, _ s: Int, _ e: Int) -> EventType {
    @inline(__always) func eq(_ lit: StaticString) -> Bool {
        lit.withUTF8Buffer { b in b.count == e - s && Bytes.equal(p + s, b.baseAddress!, b.count) }
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
