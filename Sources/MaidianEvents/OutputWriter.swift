/// One serialized output record waiting to be produced.
public struct OutputMessage: Sendable {
    /// Index into `OutputBuffer.topics`.
    public var topic: Int32
    /// In `OutputBuffer.bytes`; absent for no key.
    public var key: Span
    /// In `OutputBuffer.bytes`: the serialized record value.
    public var value: Span
    /// The input record it derives from (its offset is committed only after this is delivered).
    public var record: Int32
    /// An explicit partition, or -1 for the producer's partitioner (by key).
    public var partition: Int32 = -1
}

/// The serialized outputs of one batch. Reused across batches.
public struct OutputBuffer: Sendable {
    /// Output topic names; `OutputMessage.topic` indexes it (`topicIndex(_:)` adds one).
    public var topics: [String] = []
    /// The keys and values of all messages back to back, addressed by their `Span`s.
    public var bytes: [UInt8] = []
    /// The batch's output messages, in the order they are produced.
    public var messages: [OutputMessage] = []
    /// The most bytes of key and value a message may have: the producer's `message.max.bytes` less
    /// `recordOverhead` (see `maxMessageBytes(producerLimit:)`). Dead letters are written within it; other
    /// outputs over it are replaced by `too_large` dead letters (`OutputWriter.divertOversized`).
    public var maxMessageBytes = OutputBuffer.maxMessageBytes(producerLimit: OutputBuffer.defaultProducerLimit)
    /// The dead-letter topic's index, set by the dead-letter output when it runs; -1 when there is none.
    public var deadLetterTopic: Int32 = -1
    /// Dead letters written with a truncated payload since this was last cleared (counted by the worker).
    public var truncatedDeadLetters = 0
    /// Dead letters not written at all because even truncated they pass `maxMessageBytes` (only with a
    /// `message.max.bytes` below about 200 KB), since this was last cleared.
    public var droppedDeadLetters = 0

    /// librdkafka's default `message.max.bytes`.
    public static let defaultProducerLimit = 1_000_000
    /// Bytes kept free below `message.max.bytes` for what librdkafka adds to key and value when it checks
    /// a message's size (lengths, timestamp, headers count: under 40 bytes) and for the batch around it.
    public static let recordOverhead = 1024
    /// The most bytes of its payload a dead letter keeps when the whole would be too large (wire format §1).
    public static let truncatedPayloadBytes = 64 << 10

    /// `maxMessageBytes` for a producer whose `message.max.bytes` is `producerLimit`.
    public static func maxMessageBytes(producerLimit: Int) -> Int { max(0, producerLimit - recordOverhead) }

    /// An empty buffer with room reserved for a large batch (8 MiB of bytes, 8192 messages).
    public init() {
        bytes.reserveCapacity(8 << 20)
        messages.reserveCapacity(8192)
    }

    /// Empties bytes and messages for the next batch, keeping capacity and the topic list (indices stay valid).
    public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        messages.removeAll(keepingCapacity: true)
    }

    /// Index of a topic name, adding it if new.
    public mutating func topicIndex(_ name: String) -> Int32 {
        if let i = topics.firstIndex(of: name) { return Int32(i) }
        topics.append(name)
        return Int32(topics.count - 1)
    }

    /// Starts a key: bytes written until `beginValue` are the key.
    @inline(__always) public func begin() -> Int { bytes.count }

    /// Finishes a message whose key is `bytes[keyStart..<valueStart]` and value `bytes[valueStart...]`.
    @inline(__always) public mutating func finish(topic: Int32, record: Int32, keyStart: Int, valueStart: Int, hasKey: Bool = true, partition: Int32 = -1) {
        messages.append(OutputMessage(
            topic: topic, key: hasKey ? Span(keyStart, valueStart) : .absent,
            value: Span(valueStart, bytes.count), record: record, partition: partition))
    }

    /// A message's value as text (tests, demo).
    public func valueString(_ i: Int) -> String {
        let m = messages[i]
        return String(decoding: bytes[Int(m.value.start)..<Int(m.value.end)], as: UTF8.self)
    }

    /// A message's key as text (tests, demo).
    public func keyString(_ i: Int) -> String? {
        let m = messages[i]
        guard m.key.isPresent else { return nil }
        return String(decoding: bytes[Int(m.key.start)..<Int(m.key.end)], as: UTF8.self)
    }
}

