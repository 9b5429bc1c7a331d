import Logging
import MaidianEvents
import MaidianGeo
import MaidianPipeline

/// Adds `$country`, `$province` (first subdivision) and `$city` from the event's IP through a MaxMind-format
/// city database (wire format §2, enrichment), with names in the configured locale, falling back to `en`.
///
/// - The IP is the event's own `$ip` when the client sent one, else the record's `ip` header (the value
///   `record_presets` adds as `$ip`): the location always belongs to the `$ip` the event carries.
/// - Private, special-purpose, malformed and unknown addresses add nothing.
/// - Never overwrites the client: an event that carries any of `$country`, `$province`, `$city` gets none
///   of them from the database (no mix of the client's country with the database's city).
/// - Work is per IP, not per event: results are cached by the IP's text as pre-serialized fragments, copied
///   into the batch once per distinct IP and linked to each event.
/// - The database file is checked between batches (at most every `reload_check`); a new version is opened
///   completely before it replaces the old one, so every batch is enriched by exactly one database. A new
///   file that does not open keeps the old database (a warning is logged).
public final class LocationStage: Stage {
    /// The stage's options (pipelines/README.md documents each).
    public struct Config: Decodable, Sendable, DeclaredSettings {
        @usableFromInline enum Settings {
            static let database = Setting<String>.required("database",
                "path of the `.mmdb` file; relative paths are relative to the pipeline file. `app-analytics.yaml` reads `MAIDIAN_GEO_DB`, else the small test database `data/test-city.mmdb` (a few Chinese and US networks: for demos and tests only)",
                example: "/usr/share/GeoIP/GeoLite2-City.mmdb")
            @usableFromInline static let locale = Setting("locale", default: "zh-CN",
                "locale of the names: MaxMind's databases have `en`, `zh-CN`, `de`, `es`, `fr`, `ja`, `pt-BR`, `ru`", example: "en")
            @usableFromInline static let reloadCheck = Setting("reload_check", default: ConfigDuration.seconds(5),
                "how often, at most, the file is checked for a new version (a duration; `0s`: before every batch)", example: "30s")
            @usableFromInline static let cacheSize = Setting("cache_size", default: 65536,
                "most IPs whose result is kept between batches; the cache is emptied when full. At least 1", example: "100000")
        }
        public static let settings = ConfigSpec(Settings.database, Settings.locale, Settings.reloadCheck, Settings.cacheSize)
        /// Path of the `.mmdb` city database (required); relative paths are relative to the pipeline file.
        public var database: String
        /// Locale of the names (`zh-CN`, `en`, `de`, `es`, `fr`, `ja`, `pt-BR`, `ru` in MaxMind's databases);
        /// a name missing in it falls back to `en`.
        public var locale = Settings.locale.default
        /// How often, at most, the database file is checked for a new version (between batches). `0s`: every batch.
        public var reloadCheck = Settings.reloadCheck.default
        /// Most IPs whose result is kept; the cache is emptied when it is full.
        public var cacheSize = Settings.cacheSize.default
        /// Where `database` is written in the pipeline file (for errors found when opening it).
        public var databaseLocation: SourceLocation?

        /// A configuration for code and tests.
        public init(database: String, locale: String = Settings.locale.default, reloadCheck: ConfigDuration = Settings.reloadCheck.default, cacheSize: Int = Settings.cacheSize.default) {
            self.database = database
            self.locale = locale
            self.reloadCheck = reloadCheck
            self.cacheSize = cacheSize
        }

