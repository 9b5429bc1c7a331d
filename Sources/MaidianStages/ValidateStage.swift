import MaidianEvents
import MaidianPipeline

/// Validates events and fixes their properties (wire format §2): invalid events go to the dead-letter topic
/// with their reason; invalid properties are dropped or repaired and listed in `$dropped_properties`.
public final class ValidateStage: Stage {
    /// The stage's options (pipelines/README.md documents each).
    public struct Config: Decodable, Sendable, DeclaredSettings {
        enum Settings {
            static let maxStringBytes = Setting("max_string_bytes", default: 8191,
                "longest kept string property value in UTF-8 bytes; longer ones are cut at a character boundary and get `$` appended. At least 1", example: "4096")
            static let maxDistinctIDBytes = Setting("max_distinct_id_bytes", default: 255,
                "longest accepted `distinct_id` in bytes; longer ones fail as `bad_distinct_id`", example: "128")
            static let listDropped = Setting("list_dropped", default: true,
                "add `$dropped_properties` listing every dropped property name", example: "false")
        }
        public static let settings = ConfigSpec(Settings.maxStringBytes, Settings.maxDistinctIDBytes, Settings.listDropped)
        /// Longest kept string value in UTF-8 bytes; longer ones are cut at a character boundary and get `$`.
        public var maxStringBytes = Settings.maxStringBytes.default
        /// Longest accepted `distinct_id` in bytes.
        public var maxDistinctIDBytes = Settings.maxDistinctIDBytes.default
        /// Add `$dropped_properties` listing every dropped property name.
        public var listDropped = Settings.listDropped.default

        /// Every setting at its default.
        public init() {}
        public init(from decoder: any Decoder) throws {
            let s = try decoder.settings(Self.settings)
            maxStringBytes = try s(Settings.maxStringBytes)
            maxDistinctIDBytes = try s(Settings.maxDistinctIDBytes)
            listDropped = try s(Settings.listDropped)
            if maxStringBytes < 1 { throw PipelineError(code: .badValue, message: "max_string_bytes must be at least 1") }
        }
    }

    public static let kind = "validate"
    public static let summary = "rejects invalid events to the dead-letter topic and fixes invalid properties"

    let config: Config
    /// Reused per batch.
    private var failures: [(Int, DeadLetterReason)] = []
    private var fixes: [Int] = []

    public init(config: Config, context: StageContext) throws {
        self.config = config
    }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        // One read-only pass finds the (few) events to reject or fix; then they are changed.
        failures.removeAll(keepingCapacity: true)
        fixes.removeAll(keepingCapacity: true)
        let maxString = config.maxStringBytes
        for i in 0..<batch.eventCount where batch.isLive(i) {
            let ev = batch.event(i)
            if let reason = check(ev) {
                failures.append((i, reason))
            } else if ev.type.isTrack && ev.propertyCount > 0
                        && (ev.propertyIssues != 0 || Int(ev.longestString) > maxString) {
                // The scanner already noted whether anything needs fixing: most events have nothing.
                fixes.append(i)
            }
        }
        for (i, reason) in failures { batch.fail(i, reason: reason) }
        for i in fixes { fixProperties(i, &batch) }
    }

    @inline(__always)
    func check(_ ev: Event) -> DeadLetterReason? {
        switch ev.type {
        case .missing, .notString, .unknown: return .badType
        default: break
        }
        // The decoder checked the name while the bytes were in the cache.
        if ev.type.isTrack && !(ev.eventNameIsString && ev.eventNameValid) { return .badEventName }
        // Out of the wire format's range is invalid too: later stages' time arithmetic relies on it (issue 13, class 1).
        if ev.timeKind != .integer || !EventTimeRange.contains(ev.time) { return .badTime }
        if ev.distinctIDKind != .string || ev.distinctIDLength == 0 || Int(ev.distinctIDLength) > config.maxDistinctIDBytes { return .badDistinctID }
        if ev.propertiesKind == .other { return .badProperties }
        return nil
    }

    /// Applies the property fixes of wire format §2 to an event the scanner found something to fix in.
    func fixProperties(_ i: Int, _ batch: inout EventBatch) {
        let maxString = config.maxStringBytes
        var dropped: [Span] = []
        for k in batch.propertyRange(i) {
            let p = batch.property(k)
            if !p.nameValid || p.kind == .null || isServerOwned(p) || (p.kind == .object && !isElementContent(p, batch)) {
                batch.dropProperty(k)
                dropped.append(p.name)
            } else if p.kind == .object {
                // `$element_content` may be an object (wire format §2): kept as sent.
            } else if p.kind == .string && Int(p.decodedLength) > maxString {
                batch.replaceProperty(k, with: PropertyRepair.truncateString(p, &batch, maxBytes: maxString))
            } else if p.arrayHasNonString {
                batch.replaceProperty(k, with: PropertyRepair.stringsOnly(p, &batch))
            }
        }
        batch.markFixed(i)
        if config.listDropped && !dropped.isEmpty && !batch.hasProperty(event: i, .droppedProperties) {
            // Raw string content of validated JSON is already a valid JSON string body.
            var list: [UInt8] = [0x5B]
            for (n, span) in dropped.enumerated() {
                if n > 0 { list.append(0x2C) }
                list.append(0x22)
                batch.appendJSONBytes(span, to: &list)
                list.append(0x22)
            }
            list.append(0x5D)
            batch.addProperty(event: i, name: Self.droppedName, json: list)
        }
    }

    private static let droppedName = Array("$dropped_properties".utf8)

    /// A property only the server sets, sent by the client: dropped so that what the server sets is the
    /// only one (wire format §2, enrichment).
    @inline(__always)
    private func isServerOwned(_ p: Property) -> Bool {
        p.known != KnownProperty.none && (UInt64(1) << UInt64(p.known)) & KnownProperty.serverOwnedBits != 0
    }

    private func isElementContent(_ p: Property, _ batch: borrowing EventBatch) -> Bool {
        batch.jsonEqual(p.name, "$element_content")
    }
}