/// Writes events and dead letters in wire format §5 formats, splicing fixes and added properties into the
/// original event bytes rather than re-serializing the event.
public enum OutputWriter {
    /// Writes every live event of the batch to `topic` (key `distinct_id`).
    public static func writeEnriched(_ batch: borrowing EventBatch, topic: Int32, into out: inout OutputBuffer) {
        let count = batch.events.count
        if count == 0 { return }
        // One pass for an upper bound of the bytes, one grow of `out.bytes`, then every event is copied
        // straight into that storage: per-chunk `Array.append` (capacity and uniqueness checks, not inlined)
        // was a measurable share of the job. The unused tail is cut off at the end.
        var bound = 0
        batch.events.withUnsafeBufferPointer { evs in
            for i in 0..<count where evs[i].status == .live {
                bound &+= Int(evs[i].distinctID.count) &+ valueBound(evs[i], batch)
            }
        }
        if bound == 0 { return }
        let base = out.bytes.count
        out.bytes.append(contentsOf: repeatElement(0, count: bound))
        var messages = [OutputMessage]()
        swap(&messages, &out.messages)
        defer { swap(&messages, &out.messages) }
        let written = out.bytes.withUnsafeMutableBufferPointer { ob -> Int in
            let o = ob.baseAddress! + base
            var w = OutputCursor(o, end: o + bound)
            batch.json.withUnsafeBufferPointer { jb in
                let j = jb.baseAddress!
                batch.scratch.withUnsafeBufferPointer { sb in
                    let s = sb.baseAddress ?? j
                    batch.events.withUnsafeBufferPointer { evs in
                        for i in 0..<count where evs[i].status == .live {
                            let ev = evs[i]
                            let keyStart = base &+ (w.p - o)
                            if ev.distinctIDEscaped {
                                let id = unescapeJSONString(UnsafeRawBufferPointer(start: j + Int(ev.distinctID.start), count: ev.distinctID.count))
                                id.withUnsafeBufferPointer { w.copy($0.baseAddress, $0.count) }
                            } else {
                                w.copy(j + Int(ev.distinctID.start), ev.distinctID.count)
                            }
                            let valueStart = base &+ (w.p - o)
                            writeEvent(ev, batch, j, s, &w)
                            messages.append(OutputMessage(
                                topic: topic, key: Span(keyStart, valueStart),
                                value: Span(valueStart, base &+ (w.p - o)), record: ev.record))
                        }
                    }
                }
            }
            return w.p - o
        }
        // Past the bound would have written over memory not ours: a wrong bound is a bug, never input.
        precondition(written <= bound, "writeEnriched: output bound \(bound) passed (\(written))")
        out.bytes.removeLast(bound - written)
    }

    /// The most bytes `writeEvent` writes for `ev`: its input bytes, plus a rewritten time (at most 20
    /// characters), the added properties with their commas (and a new `"properties":{}` object), and
    /// replacement values (names, commas and kept values never pass what the input had).
    @inline(__always)
    static func valueBound(_ ev: Event, _ batch: borrowing EventBatch) -> Int {
        var n = Int(ev.bytes.count)
        if ev.type.isProfile || (!ev.calibrated && ev.addedHead < 0 && !ev.hasFixes) { return n }
        if ev.calibrated { n &+= 20 }
        if ev.addedHead >= 0 {
            n &+= 16
            var a = ev.addedHead
            while a >= 0 {
                let add = batch.added[Int(a)]
                n &+= Int(add.bytes.count) &+ 1
                a = add.next
            }
        }
        if ev.hasFixes {
            n &+= 2
            let lo = Int(ev.firstProperty), hi = lo + Int(ev.propertyCount)
            for i in lo..<hi where batch.properties[i].fix == .replace { n &+= Int(batch.properties[i].replacement.count) }
        }
        return n
    }

