/// A byte range inside one of a batch's arenas. `start < 0` means absent.
public struct Span: Sendable, Equatable {
    /// Offset of the first byte in the arena; -1 when absent.
    public var start: Int32
    /// Offset one past the last byte.
    public var end: Int32
    /// The bytes `start ..< end`.
    @inlinable public init(start: Int32, end: Int32) { self.start = start; self.end = end }
    /// The bytes `start ..< end` from `Int` offsets, truncated to 32 bits.
    @inlinable public init(_ start: Int, _ end: Int) { self.start = Int32(truncatingIfNeeded: start); self.end = Int32(truncatingIfNeeded: end) }
    /// No bytes: a field that was not sent or not kept.
    public static let absent = Span(start: -1, end: -1)
    /// Whether the span refers to bytes (`start >= 0`).
    @inlinable public var isPresent: Bool { start >= 0 }
    /// Length in bytes (0 for `absent`).
    @inlinable public var count: Int { Int(end &- start) }
}

/// The event times wire format §2 accepts: from 2015-01-01 (included) to 2100-01-01 (excluded), in ms since the
/// epoch. Checked where events enter (validate stage, decoder for `_flush_time`), so the arithmetic of later
/// stages (calibration, windows, dedup) works on values far from the 64-bit limits.
public enum EventTimeRange {
    /// 2015-01-01T00:00:00Z in ms since the epoch, the first accepted time.
    public static let lowerBound: Int64 = 1_420_070_400_000
    /// 2100-01-01T00:00:00Z in ms since the epoch, the first time no longer accepted.
    public static let upperBound: Int64 = 4_102_444_800_000
    /// Whether `t` is an accepted event time.
    @inlinable public static func contains(_ t: Int64) -> Bool { t >= lowerBound && t < upperBound }
}

/// Why a record or an event went to the dead-letter topic (wire format §2).
public enum DeadLetterReason: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case none = 0
    // record level
    case badEncoding, badZstd, tooLarge, badJSON, notArray
    // event level
    case notObject, badType, badEventName, badTime, badDistinctID, badProperties
    /// A member name appears twice in the event object or in its `properties` (wire format §2, revision 2).
    case duplicateKey

    /// The wire name used in `events.dlq` and in metrics.
    public var description: String { staticName.description }

    /// The wire name as a static string, so the dead-letter writer appends it without building a String.
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
        case .duplicateKey: return "duplicate_key"
        }
    }

    /// Whether the whole record is rejected.
    public var isRecordLevel: Bool { rawValue >= 1 && rawValue <= 5 }
}

/// The `type` of an event.
public enum EventType: UInt8, Sendable {
    case missing = 0, notString, unknown
    case track, trackSignup
    case profileSet, profileSetOnce, profileIncrement, profileDelete, profileAppend, profileUnset

    /// `track` and `track_signup` are events; the `profile_*` types are forwarded untouched.
    @inlinable public var isTrack: Bool { self == .track || self == .trackSignup }
    /// The `profile_*` types (forwarded untouched).
    @inlinable public var isProfile: Bool { rawValue >= EventType.profileSet.rawValue }
}

/// Where an event is in the pipeline.
public enum EventStatus: UInt8, Sendable {
    /// Still flowing.
    case live = 0
    /// Removed on purpose (duplicate, filtered noise): counted, not dead-lettered.
    case dropped
    /// Rejected: goes to the dead-letter topic with `reason`.
    case failed
}

/// The JSON kind of a property value.
public enum ValueKind: UInt8, Sendable {
    case string = 0, number, bool, null, array, object
}

/// How an event sent `distinct_id` (wire format §2 wants a non-empty string).
public enum DistinctIDKind: UInt8, Sendable, CustomStringConvertible {
    case missing = 0, string, other
    /// The raw value (the decoder tests' traces print these).
    public var description: String { String(rawValue) }
}

/// How an event sent `time` (wire format §2 wants an integer of milliseconds).
public enum TimeKind: UInt8, Sendable, CustomStringConvertible {
    case missing = 0, integer, other
    public var description: String { String(rawValue) }
}

