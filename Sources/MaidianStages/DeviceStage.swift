import MaidianEvents
import MaidianPipeline

/// Adds the device preset properties (wire format §2, enrichment): `$brand`, `$device_name` and `$device_type`
/// from `$model` through a built-in table, and `$os`/`$os_version` from the record's `ua` header when the client
/// sent no `$os`. Never overwrites a property the client sent; each of the five is checked on its own.
///
/// Rules, in order, for each live `track` event:
/// 1. `$model` is an Apple identifier in `data/apple-devices.tsv` (`iPhone15,2`): `$brand` `Apple`, the table's
///    `$device_name` (`iPhone 14 Pro`) and `$device_type` (`phone`).
/// 2. `$model` is shaped like an Apple identifier of a known family but is not in the table (a model newer than
///    the table, `iPhone99,1`): `$brand` `Apple`, `$device_type` from the family (`iPhone`/`iPod` phone, `iPad`
///    tablet, `Watch` watch, `AppleTV` tv, `Mac…`/`iMac…` desktop), no `$device_name`.
/// 3. Anything else (Android models, no `$model`): `$brand` is `$manufacturer` normalised through
///    `data/android-manufacturers.tsv` (ASCII case ignored: `HUAWEI` and `huawei` are `Huawei`; an unlisted
///    manufacturer is kept as sent); `$device_type` comes from the screen size, else `unknown`; no `$device_name`.
///
/// Screen size: `$screen_width`/`$screen_height` are points on iOS and pixels on Android (the SDKs' choice: the
/// sample's iPhones send 390×844, Android phones 1080×2400) and events carry no density, so physical inches
/// cannot be computed. The rule uses what is unit-free, the aspect ratio, plus a short-side floor that holds
/// in both units: with `short`/`long` the smaller/larger side, a screen is a `watch` when `long < 600` and
/// `long/short ≤ 1.25` (square and small), a `tablet` when `short ≥ tablet_min_short_side` and
/// `long/short < tablet_max_aspect` (tablets are 4:3 to 16:10, phones 16:9 and longer), else a `phone`.
///
/// Work per event is a short scan of the event's properties for `$model` (it stops there) and a byte comparison
/// with the previous event's model; table lookups happen once per change of device, and each distinct
/// `"name":value` fragment is written into the scratch arena once per batch and linked to every event.
public final class DeviceStage: Stage {
    /// The stage's YAML keys (documented in `pipelines/README.md`).
    public struct Config: Decodable, Sendable, DeclaredSettings {
        enum Settings {
            static let tabletMinShortSide = Setting("tablet_min_short_side", default: 600,
                "smallest short side (points or pixels) of a tablet's screen, for devices the table does not know. At least 1", example: "700")
            static let tabletMaxAspect = Setting("tablet_max_aspect", default: 1.75,
                "a screen whose long side is at least this many times its short side is a phone, not a tablet. More than 1, at most 10", example: "1.7")
            static let userAgent = Setting("user_agent", default: true,
                "add `$os`/`$os_version` from the `ua` header to events without `$os`", example: "false")
        }
        public static let settings = ConfigSpec(Settings.tabletMinShortSide, Settings.tabletMaxAspect, Settings.userAgent)
        /// Smallest short side (points or pixels) of a tablet screen, for devices the table does not know.
        public var tabletMinShortSide = Settings.tabletMinShortSide.default
        /// A screen whose long side is at least this many times its short side is a phone, not a tablet.
        public var tabletMaxAspect = Settings.tabletMaxAspect.default
        /// Take `$os`/`$os_version` from the record's `ua` header when the client sent no `$os`.
        public var userAgent = Settings.userAgent.default

        /// The defaults.
        public init() {}