        /// Decodes the YAML keys `database`, `locale`, `reload_check`, `cache_size`.
        public init(from decoder: any Decoder) throws {
            let s = try decoder.settings(Self.settings)
            database = try s(Settings.database)
            locale = try s(Settings.locale)
            reloadCheck = try s(Settings.reloadCheck)
            cacheSize = try s(Settings.cacheSize)
            databaseLocation = decoder.configLocation(forKey: Settings.database.codingKey)
            if database.isEmpty {
                throw decoder.fail("database must name a .mmdb file", forKey: Settings.database.codingKey, hint: "e.g. /usr/share/GeoIP/GeoLite2-City.mmdb", code: .badValue)
            }
            if locale.isEmpty || locale.utf8.count > 16 || !locale.utf8.allSatisfy({ $0 == 0x2D || $0 == 0x5F || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) }) {
                throw decoder.fail("invalid locale '\(locale)'", forKey: Settings.locale.codingKey, hint: "e.g. zh-CN, en, pt-BR", code: .badValue)
            }
            if cacheSize < 1 {
                throw decoder.fail("cache_size must be at least 1", forKey: Settings.cacheSize.codingKey, code: .badValue)
            }
        }
    }

    /// `kind: location`.
    public static let kind = "location"
    /// For `maidian stages`.
    public static let summary = "adds $country, $province and $city from $ip through a MaxMind city database"

    /// The database in use; replaced between batches when its file changes.
    public private(set) var database: GeoDatabase
    let path: String
    let locale: String
    let cacheSize: Int
    var logger: Logger
    /// When the database file is due for reopening.
    var watch: FileWatch

    let located: StageCounter
    let lookups: StageCounter
    let reloads: StageCounter

    // The cache: IP text → the three fragments, `"$country":"…"` etc., back to back in `fragments`.
    struct Entry {
        var keyStart: Int32
        var keyCount: Int32
        var fragStart: Int32
        var countryCount: Int32
        var provinceCount: Int32
        var cityCount: Int32
        /// The batch in which the fragments were last copied to the scratch arena, and where.
        var epoch: UInt64
        var scratchStart: Int32
    }
    var table = HashTable64(capacity: 1024)
    var entries: [Entry] = []
    var keys: [UInt8] = []
    var fragments: [UInt8] = []
    var epoch: UInt64 = 0
    /// Reused per batch: each record's IP hash (see `warm`).
    var recordHashes: [UInt64] = []
    /// What `warm` read, kept so that its reads are not optimized away.
    var touched: UInt64 = 0

    static let locationBits = KnownProperty.country.bit | KnownProperty.province.bit | KnownProperty.city.bit

    /// Opens the database.
    ///
    /// - Throws: ``PipelineError`` located at `database:` when the file is missing, unreadable, not a MaxMind
    ///   DB or not a city database.
    public init(config: Config, context: StageContext) throws {
        path = context.resolvePath(config.database)
        locale = config.locale
        cacheSize = config.cacheSize
        logger = context.logger
        do {
            database = try GeoDatabase(path: path)
        } catch {
            throw LocationStage.configError(error, location: config.databaseLocation)
        }
        watch = FileWatch(path: path, every: .milliseconds(config.reloadCheck.milliseconds), loaded: database.stamp)
        located = context.counter("located")
        lookups = context.counter("lookups")
        reloads = context.counter("reloads")
        entries.reserveCapacity(min(cacheSize, 1 << 16))
        if !database.metadata.languages.isEmpty && !database.metadata.languages.contains(locale) {
            logger.warning("geo database has no names in locale \(locale); using en", metadata: [
                "database": "\(path)", "languages": "\(database.metadata.languages.joined(separator: ","))",
            ])
        }
        logger.debug("geo database opened", metadata: [
            "database": "\(path)", "type": "\(database.metadata.databaseType)", "build_epoch": "\(database.metadata.buildEpoch)",
        ])
    }

    static func configError(_ error: GeoError, location: SourceLocation?) -> PipelineError {
        switch error.code {
        case .fileNotFound:
            return PipelineError(
                code: .io, message: "location: \(error)", location: location,
                hint: "set MAIDIAN_GEO_DB or database: to a MaxMind city database such as GeoLite2-City.mmdb", underlying: error)
        case .unreadable, .fileChanging:
            return PipelineError(code: .io, message: "location: \(error)", location: location, underlying: error)
        case .invalidDatabase, .notCityDatabase:
            return PipelineError(
                code: .badValue, message: "location: \(error)", location: location,
                hint: "GeoLite2-City.mmdb, GeoIP2-City.mmdb or another MaxMind-format city database", underlying: error)
        }
    }

    /// Swaps in a new database version if the file changed (between batches), then enriches the batch.
    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        checkForNewDatabase(whenDue: true)
        epoch &+= 1
        warm(batch)
        let n = batch.eventCount
        var lastRecord: Int32 = -1
        var recordEntry = -1
        var count = 0
        for i in 0..<n {
            let ev = batch.event(i)
            guard ev.status == .live, ev.type.isTrack else { continue }
            let known = ev.known
            if known & LocationStage.locationBits != 0 && clientSentLocation(batch, i) { continue }
            let entry: Int
            if known & KnownProperty.ip.bit != 0, let p = batch.propertyIndex(event: i, name: "$ip") {
                // Rare: the client sent its own $ip. It may evict cache entries: look the record up again after.
                entry = entryForClientIP(&batch, property: p)
                lastRecord = -1
            } else {
                if ev.record != lastRecord {
                    lastRecord = ev.record
                    let ip = batch.record(Int(ev.record)).ip
                    recordEntry = ip.isPresent && ip.count > 0 ? entryForInput(&batch, ip, hash: recordHashes[Int(ev.record)]) : -1
                }
                entry = recordEntry
            }
            if entry >= 0 && link(&batch, event: i, entry: entry) { count += 1 }
        }
        located.add(count)
    }

    /// Whether the client sent any of the three location properties.
    @inline(__always)
    private func clientSentLocation(_ batch: borrowing EventBatch, _ i: Int) -> Bool {
        batch.hasProperty(event: i, .country) || batch.hasProperty(event: i, .province) || batch.hasProperty(event: i, .city)
    }

    /// Links the entry's fragments to event `i`, copying them into the scratch arena on first use in this batch.
    @inline(__always)
    private func link(_ batch: inout EventBatch, event i: Int, entry: Int) -> Bool {
        var e = entries[entry]
        let total = e.countryCount + e.provinceCount + e.cityCount
        if total == 0 { return false }
        if e.epoch != epoch {
            e.epoch = epoch
            e.scratchStart = Int32(batch.scratchEnd)
            let from = Int(e.fragStart)
            batch.appendScratch(bytesOf: fragments, from..<(from + Int(total)))
            entries[entry] = e
        }
        var s = e.scratchStart
        if e.countryCount > 0 { batch.linkAdded(event: i, Span(start: s, end: s + e.countryCount)); s += e.countryCount }
        if e.provinceCount > 0 { batch.linkAdded(event: i, Span(start: s, end: s + e.provinceCount)); s += e.provinceCount }
        if e.cityCount > 0 { batch.linkAdded(event: i, Span(start: s, end: s + e.cityCount)) }
        return true
    }

    /// The cache entry for an IP in the input arena (a record header) whose hash is `hash`.
    @inline(__always)
    private func entryForInput(_ batch: inout EventBatch, _ ip: Span, hash: UInt64) -> Int {
        batch.withInput { entry(forIP: $0[ip], hash: hash) }
    }

    /// Hashes each live record's IP (into `recordHashes`) and reads what its look-up will read: the table's tag
    /// and slot, then the entry, key and fragments they lead to. The cache does not stay in the processor's caches from one
    /// batch to the next (the other stages evict it), and a look-up waits for each of those misses in turn; here
    /// the reads of different records do not wait for one another, so their misses overlap (they were about
    /// four fifths of this stage's time).
    private func warm(_ batch: borrowing EventBatch) {
        recordHashes.removeAll(keepingCapacity: true)
        var folded: UInt64 = 0
        batch.withInput { input in
            for r in 0..<batch.recordCount {
                let rec = batch.record(r)
                guard rec.status == .live, rec.ip.isPresent, rec.ip.count > 0 else { recordHashes.append(0); continue }
                let h = input[rec.ip].hash
                recordHashes.append(h)
                folded &+= table.touch(h)
            }
        }
        for h in recordHashes where h != 0 {
            guard let found = table.get(h) else { continue }
            let e = entries[Int(found)]
            folded &+= UInt64(keys[Int(e.keyStart)]) &+ UInt64(e.epoch)
            // The fragments `link` copies (both ends: they may straddle a cache line).
            let total = Int(e.countryCount + e.provinceCount + e.cityCount)
            if total > 0 { folded &+= UInt64(fragments[Int(e.fragStart)]) &+ UInt64(fragments[Int(e.fragStart) + total - 1]) }
        }
        touched = folded
    }

    /// The cache entry for the client's `$ip` property; -1 when it is not a plain string.
    private func entryForClientIP(_ batch: inout EventBatch, property p: Int) -> Int {
        let ip = batch.stringValue(ofProperty: p)
        guard !ip.escaped, ip.count > 0 else { return -1 }
        return batch.withBytes(of: ip) { entry(forIP: $0) }
    }

    /// The cache entry for the IP text `ip`, looking it up in the database on a miss.
    private func entry(forIP ip: ByteView, hash: UInt64? = nil) -> Int {
        let hash = hash ?? ip.hash
        if let found = table.get(hash) {
            let e = entries[Int(found)]
            if keys.withByteView({ $0[Int(e.keyStart) ..< Int(e.keyStart + e.keyCount)].equals(ip) }) {
                return Int(found)
            }
            // A 64-bit hash collision: look it up without caching over the other key.
            return insert(ip, hash: nil)
        }
        return insert(ip, hash: hash)
    }

    /// Looks `ip` up and appends an entry; indexes it under `hash` when given. Evicts everything when full.
    private func insert(_ ip: ByteView, hash: UInt64?) -> Int {
        if entries.count >= cacheSize { clearCache() }
        lookups.add()
        let location = ip.withRawBytes { IPAddress(utf8: $0) }.flatMap { database.lookup($0, locale: locale) }
        let fragStart = fragments.count
        let country = appendFragment("\"$country\":", location?.country)
        let province = appendFragment("\"$province\":", location?.province)
        let city = appendFragment("\"$city\":", location?.city)
        let keyStart = keys.count
        ip.append(to: &keys)
        entries.append(Entry(
            keyStart: Int32(keyStart), keyCount: Int32(ip.count), fragStart: Int32(fragStart),
            countryCount: Int32(country), provinceCount: Int32(province), cityCount: Int32(city),
            epoch: epoch &- 1, scratchStart: 0))
        let index = entries.count - 1
        if let hash { table.set(hash, Int64(index)) }
        return index
    }

    /// Appends `"$name":"value"` to the fragment arena; returns its length (0 when there is no value).
    private func appendFragment(_ prefix: StaticString, _ value: String?) -> Int {
        guard let value, !value.isEmpty else { return 0 }
        let start = fragments.count
        prefix.withUTF8Buffer { fragments.append(contentsOf: $0) }
        JSONOut.appendString(value, to: &fragments)
        return fragments.count - start
    }

    private func clearCache() {
        table.removeAll()
        entries.removeAll(keepingCapacity: true)
        keys.removeAll(keepingCapacity: true)
        fragments.removeAll(keepingCapacity: true)
    }

    /// Between batches: opens the database file again when it changed, and swaps it in when it opens.
    /// `whenDue`: only once `reload_check` passed since the last look.
    func checkForNewDatabase(whenDue: Bool = false) {
        let stamp: GeoFileStamp
        switch watch.check(anyway: !whenDue) {
        case .unchanged: return
        case .gone:
            logger.warning("geo database file is gone; keeping the loaded one", metadata: ["database": "\(path)"])
            return
        case .changed(let s): stamp = s
        }
        do {
            let fresh = try GeoDatabase(path: path)
            database = fresh
            watch.loaded(fresh.stamp)
            clearCache()
            reloads.add()
            logger.info("geo database reloaded", metadata: [
                "database": "\(path)", "type": "\(fresh.metadata.databaseType)", "build_epoch": "\(fresh.metadata.buildEpoch)",
            ])
        } catch {
            if error.code == .fileChanging {
                // A copy in progress: try again at the next check.
                logger.debug("geo database file is changing; will retry", metadata: ["database": "\(path)"])
            } else {
                watch.failed(stamp)
                logger.warning("new geo database file does not open; keeping the loaded one", metadata: [
                    "database": "\(path)", "error": "\(error)",
                ])
            }
        }
    }
}