/// How an event sent `properties` (absent is allowed; anything but an object is not).
public enum PropertiesKind: UInt8, Sendable, CustomStringConvertible {
    case missing = 0, object, other
    public var description: String { String(rawValue) }
}

/// What a stage decided for a property.
public enum PropertyFix: UInt8, Sendable {
    case keep = 0
    /// Left out of the output and listed in `$dropped_properties`.
    case drop
    /// The value is replaced by the bytes at `replacement` in the batch's scratch arena.
    case replace
}

/// One property of an event's `properties` object, as found by the scanner.
public struct Property: Sendable {
    /// The name's raw string content (between the quotes) in the JSON arena.
    public var name: Span
    /// The whole value (quotes, brackets included) in the JSON arena.
    public var value: Span
    /// The value's JSON kind, as the scanner saw its first byte.
    public var kind: ValueKind
    /// Name matches `^[A-Za-z_$][A-Za-z0-9_$]{0,99}$`.
    public var nameValid: Bool
    /// The name or string value holds escapes (`\n`, `\u00e9`, ...).
    public var nameEscaped: Bool
    /// The string value holds escapes, so its bytes differ from its decoded text.
    public var valueEscaped: Bool
    /// For arrays: some element is not a string.
    public var arrayHasNonString: Bool
    /// For strings: length in UTF-8 bytes after unescaping.
    public var decodedLength: Int32
    /// What stages decided for the property: keep, drop, or replace by `replacement`.
    public var fix: PropertyFix
    /// The `KnownProperty` raw value of the name, or `KnownProperty.none`: stages find the properties they
    /// know by this byte instead of comparing names (fits the struct's padding).
    public var known: UInt8 = KnownProperty.none
    /// Replacement bytes in the scratch arena when `fix == .replace`.
    public var replacement: Span
}

/// Added properties, pre-serialized as `"name":value` in the scratch arena (one, or several joined by commas);
/// a linked list per event.
public struct AddedProperty: Sendable {
    /// The `"name":value` fragment (or several, comma-joined) in the scratch arena.
    public var bytes: Span
    /// Index of the event's next entry in `EventBatch.added`; -1 for the last.
    public var next: Int32
    /// An entry for `bytes`, linked to `next` (-1: none).
    @inlinable public init(bytes: Span, next: Int32) { self.bytes = bytes; self.next = next }
}