        /// Decodes the stage's YAML keys (all optional), rejecting out-of-range values with their position.
        public init(from decoder: any Decoder) throws {
            let s = try decoder.settings(Self.settings)
            tabletMinShortSide = try s(Settings.tabletMinShortSide)
            tabletMaxAspect = try s(Settings.tabletMaxAspect)
            userAgent = try s(Settings.userAgent)
            if tabletMinShortSide < 1 {
                throw decoder.fail("tablet_min_short_side must be at least 1", forKey: Settings.tabletMinShortSide.codingKey, hint: "e.g. 600", code: .badValue)
            }
            if !(tabletMaxAspect > 1 && tabletMaxAspect <= 10) {
                throw decoder.fail("tablet_max_aspect must be more than 1 and at most 10", forKey: Settings.tabletMaxAspect.codingKey, hint: "e.g. 1.75", code: .badValue)
            }
        }
    }

    /// `kind: device`.
    public static let kind = "device"
    /// One line for `maidian stages`.
    public static let summary = "adds $brand, $device_name, $device_type from $model and $os, $os_version from the ua header"

    let catalog: DeviceCatalog
    let tabletMinShortSide: Int
    /// `tablet_max_aspect` × 100, for integer comparisons.
    let tabletMaxAspect100: Int
    let userAgent: Bool
    let unknownCounter: StageCounter
    let fromUACounter: StageCounter

    /// Where each catalog fragment sits in the current batch's scratch arena (absent until first used). Moved
    /// into a local for the batch, so the loop pays no exclusivity check per access of a class property.
    private var spanCache: [Span]
    /// `$model` string contents of a chunk of events (see `findModels`), moved into a local like `spanCache`.
    private var modelCache = [Span](repeating: .absent, count: DeviceStage.chunk)
    /// Events per `findModels` pass (a power of two).
    static let chunk = 32

    /// Builds the stage; the built-in tables are parsed once per process.
    public init(config: Config, context: StageContext) throws {
        self.catalog = try DeviceCatalog.builtin.get()
        self.tabletMinShortSide = config.tabletMinShortSide
        self.tabletMaxAspect100 = Int((config.tabletMaxAspect * 100).rounded())
        self.userAgent = config.userAgent
        self.unknownCounter = context.counter("unknown")
        self.fromUACounter = context.counter("os_from_ua")
        self.spanCache = Array(repeating: .absent, count: catalog.fragmentCount)
    }

    /// The fragments one device resolves to (spans in the scratch arena; absent when none).
    struct Resolved {
        var brand = Span.absent
        var name = Span.absent
        var type = Span.absent
        var unknown = false
    }

    private static let brandBit: UInt8 = 1, nameBit: UInt8 = 2, typeBit: UInt8 = 4

    /// Enriches every live `track` event of the batch (see the type's documentation).
    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        var spans: [Span] = []
        swap(&spans, &spanCache)
        defer { swap(&spans, &spanCache) }
        for k in spans.indices { spans[k] = .absent }
        let n = batch.eventCount
        // The previous event's device (all events of a record come from one install, so this usually hits).
        var lastModel = Span.absent            // value content in the JSON arena, Apple models only
        var lastApple = Resolved()
        var lastNotApple = Span.absent         // the last `$model` that is no Apple identifier
        var lastOtherValid = false
        var lastManufacturer = Span.absent     // value content in the JSON arena
        var lastWidth = -1, lastHeight = -1
        var lastOther = Resolved()
        var lastRawBrand = Span.absent         // an unlisted manufacturer's fragment, for lastRawBrandSource
        var lastRawBrandSource = Span.absent
        // The User-Agent of the last record that needed it.
        var uaRecord: Int32 = -1
        var uaOS = Span.absent, uaVersion = Span.absent

        let modelBit = KnownProperty.model.bit
        let otherBits = KnownProperty.manufacturer.bit | KnownProperty.screenWidth.bit | KnownProperty.screenHeight.bit

        var models: [Span] = []
        swap(&models, &modelCache)
        defer { swap(&models, &modelCache) }

