/// One serialized output record waiting to be produced.
public struct OutputMessage: Sendable {
    /// Index into `OutputBuffer.topics`.
    public var topic: Int32
    /// In `OutputBuffer.bytes`; absent for no key.
    public var key: Span
    public var value: Span
    /// The input record it derives from (its offset is committed only after this is delivered).
    public var record: Int32
    /// An explicit partition, or -1 for the producer's partitioner (by key).
    public var partition: Int32 = -1
}

/// The serialized outputs of one batch. Reused across batches.
public struct OutputBuffer: Sendable {
    public var topics: [String] = []
    public var bytes: [UInt8] = []
    public var messages: [OutputMessage] = []

    public init() {
        bytes.reserveCapacity(8 << 20)
        messages.reserveCapacity(8192)
    }

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
        batch.json.withUnsafeBufferPointer { jb in
            let j = jb.baseAddress!
            batch.events.withUnsafeBufferPointer { evs in
                for i in 0..<count where evs[i].status == .live {
                    let ev = evs[i]
                    let keyStart = out.bytes.count
                    if ev.distinctIDEscaped {
                        out.bytes.append(contentsOf: unescapeJSONString(UnsafeRawBufferPointer(start: j + Int(ev.distinctID.start), count: ev.distinctID.count)))
                    } else {
                        out.bytes.append(contentsOf: UnsafeRawBufferPointer(start: j + Int(ev.distinctID.start), count: ev.distinctID.count))
                    }
                    let valueStart = out.bytes.count
                    writeEvent(ev, batch, j, &out.bytes)
                    out.finish(topic: topic, record: ev.record, keyStart: keyStart, valueStart: valueStart)
                }
            }
        }
    }

    /// The event with its fixes, calibration and added properties, in the input format.
    @inline(__always)
    static func writeEvent(_ ev: Event, _ batch: borrowing EventBatch, _ j: UnsafePointer<UInt8>, _ o: inout [UInt8]) {
        let start = Int(ev.bytes.start), end = Int(ev.bytes.end)
        if ev.type.isProfile || (!ev.calibrated && ev.addedHead < 0 && !ev.hasFixes) {
            o.append(contentsOf: UnsafeRawBufferPointer(start: j + start, count: end - start))
            return
        }
        // Up to two edits, applied in position order: the time value and the properties object.
        var cursor = start
        let timeFirst = ev.calibrated && (ev.propertiesKind != 1 || ev.timeValue.start < ev.properties.start)
        if timeFirst { cursor = writeTime(ev, j, cursor, &o) }
        if ev.propertiesKind == 1 {
            let ps = Int(ev.properties.start), pe = Int(ev.properties.end)
            if ev.hasFixes {
                o.append(contentsOf: UnsafeRawBufferPointer(start: j + cursor, count: ps - cursor))
                writeFixedProperties(ev, batch, j, &o)
                cursor = pe
            } else {
                // Insert before the closing brace of the object; the brace goes out with the bytes after it.
                let close = pe - 1
                o.append(contentsOf: UnsafeRawBufferPointer(start: j + cursor, count: close - cursor))
                if ev.addedHead >= 0 {
                    var first = ev.propertyCount == 0
                    appendAdded(ev, batch, &first, &o)
                }
                cursor = close
            }
        } else if ev.addedHead >= 0 {
            let close = Int(ev.closingBrace)
            o.append(contentsOf: UnsafeRawBufferPointer(start: j + cursor, count: close - cursor))
            JSONOut.appendRaw(",\"properties\":{", to: &o)
            var first = true
            appendAdded(ev, batch, &first, &o)
            o.append(0x7D)
            cursor = close
        }
        if ev.calibrated && !timeFirst { cursor = writeTime(ev, j, cursor, &o) }
        o.append(contentsOf: UnsafeRawBufferPointer(start: j + cursor, count: end - cursor))
    }

    @inline(__always)
    static func writeTime(_ ev: Event, _ j: UnsafePointer<UInt8>, _ cursor: Int, _ o: inout [UInt8]) -> Int {
        let ts = Int(ev.timeValue.start)
        o.append(contentsOf: UnsafeRawBufferPointer(start: j + cursor, count: ts - cursor))
        JSONOut.appendInt(ev.time, to: &o)
        return Int(ev.timeValue.end)
    }

    @inline(__always)
    static func appendAdded(_ ev: Event, _ batch: borrowing EventBatch, _ first: inout Bool, _ o: inout [UInt8]) {
        var a = ev.addedHead
        batch.scratch.withUnsafeBufferPointer { sb in
            let s = sb.baseAddress!
            while a >= 0 {
                let add = batch.added[Int(a)]
                if !first { o.append(0x2C) }
                first = false
                o.append(contentsOf: UnsafeRawBufferPointer(start: s + Int(add.bytes.start), count: add.bytes.count))
                a = add.next
            }
        }
    }

    static func writeFixedProperties(_ ev: Event, _ batch: borrowing EventBatch, _ j: UnsafePointer<UInt8>, _ o: inout [UInt8]) {
        o.append(0x7B)
        var first = true
        let lo = Int(ev.firstProperty), hi = lo + Int(ev.propertyCount)
        for i in lo..<hi {
            let p = batch.properties[i]
            if p.fix == .drop { continue }
            if !first { o.append(0x2C) }
            first = false
            o.append(0x22)
            o.append(contentsOf: UnsafeRawBufferPointer(start: j + Int(p.name.start), count: p.name.count))
            o.append(0x22)
            o.append(0x3A)
            if p.fix == .replace {
                o.append(contentsOf: batch.scratch[Int(p.replacement.start)..<Int(p.replacement.end)])
            } else {
                o.append(contentsOf: UnsafeRawBufferPointer(start: j + Int(p.value.start), count: p.value.count))
            }
        }
        appendAdded(ev, batch, &first, &o)
        o.append(0x7D)
    }

    /// Writes every failed record and failed event of the batch to `topic` (key: the input record's key).
    public static func writeDeadLetters(_ batch: borrowing EventBatch, topic: Int32, into out: inout OutputBuffer) {
        for r in 0..<batch.records.count {
            let rec = batch.records[r]
            if rec.status == .failed {
                let keyStart = out.bytes.count
                if rec.key.isPresent { out.bytes.append(contentsOf: batch.input[Int(rec.key.start)..<Int(rec.key.end)]) }
                let valueStart = out.bytes.count
                writeDeadLetterHead(batch, rec, reason: rec.reason, detail: rec.detail, &out.bytes)
                JSONOut.appendRaw(",\"payload_b64\":\"", to: &out.bytes)
                batch.input.withUnsafeBufferPointer { ib in
                    Base64.encode(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(ib)[Int(rec.value.start)..<Int(rec.value.end)]), into: &out.bytes)
                }
                JSONOut.appendRaw("\"}", to: &out.bytes)
                out.finish(topic: topic, record: Int32(r), keyStart: keyStart, valueStart: valueStart, hasKey: rec.key.isPresent)
                continue
            }
            let lo = Int(rec.firstEvent), hi = lo + Int(rec.eventCount)
            for e in lo..<hi where batch.events[e].status == .failed {
                let ev = batch.events[e]
                let keyStart = out.bytes.count
                if rec.key.isPresent { out.bytes.append(contentsOf: batch.input[Int(rec.key.start)..<Int(rec.key.end)]) }
                let valueStart = out.bytes.count
                writeDeadLetterHead(batch, rec, reason: ev.reason, detail: -1, &out.bytes)
                JSONOut.appendRaw(",\"index\":", to: &out.bytes)
                JSONOut.appendInt(Int64(ev.index), to: &out.bytes)
                JSONOut.appendRaw(",\"payload\":", to: &out.bytes)
                out.bytes.append(contentsOf: batch.json[Int(ev.bytes.start)..<Int(ev.bytes.end)])
                out.bytes.append(0x7D)
                out.finish(topic: topic, record: Int32(r), keyStart: keyStart, valueStart: valueStart, hasKey: rec.key.isPresent)
            }
        }
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
    var staticName: StaticString {
        switch self {
        case .none: return "none"
        case .badEncoding: return "bad_encoding"
        case .badZstd: return "bad_zstd"
        case .tooLarge: return "too_large"
        case .badJSON: return "bad_json"
        case .notArray: return "not_array"
        case .notObject: return "not_object"
        case .badType: return "bad_type"
        case .badEventName: return "bad_event_name"
        case .badTime: return "bad_time"
        case .badDistinctID: return "bad_distinct_id"
        case .badProperties: return "bad_properties"
        }
    }

    /// The detail text for event-level reasons (stages may set a more precise one on the record).
    public var defaultDetail: String {
        switch self {
        case .notObject: return "the event is not a JSON object"
        case .badType: return "'type' is missing or not one of track, track_signup, profile_*"
        case .badEventName: return "a track event needs 'event' matching ^[A-Za-z_$][A-Za-z0-9_$]{0,99}$"
        case .badTime: return "'time' is missing or not an integer (ms since the epoch)"
        case .badDistinctID: return "'distinct_id' is missing, empty, not a string or longer than 255 bytes"
        case .badProperties: return "'properties' is present and not an object"
        default: return description
        }
    }
}

/// Standard base64 (RFC 4648) encoding into a byte buffer.
public enum Base64 {
    private static let table: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ b: UnsafeRawBufferPointer, into o: inout [UInt8]) {
        let t = table
        var i = 0
        let n = b.count
        o.reserveCapacity(o.count + (n + 2) / 3 * 4)
        while i + 3 <= n {
            let v = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2])
            o.append(t[Int(v >> 18 & 63)]); o.append(t[Int(v >> 12 & 63)])
            o.append(t[Int(v >> 6 & 63)]); o.append(t[Int(v & 63)])
            i += 3
        }
        if n - i == 1 {
            let v = UInt32(b[i]) << 16
            o.append(t[Int(v >> 18 & 63)]); o.append(t[Int(v >> 12 & 63)]); o.append(0x3D); o.append(0x3D)
        } else if n - i == 2 {
            let v = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8
            o.append(t[Int(v >> 18 & 63)]); o.append(t[Int(v >> 12 & 63)]); o.append(t[Int(v >> 6 & 63)]); o.append(0x3D)
        }
    }
}