/// One event of a batch: offsets into the batch's arenas and the fields stages need.
public struct Event: Sendable {
    /// Index of the event's record in `EventBatch.records`.
    public internal(set) var record: Int32
    /// Position in the record's JSON array.
    @usableFromInline var index: Int32
    /// The whole element in the JSON arena.
    @usableFromInline var bytes: Span
    /// Live, dropped or failed; changed through `EventBatch.drop(_:)` and `fail(_:reason:)`.
    public internal(set) var status: EventStatus
    /// Why the event was rejected when `status == .failed`, else `.none`.
    public internal(set) var reason: DeadLetterReason
    /// The event's `type` field, classified (`.missing`, `.notString` and `.unknown` are invalid).
    public internal(set) var type: EventType
    /// Raw string contents (no quotes) in the JSON arena.
    @usableFromInline var typeName: Span
    /// Raw content of the `event` string (no quotes, escapes as sent) in the JSON arena; absent when not a string.
    public internal(set) var eventName: Span
    @usableFromInline var eventNameEscaped: Bool
    /// `event` was sent as a JSON string (valid name or not).
    public internal(set) var eventNameIsString: Bool
    /// Raw content of the `distinct_id` string (no quotes) in the JSON arena; absent when not a string.
    public internal(set) var distinctID: Span
    @usableFromInline var distinctIDEscaped: Bool
    /// Whether `distinct_id` was missing, a string or another JSON kind.
    public internal(set) var distinctIDKind: DistinctIDKind
    /// Length of `distinct_id` in UTF-8 bytes after unescaping (what the validate stage's limit checks).
    public internal(set) var distinctIDLength: Int32
    /// Event time in ms; after calibration the calibrated time.
    public internal(set) var time: Int64
    /// `time` as the client sent it.
    public internal(set) var clientTime: Int64
    /// Whether `time` was missing, an integer or another JSON value.
    public internal(set) var timeKind: TimeKind
    /// The value of `time` in the JSON arena (for rewriting it).
    @usableFromInline var timeValue: Span
    /// `_flush_time` in ms as sent, when a number; meaningful only when `hasFlushTime`.
    public internal(set) var flushTime: Int64
    /// `_flush_time` is an integer inside `EventTimeRange`, so it can calibrate the client's clock.
    public internal(set) var hasFlushTime: Bool
    /// `_track_id` as sent, when a number; meaningful only when `hasTrackID`.
    public internal(set) var trackID: Int64
    /// `_track_id` is an integer (the dedup stage keys on it).
    public internal(set) var hasTrackID: Bool
    @usableFromInline var calibrated: Bool
    /// Whether `properties` was missing, an object or another JSON kind.
    public internal(set) var propertiesKind: PropertiesKind
    /// The whole `properties` object in the JSON arena.
    @usableFromInline var properties: Span
    /// The event object's closing brace position (to add `properties` when it is missing).
    @usableFromInline var closingBrace: Int32
    /// Raw content of the top-level `project` string in the JSON arena; absent when missing, not a string or escaped.
    public internal(set) var project: Span
    /// The `lib` object (braces included) in the JSON arena; absent when missing or not an object.
    public internal(set) var lib: Span
    /// Range of this event's entries in `EventBatch.properties`.
    public internal(set) var firstProperty: Int32
    /// Number of this event's entries in `EventBatch.properties`, dropped ones included.
    public internal(set) var propertyCount: Int32
    /// Any property has a fix other than keep.
    @usableFromInline var _hasFixes: Bool
    /// Whether any property is dropped or replaced.
    @inlinable public var hasFixes: Bool { _hasFixes }
    /// Added properties: head and tail of a list in `EventBatch.added`.
    @usableFromInline var addedHead: Int32
    @usableFromInline var addedTail: Int32
    /// Free for stages (for example late-event marking).
    @usableFromInline var _flags: UInt32
    /// The `EventFlag` bits stages have set.
    @inlinable public var flags: UInt32 { _flags }
    /// Which `KnownProperty` names the client sent (kept or not), one bit each: presence checks without a scan.
    public internal(set) var known: UInt64
    /// What the scanner saw that property fixes may need (`PropertyIssues` bits), so events without any
    /// skip the fix pass.
    public internal(set) var propertyIssues: UInt8
    /// Longest string property value, decoded UTF-8 bytes.
    public internal(set) var longestString: Int32
    /// The rules the event matched: `EventBatch.hits[firstHit ..< firstHit + hitCount]` (match stage).
    @usableFromInline var _firstHit: Int32
    /// Index of the event's first entry in `EventBatch.hits`.
    @inlinable public var firstHit: Int32 { _firstHit }
    @usableFromInline var _hitCount: Int32
    /// Number of rules the event matched (0 before the match stage).
    @inlinable public var hitCount: Int32 { _hitCount }
    // Facts the decoder works out while the event's bytes are in the cache: stages read them instead of
    // going back to the (by then evicted) JSON arena.
    /// `event` is a string that, unescaped, is a valid name (wire format §2).
    public internal(set) var eventNameValid: Bool
    /// `Hash64` of the raw bytes of `distinct_id` and of `event` (between the quotes, escapes as sent); 0 when
    /// not a string.
    public internal(set) var distinctIDHash: UInt64
    /// `Hash64` of the raw bytes of `event` (between the quotes, escapes as sent); 0 when not a string.
    public internal(set) var eventNameHash: UInt64
    /// `Hash64` of the top-level `anonymous_id` (the install, wire format §5), decoded, when it is a non-empty
    /// string; else 0.
    public internal(set) var anonymousIDHash: UInt64

    /// Whether the event is still flowing (neither dropped nor failed).
    @inlinable public var isLive: Bool { status == .live }