        for i in 0..<n {
            if i & (Self.chunk - 1) == 0 {
                // Find the next events' `$model` values in a tight loop of its own: the loads of several events'
                // properties then overlap (the properties array and the JSON arena are out of cache by now, and
                // waiting for them one event at a time was most of this stage's cost).
                Self.findModels(batch, from: i, to: min(i + Self.chunk, n), into: &models)
            }
            let ev = batch.event(i)
            guard ev.status == .live, ev.type.isTrack else { continue }
            let known = ev.known
            var want: UInt8 = 0
            if !Self.sent(batch, i, ev, .brand) { want |= Self.brandBit }
            if !Self.sent(batch, i, ev, .deviceName) { want |= Self.nameBit }
            if !Self.sent(batch, i, ev, .deviceType) { want |= Self.typeBit }

            if want != 0 {
                var r = Resolved()
                var resolved = false
                if known & modelBit != 0 {
                    let model = models[i & (Self.chunk - 1)]
                    if model.isPresent {
                        if lastModel.isPresent && Self.sameBytes(batch, model, lastModel) {
                            r = lastApple
                            resolved = true
                        } else if lastNotApple.isPresent && Self.sameBytes(batch, model, lastNotApple) {
                            // An Android model again: rule 3.
                        } else if let apple = resolveApple(&batch, &spans, model) {
                            r = apple
                            resolved = true
                            lastModel = model
                            lastApple = apple
                        } else {
                            lastNotApple = model
                        }
                    }
                }
                if !resolved {
                    var manufacturer = Span.absent
                    var width = -1, height = -1
                    if known & otherBits != 0 {
                        let found = Self.findOthers(batch, i, known)
                        manufacturer = Self.stringContent(batch, found.manufacturer)
                        width = Self.screenSide(batch, found.width)
                        height = Self.screenSide(batch, found.height)
                    }
                    if lastOtherValid && width == lastWidth && height == lastHeight
                        && (manufacturer.isPresent == lastManufacturer.isPresent)
                        && (!manufacturer.isPresent || Self.sameBytes(batch, manufacturer, lastManufacturer)) {
                        r = lastOther
                    } else {
                        r = Resolved()
                        if manufacturer.isPresent {
                            if let id = batch.withJSON({ catalog.manufacturerFragment($0, manufacturer) }) {
                                r.brand = fragment(&batch, &spans, id)
                            } else if lastRawBrandSource.isPresent && Self.sameBytes(batch, manufacturer, lastRawBrandSource) {
                                r.brand = lastRawBrand
                            } else {
                                // An unlisted manufacturer: `$brand` as sent (its raw JSON string content is valid JSON).
                                r.brand = batch.fragment("$brand", jsonStringContent: manufacturer)
                                lastRawBrand = r.brand
                                lastRawBrandSource = manufacturer
                            }
                        }
                        let type = screenType(width, height)
                        r.type = fragment(&batch, &spans, catalog.typeFragment(type))
                        r.unknown = type == .unknown
                        lastOtherValid = true
                        lastManufacturer = manufacturer
                        lastWidth = width
                        lastHeight = height
                        lastOther = r
                    }
                }
                if want & Self.brandBit != 0 && r.brand.isPresent { batch.linkAdded(event: i, r.brand) }
                if want & Self.nameBit != 0 && r.name.isPresent { batch.linkAdded(event: i, r.name) }
                if want & Self.typeBit != 0 && r.type.isPresent {
                    batch.linkAdded(event: i, r.type)
                    if r.unknown { unknownCounter.add() }
                }
            }

            if userAgent && !Self.sent(batch, i, ev, .os) {
                if ev.record != uaRecord {
                    // Rare: the client sent no `$os`. Parse the record's User-Agent once.
                    uaRecord = ev.record
                    uaOS = .absent
                    uaVersion = .absent
                    let ua = batch.record(Int(ev.record)).ua
                    if ua.isPresent && ua.count > 0 {
                        let os = batch.withInput { UserAgent.os($0[ua]) }
                        if let os {
                            uaOS = batch.fragment(name: Self.osName, string: os.name.text.description)
                            if let v = os.version {
                                uaVersion = batch.fragment(name: Self.osVersionName, string: v)
                            }
                        }
                    }
                }
                if uaOS.isPresent {
                    batch.linkAdded(event: i, uaOS)
                    fromUACounter.add()
                    if uaVersion.isPresent && !Self.sent(batch, i, ev, .osVersion) {
                        batch.linkAdded(event: i, uaVersion)
                    }
                }
            }
        }
    }

    // MARK: - resolving

    /// Rules 1 and 2 for a `$model` string content, or nil when it is not an Apple identifier.
    private func resolveApple(_ batch: inout EventBatch, _ spans: inout [Span], _ model: Span) -> Resolved? {
        if let entry = batch.withJSON({ catalog.appleEntry($0, model) }) {
            let e = catalog.apple[entry]
            return Resolved(brand: fragment(&batch, &spans, catalog.appleBrandFragment), name: fragment(&batch, &spans, e.nameFragment),
                            type: fragment(&batch, &spans, catalog.typeFragment(e.type)), unknown: e.type == .unknown)
        }
        guard let family = batch.withJSON({ DeviceCatalog.appleFamily($0[model]) }) else {
            return nil
        }
        return Resolved(brand: fragment(&batch, &spans, catalog.appleBrandFragment), name: .absent,
                        type: fragment(&batch, &spans, catalog.typeFragment(family)), unknown: family == .unknown)
    }

    /// The screen-size rule (see the type's documentation).
    func screenType(_ width: Int, _ height: Int) -> DeviceType {
        guard width > 0, height > 0 else { return .unknown }
        let short = min(width, height), long = max(width, height)
        if long < 600 && long * 4 <= short * 5 { return .watch }
        if short >= tabletMinShortSide && long * 100 < short * tabletMaxAspect100 { return .tablet }
        return .phone
    }

    /// Catalog fragment `id` in the scratch arena, copied there on its first use in the batch.
    @inline(__always)
    private func fragment(_ batch: inout EventBatch, _ spans: inout [Span], _ id: Int) -> Span {
        let known = spans[id]
        if known.isPresent { return known }
        let start = batch.scratchEnd
        catalog.appendFragment(id, to: &batch)
        let span = Span(start, batch.scratchEnd)
        spans[id] = span
        return span
    }

    private static let osName = Array("$os".utf8), osVersionName = Array("$os_version".utf8)

    // MARK: - reading properties in place

    /// Whether the client sent `known` on event `i` (`ev` is its copy) and it was kept: `batch.hasProperty`
    /// without copying the event again; a bit test unless a property of the event was fixed.
    @inline(__always)
    static func sent(_ batch: borrowing EventBatch, _ i: Int, _ ev: Event, _ known: KnownProperty) -> Bool {
        ev.known & known.bit != 0 && (!ev.hasFixes || batch.hasProperty(event: i, known))
    }

    /// The `$model` string content (`stringContent`) of each live track event in `from..<to`, at
    /// `models[i % chunk]`; absent when the event has none.
    static func findModels(_ batch: borrowing EventBatch, from: Int, to: Int, into models: inout [Span]) {
        for i in from..<to {
            var found = Span.absent
            if batch.isLiveTrack(i), let k = batch.propertyIndex(event: i, .model) { found = batch.stringContent(ofProperty: k) }
            models[i & (chunk - 1)] = found
        }
    }

    /// `$manufacturer`, `$screen_width` and `$screen_height` in one pass (those the known bits say exist).
    static func findOthers(_ batch: borrowing EventBatch, _ i: Int, _ knownBits: UInt64) -> (manufacturer: Int, width: Int, height: Int) {
        var manufacturer = -1, width = -1, height = -1
        var missing = 0
        if knownBits & KnownProperty.manufacturer.bit != 0 { missing += 1 }
        if knownBits & KnownProperty.screenWidth.bit != 0 { missing += 1 }
        if knownBits & KnownProperty.screenHeight.bit != 0 { missing += 1 }
        if missing == 0 { return (-1, -1, -1) }
        let m = UInt8(KnownProperty.manufacturer.rawValue), w = UInt8(KnownProperty.screenWidth.rawValue)
        let h = UInt8(KnownProperty.screenHeight.rawValue)
        batch.forEachKnownProperty(event: i) { k, known in
            if known == m && manufacturer < 0 { manufacturer = k; missing -= 1 }
            else if known == w && width < 0 { width = k; missing -= 1 }
            else if known == h && height < 0 { height = k; missing -= 1 }
            return missing > 0
        }
        return (manufacturer, width, height)
    }

    /// The raw content (between the quotes) of a kept, non-empty string property, or absent.
    @inline(__always)
    static func stringContent(_ batch: borrowing EventBatch, _ k: Int) -> Span {
        guard k >= 0 else { return .absent }
        return batch.stringContent(ofProperty: k)
    }

    /// A kept number property as a positive integer (fraction dropped), else -1.
    static func screenSide(_ batch: borrowing EventBatch, _ k: Int) -> Int {
        guard k >= 0 else { return -1 }
        let p = batch.property(k)
        guard p.kind == .number, p.fix == .keep else { return -1 }
        var v = 0
        var i = Int(p.value.start)
        let end = Int(p.value.end)
        while i < end {
            let c = batch.jsonByte(at: i)
            guard DeviceASCII.isDigit(c) else { break }
            v = v * 10 + Int(c - 0x30)
            if v > 1_000_000 { return -1 }
            i += 1
        }
        return i > Int(p.value.start) ? v : -1
    }

    @inline(__always)
    static func sameBytes(_ batch: borrowing EventBatch, _ a: Span, _ b: Span) -> Bool {
        batch.jsonEqual(a, b)
    }
}