    /// The event with its fixes, calibration and added properties, in the input format.
    @inline(__always)
    static func writeEvent(_ ev: Event, _ batch: borrowing EventBatch, _ j: UnsafePointer<UInt8>, _ s: UnsafePointer<UInt8>, _ o: inout OutputCursor) {
        let start = Int(ev.bytes.start), end = Int(ev.bytes.end)
        if ev.type.isProfile || (!ev.calibrated && ev.addedHead < 0 && !ev.hasFixes) {
            o.copy(j + start, end - start)
            return
        }
        // Up to two edits, applied in position order: the time value and the properties object.
        var cursor = start
        let timeFirst = ev.calibrated && (ev.propertiesKind != .object || ev.timeValue.start < ev.properties.start)
        if timeFirst { cursor = writeTime(ev, j, cursor, &o) }
        if ev.propertiesKind == .object {
            let ps = Int(ev.properties.start), pe = Int(ev.properties.end)
            if ev.hasFixes {
                o.copy(j + cursor, ps - cursor)
                writeFixedProperties(ev, batch, j, s, &o)
                cursor = pe
            } else {
                // Insert before the closing brace of the object; the brace goes out with the bytes after it.
                let close = pe - 1
                o.copy(j + cursor, close - cursor)
                if ev.addedHead >= 0 {
                    var first = ev.propertyCount == 0
                    appendAdded(ev, batch, s, &first, &o)
                }
                cursor = close
            }
        } else if ev.addedHead >= 0 {
            let close = Int(ev.closingBrace)
            o.copy(j + cursor, close - cursor)
            o.raw(",\"properties\":{")
            var first = true
            appendAdded(ev, batch, s, &first, &o)
            o.byte(0x7D)
            cursor = close
        }
        if ev.calibrated && !timeFirst { cursor = writeTime(ev, j, cursor, &o) }
        o.copy(j + cursor, end - cursor)
    }

    @inline(__always)
    static func writeTime(_ ev: Event, _ j: UnsafePointer<UInt8>, _ cursor: Int, _ o: inout OutputCursor) -> Int {
        let ts = Int(ev.timeValue.start)
        o.copy(j + cursor, ts - cursor)
        o.int(ev.time)
        return Int(ev.timeValue.end)
    }

    @inline(__always)
    static func appendAdded(_ ev: Event, _ batch: borrowing EventBatch, _ s: UnsafePointer<UInt8>, _ first: inout Bool, _ o: inout OutputCursor) {
        var a = ev.addedHead
        while a >= 0 {
            let add = batch.added[Int(a)]
            if !first { o.byte(0x2C) }
            first = false
            o.copy(s + Int(add.bytes.start), add.bytes.count)
            a = add.next
        }
    }

    static func writeFixedProperties(_ ev: Event, _ batch: borrowing EventBatch, _ j: UnsafePointer<UInt8>, _ s: UnsafePointer<UInt8>, _ o: inout OutputCursor) {
        o.byte(0x7B)
        var first = true
        let lo = Int(ev.firstProperty), hi = lo + Int(ev.propertyCount)
        for i in lo..<hi {
            let p = batch.properties[i]
            if p.fix == .drop { continue }
            if !first { o.byte(0x2C) }
            first = false
            o.byte(0x22)
            o.copy(j + Int(p.name.start), p.name.count)
            o.byte(0x22)
            o.byte(0x3A)
            if p.fix == .replace {
                o.copy(s + Int(p.replacement.start), p.replacement.count)
            } else {
                o.copy(j + Int(p.value.start), p.value.count)
            }
        }
        appendAdded(ev, batch, s, &first, &o)
        o.byte(0x7D)
    }