    init(record: Int32, index: Int32, start: Int) {
        self.record = record
        self.index = index
        self.bytes = Span(start, start)
        self.status = .live
        self.reason = .none
        self.type = .missing
        self.typeName = .absent
        self.eventName = .absent
        self.eventNameEscaped = false
        self.eventNameIsString = false
        self.distinctID = .absent
        self.distinctIDEscaped = false
        self.distinctIDKind = .missing
        self.distinctIDLength = 0
        self.time = 0
        self.clientTime = 0
        self.timeKind = .missing
        self.timeValue = .absent
        self.flushTime = 0
        self.hasFlushTime = false
        self.trackID = 0
        self.hasTrackID = false
        self.calibrated = false
        self.propertiesKind = .missing
        self.properties = .absent
        self.closingBrace = -1
        self.project = .absent
        self.lib = .absent
        self.firstProperty = 0
        self.propertyCount = 0
        self._hasFixes = false
        self.addedHead = -1
        self.addedTail = -1
        self._flags = 0
        self.known = 0
        self.propertyIssues = 0
        self.longestString = 0
        self._firstHit = 0
        self._hitCount = 0
        self.eventNameValid = false
        self.distinctIDHash = 0
        self.eventNameHash = 0
        self.anonymousIDHash = 0
    }
}

/// What kind of count a matched rule feeds (wire format §5).
public enum MatchMetric: UInt8, Sendable {
    /// Page rules and PAGEPV entries.
    case pv = 1
    /// Element rules and ACTION / TABLEVIEW / GESTURE entries.
    case click = 2
}

/// One rule an event matched, as the match stage leaves it for later stages (counts, dwell), so nothing
/// matches twice.
public struct MatchHit: Sendable {
    /// The rule id (action rules: their identifier) as a JSON string, quotes included, in `EventBatch.scratch`.
    public var id: Span
    /// For `group_by_content` rules: the content value the event is counted under, as a JSON string
    /// (quotes included) in `json` or, when `contentInScratch`, in `scratch`. Absent otherwise.
    public var content: Span
    /// `content` lies in the scratch arena rather than the JSON arena.
    public var contentInScratch: Bool
    /// Whether the hit counts as a page view or a click.
    public var metric: MatchMetric

    /// A hit for rule `id`; `content` only for `group_by_content` rules.
    public init(id: Span, metric: MatchMetric, content: Span = .absent, contentInScratch: Bool = false) {
        self.id = id
        self.metric = metric
        self.content = content
        self.contentInScratch = contentInScratch
    }
}

/// Event flag bits (`Event.flags`).
public enum EventFlag {
    /// Older than its partition's watermark on arrival: enriched with `$late: true` (still counted and paired
    /// within the allowed lateness).
    public static let late: UInt32 = 1
    /// The event's page is ignored (defaults plus the rules file's `ignore_pages`): never counted or paired.
    public static let ignoredPage: UInt32 = 2
    /// Late by more than the allowed lateness (with `late`): not counted, paired or trailed.
    public static let tooLate: UInt32 = 4
}

/// One input record of a batch (a Kafka record or a recording line).
public struct InputRecord: Sendable {
    /// Index of the record's topic name in the batch's topics (`EventBatch.topicIndex(_:)`).
    public var topic: Int32
    /// Kafka partition the record was read from.
    public var partition: Int32
    /// Kafka offset of the record within its partition.
    public var offset: Int64
    /// Kafka record timestamp in ms since the epoch; 0 when there was none.
    public var timestamp: Int64
    /// In the input arena.
    public var key: Span
    /// The record value as received (zstd-compressed JSON) in the input arena.
    public var value: Span
    /// Header `ip` in the input arena; absent when missing or not valid UTF-8.
    public var ip: Span
    /// Header `ua` (the uploader's user agent) in the input arena; absent when missing or not valid UTF-8.
    public var ua: Span
    /// Header `project` in the input arena; absent when missing or not valid UTF-8.
    public var project: Span
    /// Header `received_at` in ms since the epoch; meaningful only when `hasReceivedAt`.
    public var receivedAt: Int64
    /// Header `received_at` was present and a decimal integer.
    public var hasReceivedAt: Bool
    /// Decoded JSON in the JSON arena.
    public var json: Span
    /// `.failed` when the whole record is rejected (a record-level `reason`), else `.live`.
    public var status: EventStatus
    /// Why the record was rejected; `.none` when it was not.
    public var reason: DeadLetterReason
    /// Index into `EventBatch.details` for dead-letter detail text, -1 if none.
    public var detail: Int32
    /// Index of the record's first event in the batch's events.
    public var firstEvent: Int32
    /// Number of events decoded from the record, rejected ones included.
    public var eventCount: Int32
    /// Re-read only to rebuild state after a takeover: its outputs were delivered before (the worker does
    /// not produce them again). Stateful stages write out what such records complete before later records.
    public var replay: Bool = false
}