/// `$device_type` values (wire format §2).
public enum DeviceType: UInt8, Sendable, CaseIterable {
    /// Phones and other handhelds (iPod touch); `tablet` includes unfolded foldables; `desktop` includes laptops;
    /// `unknown` when neither the table nor the screen size tells.
    case phone = 0, tablet, watch, tv, desktop, unknown

    /// The property value.
    public var text: String {
        switch self {
        case .phone: return "phone"
        case .tablet: return "tablet"
        case .watch: return "watch"
        case .tv: return "tv"
        case .desktop: return "desktop"
        case .unknown: return "unknown"
        }
    }
}

/// The device stage's tables, parsed once per process from `DeviceTables` (the copy of `data/*.tsv`), with every
/// `"name":value` fragment the stage can add serialized in advance.
struct DeviceCatalog: Sendable {
    struct AppleDevice: Sendable {
        var identifier: String
        var name: String
        var type: DeviceType
        var nameFragment: Int
    }

    struct TableError: Error, CustomStringConvertible {
        var description: String
    }

    private(set) var apple: [AppleDevice] = []
    /// Identifier bytes of `apple[k]` at `appleKeys[appleKeyStart[k]..<appleKeyStart[k + 1]]`.
    private var appleKeys: [UInt8] = []
    private var appleKeyStart: [Int32] = [0]
    private var appleIndex = HashTable64(capacity: 512)
    /// Identifiers of up to 16 bytes (all but a few) also in an inline table keyed by their bytes as two words:
    /// a lookup is two loads, a multiply and a comparison, with no byte loop.
    private var shortA: [UInt64] = Array(repeating: 0, count: Self.shortSlots)
    private var shortB: [UInt64] = Array(repeating: 0, count: Self.shortSlots)
    /// Length in the low byte and row + 1 above it; 0 marks an empty slot.
    private var shortTag: [UInt32] = Array(repeating: 0, count: Self.shortSlots)
    private static let shortSlots = 2048
    /// Lower-cased manufacturer names, as for `appleKeys`, and the brand fragment of each.
    private var manufacturerKeys: [UInt8] = []
    private var manufacturerKeyStart: [Int32] = [0]
    private(set) var manufacturerBrands: [String] = []
    private var manufacturerFragments: [Int] = []
    private var manufacturerIndex = HashTable64(capacity: 128)
    /// Every fragment: `fragmentBytes[fragmentStart[id]..<fragmentStart[id + 1]]`.
    private var fragmentBytes: [UInt8] = []
    private var fragmentStart: [Int32] = [0]
    private(set) var appleBrandFragment = 0
    private var typeFragments: [Int] = []