    /// Writes every failed record and failed event of the batch to `topic` (key: the input record's key).
    ///
    /// A dead letter that would pass `out.maxMessageBytes` keeps only the first `truncatedPayloadBytes` of
    /// its payload (`payload_b64` of the value's first bytes; `payload` as a JSON string of the event's
    /// first bytes, cut at a character) and says `"truncated": true`; a key over that size is left out.
    public static func writeDeadLetters(_ batch: borrowing EventBatch, topic: Int32, into out: inout OutputBuffer) {
        for r in 0..<batch.records.count {
            let rec = batch.records[r]
            // A key that alone takes a big share of the limit is left out (wire format §1: no input stops a worker).
            let hasKey = rec.key.isPresent && rec.key.count <= OutputBuffer.truncatedPayloadBytes
            if rec.status == .failed {
                let keyStart = out.bytes.count
                if hasKey { out.bytes.append(contentsOf: batch.input[Int(rec.key.start)..<Int(rec.key.end)]) }
                let valueStart = out.bytes.count
                writeDeadLetterHead(batch, rec, reason: rec.reason, detail: rec.detail, &out.bytes)
                let full = rec.value.count
                let whole = out.bytes.count - keyStart + 32 + (full + 2) / 3 * 4 <= out.maxMessageBytes
                let kept = whole ? full : min(full, OutputBuffer.truncatedPayloadBytes)
                JSONOut.appendRaw(",\"payload_b64\":\"", to: &out.bytes)
                batch.input.withUnsafeBufferPointer { ib in
                    let start = Int(rec.value.start)
                    Base64.encode(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(ib)[start..<start + kept]), into: &out.bytes)
                }
                JSONOut.appendRaw("\"", to: &out.bytes)
                finishDeadLetter(&out, topic: topic, record: Int32(r), keyStart: keyStart, valueStart: valueStart, hasKey: hasKey, truncated: !whole || hasKey != rec.key.isPresent)
                continue
            }
            let lo = Int(rec.firstEvent), hi = lo + Int(rec.eventCount)
            for e in lo..<hi where batch.events[e].status == .failed {
                let ev = batch.events[e]
                let keyStart = out.bytes.count
                if hasKey { out.bytes.append(contentsOf: batch.input[Int(rec.key.start)..<Int(rec.key.end)]) }
                let valueStart = out.bytes.count
                writeDeadLetterHead(batch, rec, reason: ev.reason, detail: -1, &out.bytes)
                JSONOut.appendRaw(",\"index\":", to: &out.bytes)
                JSONOut.appendInt(Int64(ev.index), to: &out.bytes)
                JSONOut.appendRaw(",\"payload\":", to: &out.bytes)
                let whole = out.bytes.count - keyStart + 32 + ev.bytes.count <= out.maxMessageBytes
                batch.json.withUnsafeBufferPointer { jb in
                    let payload = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(jb)[Int(ev.bytes.start)..<Int(ev.bytes.end)])
                    if whole { out.bytes.append(contentsOf: payload) } else { appendTruncatedText(payload, to: &out.bytes) }
                }
                finishDeadLetter(&out, topic: topic, record: Int32(r), keyStart: keyStart, valueStart: valueStart, hasKey: hasKey, truncated: !whole || hasKey != rec.key.isPresent)
            }
        }
    }

    /// Closes a dead letter written from `valueStart` (adding `"truncated": true` when asked) and adds its
    /// message; leaves it out, counted, when it still passes `out.maxMessageBytes`.
    private static func finishDeadLetter(_ out: inout OutputBuffer, topic: Int32, record: Int32, keyStart: Int, valueStart: Int, hasKey: Bool, truncated: Bool) {
        if truncated {
            JSONOut.appendRaw(",\"truncated\":true", to: &out.bytes)
            out.truncatedDeadLetters += 1
        }
        out.bytes.append(0x7D)
        if out.bytes.count - keyStart > out.maxMessageBytes {
            out.bytes.removeSubrange(keyStart...)
            out.droppedDeadLetters += 1
            return
        }
        out.finish(topic: topic, record: record, keyStart: keyStart, valueStart: valueStart, hasKey: hasKey)
    }

    /// Appends a `too_large` dead letter for an output of `topic` whose first bytes are `head` (at least
    /// `truncatedPayloadBytes` of them when it has that many): `{"reason":"too_large","detail":...,
    /// "source":{...},"topic":...,"payload":"<first 64 KiB>","truncated":true}`, `payload_b64` when the output
    /// is not UTF-8 text.
    public static func writeTooLarge(topic: String, head v: UnsafeRawBufferPointer, detail: String, source from: OutputSource?, into o: inout [UInt8]) {
        JSONOut.appendRaw("{\"reason\":\"too_large\",\"detail\":", to: &o)
        JSONOut.appendString(detail, to: &o)
        if let from {
            JSONOut.appendRaw(",\"source\":{\"topic\":", to: &o)
            JSONOut.appendString(from.topic, to: &o)
            JSONOut.appendRaw(",\"partition\":", to: &o)
            JSONOut.appendInt(Int64(from.partition), to: &o)
            JSONOut.appendRaw(",\"offset\":", to: &o)
            JSONOut.appendInt(from.offset, to: &o)
            o.append(0x7D)
        }
        JSONOut.appendRaw(",\"topic\":", to: &o)
        JSONOut.appendString(topic, to: &o)
        let text = UnsafeRawBufferPointer(rebasing: v[0..<textCut(v)])
        if String(validating: text, as: UTF8.self) != nil {
            JSONOut.appendRaw(",\"payload\":\"", to: &o)
            JSONOut.appendEscaped(text, to: &o)
        } else {
            JSONOut.appendRaw(",\"payload_b64\":\"", to: &o)
            Base64.encode(UnsafeRawBufferPointer(rebasing: v[0..<min(v.count, OutputBuffer.truncatedPayloadBytes)]), into: &o)
        }
        o.append(0x22)
        JSONOut.appendRaw(",\"truncated\":true}", to: &o)
    }

    /// The first `truncatedPayloadBytes` of `text` (cut before a UTF-8 continuation byte) as a JSON string.
    private static func appendTruncatedText(_ text: UnsafeRawBufferPointer, to o: inout [UInt8]) {
        o.append(0x22)
        JSONOut.appendEscaped(UnsafeRawBufferPointer(rebasing: text[0..<textCut(text)]), to: &o)
        o.append(0x22)
    }

    /// How many of the first bytes of `text` to keep: `truncatedPayloadBytes` at most, not splitting a
    /// UTF-8 sequence (so that valid text stays valid).
    private static func textCut(_ text: UnsafeRawBufferPointer) -> Int {
        var cut = min(text.count, OutputBuffer.truncatedPayloadBytes)
        var back = 0
        while cut < text.count && cut > 0 && back < 3 && text[cut] & 0xC0 == 0x80 { cut -= 1; back += 1 }
        return cut
    }

    /// Where an output came from, for the dead letter that replaces it when it is too large.
    public struct OutputSource {
        /// Name of the input record's topic.
        public var topic: String
        /// Partition of the input record.
        public var partition: Int32
        /// Offset of the input record in its partition.
        public var offset: Int64
        /// The input record's key, if it has one.
        public var key: [UInt8]?
        /// The input record at `offset` of `topic`/`partition`, with its key when known.
        public init(topic: String, partition: Int32, offset: Int64, key: [UInt8]?) {
            self.topic = topic
            self.partition = partition
            self.offset = offset
            self.key = key
        }
    }

    /// Where the outputs of record `r` of `batch` came from (its topic, partition, offset and key); nil
    /// when `batch` has no such record.
    public static func source(record r: Int32, in batch: borrowing EventBatch) -> OutputSource? {
        guard r >= 0, Int(r) < batch.records.count else { return nil }
        let rec = batch.records[Int(r)]
        let key = rec.key.isPresent ? Array(batch.input[Int(rec.key.start)..<Int(rec.key.end)]) : nil
        let topic = Int(rec.topic) < batch.topics.count ? batch.topics[Int(rec.topic)] : ""
        return OutputSource(topic: topic, partition: rec.partition, offset: rec.offset, key: key)
    }

    /// Replaces each message whose key and value pass `out.maxMessageBytes` (the producer would refuse it)
    /// by a `too_large` dead letter on `out.deadLetterTopic`, in its place and for the same input record:
    /// `{"reason":"too_large","detail":...,"source":{...},"topic":<the output's topic>,"payload":...,
    /// "truncated":true}`, the payload being the first `truncatedPayloadBytes` of the output as a JSON string
    /// (`payload_b64` when the output is not UTF-8 text). Without a dead-letter topic, or when even that does
    /// not fit, the message is left out. `source` gives a message's input record (`OutputMessage.record`),
    /// nil for outputs of no single record. Returns how many messages were replaced and left out.
    public static func divertOversized(_ out: inout OutputBuffer, source: (Int32) -> OutputSource?) -> (diverted: Int, dropped: Int) {
        let limit = out.maxMessageBytes
        guard out.messages.contains(where: { ($0.key.isPresent ? $0.key.count : 0) + $0.value.count > limit }) else { return (0, 0) }
        var diverted = 0, dropped = 0
        var kept = 0
        for i in out.messages.indices {
            let m = out.messages[i]
            let size = (m.key.isPresent ? m.key.count : 0) + m.value.count
            if size <= limit {
                out.messages[kept] = m
                kept += 1
                continue
            }
            guard out.deadLetterTopic >= 0, m.topic != out.deadLetterTopic else { dropped += 1; continue }
            let from = m.record >= 0 ? source(m.record) : nil
            let key = from?.key.flatMap { $0.count <= OutputBuffer.truncatedPayloadBytes ? $0 : nil }
            let keyStart = out.bytes.count
            if let key { out.bytes.append(contentsOf: key) }
            let valueStart = out.bytes.count
            // Copied out first: appending to `out.bytes` may move it.
            let value = Array(out.bytes[Int(m.value.start)..<Int(m.value.start) + min(m.value.count, OutputBuffer.truncatedPayloadBytes + 4)])
            value.withUnsafeBytes { v in
                writeTooLarge(
                    topic: out.topics[Int(m.topic)], head: v,
                    detail: "the \(out.topics[Int(m.topic)]) record of \(size) bytes is over the producer's limit of \(limit)",
                    source: from, into: &out.bytes)
            }
            if out.bytes.count - keyStart > limit {
                out.bytes.removeSubrange(keyStart...)
                dropped += 1
                continue
            }
            out.messages[kept] = OutputMessage(
                topic: out.deadLetterTopic, key: key != nil ? Span(keyStart, valueStart) : .absent,
                value: Span(valueStart, out.bytes.count), record: m.record)
            kept += 1
            diverted += 1
        }
        out.messages.removeSubrange(kept...)
        return (diverted, dropped)
    }

    private static func writeDeadLetterHead(_ batch: borrowing EventBatch, _ rec: InputRecord, reason: DeadLetterReason, detail: Int32, _ o: inout [UInt8]) {
        JSONOut.appendRaw("{\"reason\":\"", to: &o)
        JSONOut.appendRaw(reason.staticName, to: &o)
        JSONOut.appendRaw("\",\"detail\":", to: &o)
        JSONOut.appendString(detail >= 0 ? batch.details[Int(detail)] : reason.defaultDetail, to: &o)
        JSONOut.appendRaw(",\"source\":{\"topic\":", to: &o)
        JSONOut.appendString(batch.topics.isEmpty ? "" : batch.topics[Int(rec.topic)], to: &o)
        JSONOut.appendRaw(",\"partition\":", to: &o)
        JSONOut.appendInt(Int64(rec.partition), to: &o)
        JSONOut.appendRaw(",\"offset\":", to: &o)
        JSONOut.appendInt(rec.offset, to: &o)
        o.append(0x7D)
    }
}