/// A batch of input records and the events decoded from them. Reused across batches: `reset()` keeps capacity,
/// so the steady state allocates nothing per event.
///
/// A value type passed `inout` through the stages: the compiler then checks exclusive access statically
/// instead of at run time on every array access (measured at about 15% of the per-event cost as a class).
///
/// All byte data lives in three arenas addressed by `Span`s: `input` (record keys, headers, values as received),
/// `json` (decompressed JSON, padded so the scanner can read 32 bytes past any record) and `scratch`
/// (bytes written by stages: added properties, replacement values).
public struct EventBatch: Sendable {
    /// Names of the records' topics (`InputRecord.topic` indexes it; `topicIndex` adds one).
    var topics: [String] = []
    /// The batch's input records in arrival order.
    public var records: [InputRecord] = []
    @usableFromInline var events: [Event] = []
    @usableFromInline var properties: [Property] = []
    @usableFromInline var added: [AddedProperty] = []
    /// Rules matched by events (see `Event.firstHit`).
    @usableFromInline var hits: [MatchHit] = []
    @usableFromInline var input: [UInt8] = []
    /// The JSON arena's storage: only `json[0..<jsonCount]` is in use; the rest is spare room that was
    /// zero-filled once when the arena grew, so decompression writes into it without clearing it first.
    @usableFromInline var json: [UInt8] = []
    @usableFromInline var jsonCount = 0
    @usableFromInline var scratch: [UInt8] = []
    /// Dead-letter detail messages (rare: only built on failures).
    var details: [String] = []
    /// Events marked `.dropped` / `.failed` through `drop(_:)` / `fail(_:reason:)` and by the decoder: the
    /// engine counts each stage's work from these without walking the events.
    public private(set) var droppedCount = 0
    /// Events rejected to the dead-letter topic, by the decoder or by stages (see `droppedCount`).
    public private(set) var failedCount = 0
    /// Header values of this batch's records taken as absent: not valid UTF-8, or a `received_at` that is not a
    /// decimal integer (wire format §1). The engine counts them (`maidian_bad_headers_total`).
    public var invalidHeaders = 0

    /// An empty batch with room for a typical batch reserved (a 4 MiB JSON arena, 4096 events).
    public init() {
        input.reserveCapacity(1 << 20)
        json = Array(repeating: 0, count: 4 << 20)
        scratch.reserveCapacity(1 << 20)
        events.reserveCapacity(4096)
        properties.reserveCapacity(4096 * 24)
        records.reserveCapacity(1024)
    }

    /// Empties the batch, keeping capacity.
    public mutating func reset() {
        records.removeAll(keepingCapacity: true)
        events.removeAll(keepingCapacity: true)
        properties.removeAll(keepingCapacity: true)
        added.removeAll(keepingCapacity: true)
        hits.removeAll(keepingCapacity: true)
        input.removeAll(keepingCapacity: true)
        jsonCount = 0
        scratch.removeAll(keepingCapacity: true)
        details.removeAll(keepingCapacity: true)
        droppedCount = 0
        failedCount = 0
        invalidHeaders = 0
    }

    /// Drops live event `i` on purpose (a duplicate, filtered noise): counted, not dead-lettered.
    @inline(__always)
    public mutating func drop(_ i: Int) {
        guard events[i].status == .live else { return }
        events[i].status = .dropped
        droppedCount += 1
    }

    /// Rejects live event `i` to the dead-letter topic.
    @inline(__always)
    public mutating func fail(_ i: Int, reason: DeadLetterReason) {
        guard events[i].status == .live else { return }
        events[i].status = .failed
        events[i].reason = reason
        failedCount += 1
    }