    /// The built-in tables; an error only if a TSV file is malformed (a test checks they are not).
    static let builtin: Result<DeviceCatalog, TableError> = Result {
        try DeviceCatalog(appleTSV: DeviceTables.appleDevices, manufacturersTSV: DeviceTables.androidManufacturers)
    }.mapError { $0 as? TableError ?? TableError(description: "\($0)") }

    var fragmentCount: Int { fragmentStart.count - 1 }

    init(appleTSV: String, manufacturersTSV: String) throws {
        appleBrandFragment = addFragment("$brand", "Apple")
        for t in DeviceType.allCases { typeFragments.append(addFragment("$device_type", t.text)) }

        for (line, fields) in Self.rows(appleTSV) {
            guard fields.count == 3, !fields[0].isEmpty, !fields[1].isEmpty else {
                throw TableError(description: "apple-devices.tsv:\(line): expected identifier, device_name, device_type separated by tabs")
            }
            guard let type = DeviceType.allCases.first(where: { $0.text == fields[2] }) else {
                throw TableError(description: "apple-devices.tsv:\(line): unknown device_type '\(fields[2])'")
            }
            let key = Array(fields[0].utf8)
            let h = Self.hash(key[...], lower: false)
            if let k = appleIndex.get(h), Array(appleKey(Int(k))) == key {
                throw TableError(description: "apple-devices.tsv:\(line): duplicate identifier '\(fields[0])'")
            }
            if appleIndex.get(h) != nil { throw TableError(description: "apple-devices.tsv:\(line): hash collision") }
            appleIndex.set(h, Int64(apple.count))
            if key.count <= 16 {
                let padded = key + [UInt8](repeating: 0, count: 8)
                let (a, b) = padded.withByteView { Self.words($0, key.count) }
                var slot = Self.slot(a, b, key.count)
                while shortTag[slot] != 0 { slot = (slot + 1) & (Self.shortSlots - 1) }
                shortA[slot] = a
                shortB[slot] = b
                shortTag[slot] = UInt32(key.count) | UInt32(apple.count + 1) << 8
            }
            appleKeys.append(contentsOf: key)
            appleKeyStart.append(Int32(appleKeys.count))
            apple.append(AppleDevice(identifier: fields[0], name: fields[1], type: type, nameFragment: addFragment("$device_name", fields[1])))
        }
        for (line, fields) in Self.rows(manufacturersTSV) {
            guard fields.count == 2, !fields[0].isEmpty, !fields[1].isEmpty else {
                throw TableError(description: "android-manufacturers.tsv:\(line): expected manufacturer, brand separated by a tab")
            }
            let key = fields[0].utf8.map(DeviceASCII.lower)
            let h = Self.hash(key[...], lower: false)
            if manufacturerIndex.get(h) != nil {
                throw TableError(description: "android-manufacturers.tsv:\(line): duplicate manufacturer '\(fields[0])'")
            }
            manufacturerIndex.set(h, Int64(manufacturerBrands.count))
            manufacturerKeys.append(contentsOf: key)
            manufacturerKeyStart.append(Int32(manufacturerKeys.count))
            manufacturerBrands.append(fields[1])
            manufacturerFragments.append(addFragment("$brand", fields[1]))
        }
    }