extension DeadLetterReason {
    /// The detail text for event-level reasons (stages may set a more precise one on the record).
    public var defaultDetail: String {
        switch self {
        case .notObject: return "the event is not a JSON object"
        case .badType: return "'type' is missing or not one of track, track_signup, profile_*"
        case .badEventName: return "a track event needs 'event' matching ^[A-Za-z_$][A-Za-z0-9_$]{0,99}$"
        case .badTime: return "'time' is missing, not an integer (ms since the epoch) or not in 2015-01-01 ..< 2100-01-01"
        case .badDistinctID: return "'distinct_id' is missing, empty, not a string or longer than 255 bytes"
        case .badProperties: return "'properties' is present and not an object"
        case .duplicateKey: return "a member name appears twice in the event object or in its 'properties'"
        default: return description
        }
    }
}

/// A write position in storage reserved beforehand (`OutputWriter.writeEnriched`): plain stores, no
/// capacity checks; the caller sized the storage for everything written.
@usableFromInline struct OutputCursor {
    @usableFromInline var p: UnsafeMutablePointer<UInt8>
    /// The end of the reserved storage: debug builds (the tests, the debug `maidian`) check every write
    /// against it, so a wrong bound fails there before it writes past; release builds trust the bound.
    let end: UnsafeMutablePointer<UInt8>
    @inline(__always) init(_ p: UnsafeMutablePointer<UInt8>, end: UnsafeMutablePointer<UInt8>) { self.p = p; self.end = end }

    @inline(__always) mutating func copy(_ src: UnsafePointer<UInt8>?, _ n: Int) {
        guard n > 0, let src else { return }
        assert(n <= end - p, "OutputCursor: write past the reserved bound")
        p.update(from: src, count: n)
        p += n
    }
    @inline(__always) mutating func byte(_ b: UInt8) {
        assert(p < end, "OutputCursor: write past the reserved bound")
        p.pointee = b; p += 1
    }
    @inline(__always) mutating func raw(_ s: StaticString) { copy(s.utf8Start, s.utf8CodeUnitCount) }

    /// A decimal integer (at most 20 characters).
    @inline(__always) mutating func int(_ v: Int64) {
        if v == 0 { byte(0x30); return }
        if v < 0 { byte(0x2D) }
        var x = v.magnitude
        var digits = 1
        var t = x / 10
        while t > 0 { digits &+= 1; t /= 10 }
        assert(digits <= end - p, "OutputCursor: write past the reserved bound")
        var q = p + digits
        while x > 0 {
            q -= 1
            q.pointee = UInt8(truncatingIfNeeded: x % 10) &+ 0x30
            x /= 10
        }
        p += digits
    }
}