    /// Appends a record's decoded events, `failed` of which are already rejected (decoder only).
    @inline(__always)
    mutating func appendDecoded(_ evs: UnsafeBufferPointer<Event>, failed: Int) {
        failedCount += failed
        events.append(contentsOf: evs)
    }

    /// Index of a topic name in `topics`, adding it if new.
    public mutating func topicIndex(_ name: String) -> Int32 {
        if let i = topics.firstIndex(of: name) { return Int32(i) }
        topics.append(name)
        return Int32(topics.count - 1)
    }

    @inline(__always)
    mutating func appendInput(_ bytes: UnsafeRawBufferPointer?) -> Span {
        guard let bytes else { return .absent }
        let start = input.count
        input.append(contentsOf: bytes)
        return Span(start, input.count)
    }

    /// Appends a record; its bytes are copied into the input arena. Decoding happens later (`RecordDecoder`).
    public mutating func appendRecord(
        topic: Int32, partition: Int32, offset: Int64, timestamp: Int64,
        key: UnsafeRawBufferPointer?, value: UnsafeRawBufferPointer,
        ip: UnsafeRawBufferPointer?, receivedAt: UnsafeRawBufferPointer?,
        ua: UnsafeRawBufferPointer?, project: UnsafeRawBufferPointer?
    ) {
        // Copy first, parse after: where a source keeps a record's headers next to its value, the copy has
        // brought them into the cache.
        let keySpan = appendInput(key), valueSpan = appendInput(value)
        // Headers are untrusted bytes (wire format §1): one that is not valid UTF-8 (or a `received_at` that is
        // not a decimal integer) is taken as absent and counted, so it never reaches an output.
        let ipSpan = appendInput(validHeader(ip)), uaSpan = appendInput(validHeader(ua))
        let projectSpan = appendInput(validHeader(project))
        var rat: Int64 = 0
        var hasRat = false
        if let receivedAt {
            if let v = parseDecimal(receivedAt) { rat = v; hasRat = true } else { invalidHeaders += 1 }
        }
        let record = InputRecord(
            topic: topic, partition: partition, offset: offset, timestamp: timestamp,
            key: keySpan, value: valueSpan, ip: ipSpan, ua: uaSpan,
            project: projectSpan, receivedAt: rat, hasReceivedAt: hasRat,
            json: .absent, status: .live, reason: .none, detail: -1,
            firstEvent: Int32(events.count), eventCount: 0)
        records.append(record)
    }

    /// `bytes` when valid UTF-8, else nil (and counted in `invalidHeaders`).
    @inline(__always)
    mutating func validHeader(_ bytes: UnsafeRawBufferPointer?) -> UnsafeRawBufferPointer? {
        guard let bytes else { return nil }
        if isValidUTF8(bytes) { return bytes }
        invalidHeaders += 1
        return nil
    }

    /// Makes room for `extra` more bytes in the JSON arena.
    @inline(__always)
    public mutating func reserveJSON(_ extra: Int) {
        let needed = jsonCount + extra
        if needed > json.count {
            // Doubling, but by at most 32 MiB past what is needed: the arena stays close to the batch bound.
            json.append(contentsOf: repeatElement(0, count: max(needed, min(json.count * 2, needed + (32 << 20))) - json.count))
        }
    }

    /// What decoding has put in this batch, bytes: the JSON arena in use and the events' and properties'
    /// entries (`RecordLimits.maxBatchBytes` bounds it).
    public var decodedBytes: Int {
        jsonCount + events.count * MemoryLayout<Event>.stride + properties.count * MemoryLayout<Property>.stride
    }