    /// Non-comment, non-empty lines split at tabs, with their line numbers.
    private static func rows(_ tsv: String) -> [(Int, [String])] {
        var out: [(Int, [String])] = []
        for (n, line) in tsv.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.isEmpty || line.hasPrefix("#") { continue }
            out.append((n + 1, line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)))
        }
        return out
    }

    private mutating func addFragment(_ name: String, _ value: String) -> Int {
        JSONOut.appendString(name, to: &fragmentBytes)
        fragmentBytes.append(0x3A)
        JSONOut.appendString(value, to: &fragmentBytes)
        fragmentStart.append(Int32(fragmentBytes.count))
        return fragmentStart.count - 2
    }

    private func appleKey(_ k: Int) -> ArraySlice<UInt8> { appleKeys[Int(appleKeyStart[k])..<Int(appleKeyStart[k + 1])] }

    /// The fragment of `$device_type` `type`.
    @inline(__always) func typeFragment(_ type: DeviceType) -> Int { typeFragments[Int(type.rawValue)] }

    /// Appends fragment `id`'s bytes to the batch's scratch arena.
    @inline(__always) func appendFragment(_ id: Int, to batch: inout EventBatch) {
        batch.appendScratch(bytesOf: fragmentBytes, Int(fragmentStart[id])..<Int(fragmentStart[id + 1]))
    }

    /// The fragment's text (tests).
    func fragmentText(_ id: Int) -> String {
        String(decoding: fragmentBytes[Int(fragmentStart[id])..<Int(fragmentStart[id + 1])], as: UTF8.self)
    }

    /// The table row of the identifier at `span` of `json`, or nil. `json` must hold 8 readable bytes past the
    /// span (the batch's JSON arena is padded so).
    @inline(__always)
    func appleEntry(_ j: ByteView, _ span: Span) -> Int? {
        let n = span.count
        if n <= 16 && n > 0 && Int(span.start) + 16 <= j.count {
            let (a, b) = Self.words(j[Int(span.start) ..< Int(span.start) + 16], n)
            var slot = Self.slot(a, b, n)
            while true {
                let tag = shortTag[slot]
                if tag == 0 { return nil }
                if tag & 0xFF == UInt32(n) && shortA[slot] == a && shortB[slot] == b { return Int(tag >> 8) - 1 }
                slot = (slot + 1) & (Self.shortSlots - 1)
            }
        }
        let key = j[span]
        guard let k = appleIndex.get(Self.hash(key, lower: false)) else { return nil }
        let lo = Int(appleKeyStart[Int(k)]), hi = Int(appleKeyStart[Int(k) + 1])
        return appleKeys.withByteView { $0[lo ..< hi].equals(key) } ? Int(k) : nil
    }

    /// `appleEntry` over a byte array (tests).
    func appleEntry(_ json: [UInt8], _ span: Span) -> Int? {
        json.withByteView { appleEntry($0, span) }
    }

    /// The brand fragment of the manufacturer at `span` of `json` (ASCII case ignored), or nil if unlisted.
    func manufacturerFragment(_ j: ByteView, _ span: Span) -> Int? {
        let p = j[span]
        let n = p.count
        guard let k = manufacturerIndex.get(Self.hash(p, lower: true)) else { return nil }
        let lo = Int(manufacturerKeyStart[Int(k)]), hi = Int(manufacturerKeyStart[Int(k) + 1])
        guard hi - lo == n else { return nil }
        for i in 0..<n where manufacturerKeys[lo + i] != DeviceASCII.lower(p[i]) { return nil }
        return manufacturerFragments[Int(k)]
    }

    /// The brand of a manufacturer name (tests, rare paths).
    func brand(forManufacturer name: String) -> String? {
        let key = name.utf8.map(DeviceASCII.lower)
        guard let k = manufacturerIndex.get(Self.hash(key[...], lower: false)),
              Array(manufacturerKeys[Int(manufacturerKeyStart[Int(k)])..<Int(manufacturerKeyStart[Int(k) + 1])]) == key else { return nil }
        return manufacturerBrands[Int(k)]
    }

    /// The table row of an identifier (tests, rare paths).
    func appleDevice(_ identifier: String) -> AppleDevice? {
        let key = Array(identifier.utf8)
        guard let k = appleIndex.get(Self.hash(key[...], lower: false)), Array(appleKey(Int(k))) == key else { return nil }
        return apple[Int(k)]
    }

    /// The family of an identifier shaped `<letters><digits>,<digits>` whose letters name an Apple family, or nil.
    static func appleFamily(_ p: ByteView) -> DeviceType? {
        let n = p.count
        var i = 0
        while i < n && DeviceASCII.isLetter(p[i]) { i += 1 }
        let letters = i
        guard letters > 0, letters < n else { return nil }
        var digits = 0
        while i < n && DeviceASCII.isDigit(p[i]) { i += 1; digits += 1 }
        guard digits > 0, i < n, p[i] == UInt8(ascii: ",") else { return nil }
        i += 1
        digits = 0
        while i < n && DeviceASCII.isDigit(p[i]) { i += 1; digits += 1 }
        guard digits > 0, i == n else { return nil }
        func prefix(_ s: StaticString) -> Bool {
            letters == s.utf8CodeUnitCount && p.has(s, at: 0)
        }
        if prefix("iPhone") || prefix("iPod") { return .phone }
        if prefix("iPad") { return .tablet }
        if prefix("Watch") { return .watch }
        if prefix("AppleTV") { return .tv }
        if prefix("Mac") || prefix("MacBook") || prefix("MacBookAir") || prefix("MacBookPro") || prefix("Macmini")
            || prefix("MacPro") || prefix("iMac") || prefix("iMacPro") {
            return .desktop
        }
        if prefix("RealityDevice") { return .unknown }
        return nil
    }

    /// The family of an identifier (tests).
    static func appleFamily(_ identifier: String) -> DeviceType? {
        identifier.withByteView { $0.isEmpty ? nil : appleFamily($0) }
    }

    /// `p[0..<n]` (`0 < n <= 16`) as two words: the first 8 bytes and the last 8 (zero-padded when shorter).
    /// Reads up to 8 bytes past `n`: `p` holds at least `max(n, 8)` bytes.
    @inline(__always)
    static func words(_ p: ByteView, _ n: Int) -> (UInt64, UInt64) {
        if n >= 8 {
            return (p.load64(at: 0), p.load64(at: n - 8))
        }
        let mask: UInt64 = (1 << UInt64(n * 8)) &- 1
        return (p.load64(at: 0) & mask, 0)
    }

    @inline(__always)
    static func slot(_ a: UInt64, _ b: UInt64, _ n: Int) -> Int {
        var h = (a &* 0x9E37_79B9_7F4A_7C15) ^ (b &* 0xC2B2_AE3D_27D4_EB4F) ^ UInt64(n)
        h ^= h >> 29
        h = h &* 0xBF58_476D_1CE4_E5B9
        h ^= h >> 32
        return Int(truncatingIfNeeded: h) & (shortSlots - 1)
    }

    /// FNV-1a (`StableHash`), optionally over ASCII-lower-cased bytes, with a final mix (the table indexes by
    /// the low bits).
    @inline(__always)
    static func hash(_ p: ByteView, lower: Bool) -> UInt64 {
        var h = StableHash.fnv1a(p, lowercasingASCII: lower)
        h ^= h >> 32
        h = h &* 0xD6E8_FEB8_6659_FD93
        h ^= h >> 32
        return h
    }

    static func hash(_ bytes: ArraySlice<UInt8>, lower: Bool) -> UInt64 {
        Array(bytes).withByteView { hash($0, lower: lower) }
    }
}