    /// Moves the records from index `first` on (not decoded yet) to the end of `other`, bytes included, and
    /// removes them from this batch: they are processed as the next batch (`RecordLimits.maxBatchBytes`).
    public mutating func moveRecords(from first: Int, to other: inout EventBatch) {
        guard first < records.count else { return }
        for name in topics { _ = other.topicIndex(name) }
        input.withUnsafeBytes { inp in
            func bytes(_ s: Span) -> UnsafeRawBufferPointer? {
                s.isPresent ? UnsafeRawBufferPointer(rebasing: inp[Int(s.start)..<Int(s.end)]) : nil
            }
            for r in records[first...] {
                var moved = r
                moved.topic = other.topicIndex(topics[Int(r.topic)])
                moved.key = other.appendInput(bytes(r.key))
                moved.value = other.appendInput(bytes(r.value))
                moved.ip = other.appendInput(bytes(r.ip))
                moved.ua = other.appendInput(bytes(r.ua))
                moved.project = other.appendInput(bytes(r.project))
                moved.firstEvent = Int32(other.events.count)
                other.records.append(moved)
            }
        }
        records.removeSubrange(first...)
    }

    /// Appends bytes to the JSON arena.
    public mutating func appendJSON(_ bytes: UnsafeRawBufferPointer) {
        reserveJSON(bytes.count)
        let at = jsonCount
        json.withUnsafeMutableBytes { UnsafeMutableRawBufferPointer(rebasing: $0[at..<(at + bytes.count)]).copyMemory(from: bytes) }
        jsonCount += bytes.count
    }

    /// Records a dead-letter detail text and returns its index.
    public mutating func addDetail(_ text: String) -> Int32 {
        details.append(text)
        return Int32(details.count - 1)
    }

    /// The bytes of a span of the input arena as a String (for tests and rare paths).
    public func inputString(_ span: Span) -> String? {
        guard span.isPresent else { return nil }
        return String(decoding: input[Int(span.start)..<Int(span.end)], as: UTF8.self)
    }

    /// The bytes of a span of the JSON arena as a String (for tests and rare paths).
    public func jsonString(_ span: Span) -> String? {
        guard span.isPresent else { return nil }
        return String(decoding: json[Int(span.start)..<Int(span.end)], as: UTF8.self)
    }

    // MARK: - properties

    /// Index of the first kept property named `name` of event `e`, or nil. Linear over the event's properties:
    /// events carry a few dozen at most.
    public func propertyIndex(event e: Int, name: StaticString) -> Int? {
        name.withUTF8Buffer { propertyIndex(event: e, nameBytes: $0) }
    }

    /// Whether event `e` has a kept property `name` (enrichment never overwrites a client property).
    @inlinable public func hasProperty(event e: Int, name: StaticString) -> Bool {
        propertyIndex(event: e, name: name) != nil
    }

    /// Whether event `e` has a kept property that is a `KnownProperty`: a bit test, no scan.
    @inlinable public func hasProperty(event e: Int, _ known: KnownProperty) -> Bool {
        let ev = events[e]
        guard ev.known & known.bit != 0 else { return false }
        if !ev.hasFixes { return true }
        return propertyIndex(event: e, name: known.name) != nil
    }

    /// Adds `"name":value` to event `e`, where `value` is written by `body` into the scratch arena as JSON.
    @inline(__always)
    public mutating func addProperty(event e: Int, name: StaticString, _ body: (inout [UInt8]) -> Void) {
        let start = scratch.count
        scratch.append(0x22)
        name.withUTF8Buffer { scratch.append(contentsOf: $0) }
        scratch.append(0x22)
        scratch.append(0x3A)
        body(&scratch)
        linkAdded(event: e, Span(start, scratch.count))
    }

    /// Adds a string property copied from the input arena (header values), escaping as needed.
    public mutating func addStringProperty(event e: Int, name: StaticString, fromInput span: Span) {
        let start = scratch.count
        scratch.append(0x22)
        name.withUTF8Buffer { scratch.append(contentsOf: $0) }
        scratch.append(0x22)
        scratch.append(0x3A)
        scratch.append(0x22)
        input.withUnsafeBytes { inp in
            JSONOut.appendEscaped(UnsafeRawBufferPointer(rebasing: inp[Int(span.start)..<Int(span.end)]), to: &scratch)
        }
        scratch.append(0x22)
        linkAdded(event: e, Span(start, scratch.count))
    }

    /// Writes `"name":` into the scratch arena; returns where the fragment starts.
    @inline(__always)
    mutating func beginFragment(_ name: StaticString) -> Int {
        let start = scratch.count
        scratch.append(0x22)
        name.withUTF8Buffer { scratch.append(contentsOf: $0) }
        scratch.append(0x22)
        scratch.append(0x3A)
        return start
    }

    /// A `"name":"<input bytes, escaped>"` fragment in the scratch arena, for `linkAdded`.
    public mutating func fragment(_ name: StaticString, quotedInput span: Span) -> Span {
        let start = beginFragment(name)
        scratch.append(0x22)
        input.withUnsafeBytes { inp in
            JSONOut.appendEscaped(UnsafeRawBufferPointer(rebasing: inp[Int(span.start)..<Int(span.end)]), to: &scratch)
        }
        scratch.append(0x22)
        return Span(start, scratch.count)
    }

    /// A `"name":"<content>"` fragment in the scratch arena, for `linkAdded`, where `content` is the raw
    /// content (between the quotes) of a JSON string of the JSON arena: validated JSON, so a valid JSON
    /// string body as it is (escapes kept as sent).
    public mutating func fragment(_ name: StaticString, jsonStringContent content: Span) -> Span {
        let start = beginFragment(name)
        scratch.append(0x22)
        scratch.append(bytesOf: json, Int(content.start) ..< Int(content.end))
        scratch.append(0x22)
        return Span(start, scratch.count)
    }

    /// A `"name":<integer>` fragment in the scratch arena, for `linkAdded`.
    public mutating func fragment(_ name: StaticString, integer: Int64) -> Span {
        let start = beginFragment(name)
        JSONOut.appendInt(integer, to: &scratch)
        return Span(start, scratch.count)
    }

    /// A `"name":<JSON value bytes>` fragment in the scratch arena, for `linkAdded`.
    public mutating func fragment(_ name: StaticString, json value: [UInt8]) -> Span {
        let start = beginFragment(name)
        scratch.append(contentsOf: value)
        return Span(start, scratch.count)
    }

    /// Appends a span of the input arena as a quoted, escaped JSON string.
    public func appendQuotedInput(_ span: Span, to out: inout [UInt8]) {
        out.append(0x22)
        input.withUnsafeBytes { inp in
            JSONOut.appendEscaped(UnsafeRawBufferPointer(rebasing: inp[Int(span.start)..<Int(span.end)]), to: &out)
        }
        out.append(0x22)
    }

    /// Adds a pre-serialized `"name":value` fragment (already in the scratch arena) to event `e`.
    @inlinable
    public mutating func linkAdded(event e: Int, _ bytes: Span) {
        let idx = Int32(added.count)
        added.append(AddedProperty(bytes: bytes, next: -1))
        let tail = events[e].addedTail
        if tail >= 0 {
            added[Int(tail)].next = idx
        } else {
            events[e].addedHead = idx
        }
        events[e].addedTail = idx
    }
}


/// Whether `b` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
public func isValidUTF8(_ b: UnsafeRawBufferPointer) -> Bool {
    guard let base = b.baseAddress else { return true }
    let p = base.assumingMemoryBound(to: UInt8.self)
    let s = JSONScanner(base: p, start: 0, end: b.count)
    let count = b.count
    var i = 0
    while i < count {
        // Whole words while they are ASCII (header values nearly always are), up to the first byte that is not.
        while i &+ 8 <= count {
            let high = base.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080
            if high != 0 { i &+= high.trailingZeroBitCount >> 3; break }
            i &+= 8
        }
        if i >= count { break }
        if p[i] < 0x80 { i &+= 1; continue }
        let n = s.utf8SequenceLength(at: i)
        if n == 0 { return false }
        i &+= n
    }
    return true
}

/// Parses optional-sign decimal ASCII digits; nil when anything else is present.
public func parseDecimal(_ b: UnsafeRawBufferPointer) -> Int64? {
    var i = 0
    var neg = false
    if b.count > 0 && b[0] == UInt8(ascii: "-") { neg = true; i = 1 }
    if i >= b.count || b.count - i > 18 { return nil }
    var v: Int64 = 0
    while i < b.count {
        let c = b[i]
        guard c >= 0x30 && c <= 0x39 else { return nil }
        v = v * 10 + Int64(c - 0x30)
        i += 1
    }
    return neg ? -v : v
}
