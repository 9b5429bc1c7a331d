import MaidianEvents
import MaidianRecording

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What to generate.
public struct TrafficConfig: Sendable, Equatable {
    /// Simulated app installs (one record key each).
    public var users: Int
    /// Length of the simulated period, minutes. Users start their first session in its first half.
    public var minutes: Int
    /// PRNG seed: the same configuration gives byte-identical output.
    public var seed: UInt64
    /// Start of the period, ms since the epoch.
    public var startMillis: Int64
    /// The `project` header of every record.
    public var project: String
    /// Share of users on Android devices (the rest are iPhones and iPads).
    public var androidShare: Double
    /// Multiplies the rates of bad records, bad events and properties needing fixes (1 = about 1% of
    /// records, as in the recorded sample; 0 = clean traffic).
    public var faultScale: Double
    /// zstd level of each record value.
    public var compressionLevel: Int
    /// Share of sessions an offline app caches and uploads 2 minutes to 3 hours after they ended (late events that
    /// still count: wire format §5). 0 (the default) leaves the traffic exactly as without the option.
    public var offlineShare: Double = 0
    /// Share of sessions uploaded 26 to 48 hours after they ended: too late for the default allowed lateness (24 h).
    public var tooLateShare: Double = 0
    /// Share of installs whose clock is 1 to 400 days ahead and whose SDK sends no `_flush_time` (nobody can correct
    /// it: the pipeline clamps such times to `max_future`).
    public var futureClockShare: Double = 0
    /// Share of sessions of anonymous users in which the user logs in during a visit (between a page-enter and its
    /// leave): `distinct_id` changes from the anonymous id to the login id, with a `track_signup` event.
    public var loginShare: Double = 0

    /// The sample traffic's start: 2025-11-21 04:40:00 UTC.
    public static let defaultStart: Int64 = 1_763_700_000_000

    /// Creates a configuration.
    public init(
        users: Int, minutes: Int, seed: UInt64 = 1, startMillis: Int64 = TrafficConfig.defaultStart,
        project: String = "shop", androidShare: Double = 0.15, faultScale: Double = 1, compressionLevel: Int = 3
    ) {
        self.users = users
        self.minutes = minutes
        self.seed = seed
        self.startMillis = startMillis
        self.project = project
        self.androidShare = androidShare
        self.faultScale = faultScale
        self.compressionLevel = compressionLevel
    }
}

/// Counts of what was generated.
public struct TrafficStats: Sendable, Equatable {
    /// Records emitted (including retried copies and bad records).
    public var records = 0
    /// Retried copies: records whose value repeats an earlier record's value byte for byte.
    public var retriedRecords = 0
    /// Records that are bad as a whole (bad_encoding, bad_zstd, bad_json, not_array, too_large).
    public var badRecords = 0
    /// Elements of the JSON arrays of good records (events, profile events and bad elements), retried
    /// copies included: the events the pipeline decodes, as `maidian bench` and `maidian_events_total`
    /// count them (docs/wire-format.md, "Counting").
    public var events = 0
    /// Elements among `events` in retried copies (the dedup stage drops the valid ones).
    public var retriedEvents = 0
    /// Elements among `events` that should be dead-lettered (in retried copies too: validation comes first).
    public var badEvents = 0
    /// Events among `events` that carry a property needing a fix.
    public var fixableEvents = 0
    /// Sessions simulated.
    public var sessions = 0
    /// `$AppCrashed` events generated.
    public var crashes = 0
    /// Sum of record value sizes.
    public var valueBytes = 0
    /// Records of sessions cached offline and uploaded minutes to hours late (`offlineShare`).
    public var offlineRecords = 0
    /// Records uploaded more than a day late (`tooLateShare`).
    public var tooLateRecords = 0
    /// Events from devices with clocks far ahead and no `_flush_time` (`futureClockShare`).
    public var futureClockEvents = 0
    /// Logins during a visit (`loginShare`).
    public var logins = 0
}

/// The result of writing a generated recording.
public struct TrafficSummary: Sendable {
    /// What was generated.
    public var stats: TrafficStats
    /// The file written.
    public var path: String
    /// Size of the file.
    public var fileBytes: Int
    /// Size of the NDJSON text (before whole-file compression).
    public var textBytes: Int
}

/// Generates realistic traffic of the sample's shopping app, as recording records in receive-time
/// (topic) order, for demos and benchmarks at any size.
///
/// Each user is one install (key `a0000285-0bd0b8ab`; `distinct_id` is `user285` for logged-in users,
/// else the key) on one device with one client IP. Sessions start with `$AppStart`, view pages in the
/// `$AppViewScreen`/`$AppPageLeave` style or (some sessions) the `enter_view`/`leave_view` style, click
/// buttons, images, table cells (composite content), collection cells and alerts, and end with
/// `$AppEnd`, a crash (`$AppCrashed`), or silently (killed). Uploads batch a few events each; some are
/// retried (duplicates), some devices' clocks are hours off, some users sign up mid-session
/// (`track_signup`), some send `profile_*` events, and about 1% of records carry every kind of fault of
/// wire format §2 (every dead-letter reason, and properties that must be fixed).
///
/// Deterministic: each user has its own xoshiro256** stream derived from the seed. Memory stays
/// bounded by the number of users (records are merged by receive time as sessions are simulated).
public final class TrafficGenerator {
    /// The configuration.
    public let config: TrafficConfig
    /// Counts so far.
    public private(set) var stats = TrafficStats()

    private var users: [UserState] = []
    private var userHeap = MinHeap<UserSlot>()
    private var recordHeap = MinHeap<PendingRecord>()
    private let compressor = ZstdCompressor()
    private let checker = ZstdDecompressor()
    private var events: [SimEvent] = []
    private var json: [UInt8] = []
    private var scratch: [UInt8] = []
    private var bomb: [UInt8]? = nil
    private let windowStart: Int64
    private let windowEnd: Int64
    private let projectBytes: [UInt8]
    private var crashReasons: [String] = []

    /// Creates a generator.
    public init(_ config: TrafficConfig) {
        self.config = config
        windowStart = config.startMillis
        windowEnd = config.startMillis + Int64(Swift.max(config.minutes, 1)) * 60_000
        projectBytes = Array(config.project.utf8)
        users.reserveCapacity(config.users)
        for i in 0..<Swift.max(config.users, 0) {
            var u = UserState(index: i, config: config)
            let half = Swift.max(Int64(Swift.max(config.minutes, 1)) * 30_000, 1)
            u.nextStart = windowStart + u.rng.range(0, half)
            if config.futureClockShare > 0 && u.conditions.chance(config.futureClockShare) {
                u.futureClock = u.conditions.range(1, 401) * 86_400_000 + u.conditions.range(0, 86_400_000)
            }
            users.append(u)
            userHeap.push(UserSlot(start: u.nextStart, user: Int32(i)))
        }
        json.reserveCapacity(64 << 10)
    }

    /// The next record in receive-time order, or nil at the end.
    public func next() -> RecordingRecord? {
        while true {
            if let slot = userHeap.min, recordHeap.min.map({ slot.start < $0.received }) ?? true {
                _ = userHeap.pop()
                let i = Int(slot.user)
                simulateSession(i)
                if !users[i].done {
                    userHeap.push(UserSlot(start: users[i].nextStart, user: slot.user))
                }
                continue
            }
            guard let r = recordHeap.pop() else { return nil }
            stats.records += 1
            stats.valueBytes += r.value.count
            let u = users[Int(r.user)]
            var headers: [(String, [UInt8])] = [("ip", u.ip)]
            var ts: [UInt8] = []
            ts.append(decimal: r.received)
            headers.append(("received_at", ts))
            headers.append(("project", projectBytes))
            if r.withUA { headers.append(("ua", r.ua)) }
            return RecordingRecord(key: u.key, headers: headers, timestamp: r.received, value: r.value)
        }
    }

    /// Generates a whole recording into a file (`.zst`: compressed, unless `compress` says otherwise).
    @discardableResult
    public static func generate(_ config: TrafficConfig, to path: String, compress: Bool? = nil) throws -> TrafficSummary {
        let gen = TrafficGenerator(config)
        let writer = try RecordingWriter(path: path, compress: compress)
        while let r = gen.next() {
            try writer.append(r)
        }
        try writer.close()
        return TrafficSummary(stats: gen.stats, path: path, fileBytes: writer.fileBytes, textBytes: writer.textBytes)
    }

    // MARK: - Faults (rates per upload or per event, measured on the sample; scaled by faultScale)

    private enum RecordFault: UInt8 { case none, badEncoding, badZstd, badJSON, notArray, tooLarge }

    private var recordFaultRates: [(RecordFault, Double)] {
        let s = config.faultScale
        return [(.badEncoding, 0.00094 * s), (.badZstd, 0.00084 * s), (.badJSON, 0.00136 * s),
                (.notArray, 0.00105 * s), (.tooLarge, 0.00003 * s)]
    }

    private var eventFaultRates: [(EventFault, Double)] {
        let s = config.faultScale
        return [(.badType, 0.00043 * s), (.badEventName, 0.00065 * s), (.badTime, 0.00124 * s),
                (.badDistinctID, 0.0018 * s), (.badProperties, 0.00065 * s)]
    }

    // MARK: - Sessions

    private func simulateSession(_ ui: Int) {
        var u = users[ui]
        defer { users[ui] = u }
        events.removeAll(keepingCapacity: true)
        let start = u.nextStart
        if u.sessions > 0 && u.appVersion < TrafficCatalog.appVersions.count - 1 && u.rng.chance(0.03) {
            u.setAppVersion(u.appVersion + 1)  // upgraded between sessions
        }
        stats.sessions += 1
        let duration = u.rng.range(40_000, 480_000)  // as in the sample: 10% under 76 s, 90% under 441 s
        let deadline = Swift.min(start + duration, windowEnd)
        let classic = !u.rng.chance(0.13)  // $AppViewScreen/$AppPageLeave, else enter_view/leave_view
        var net = UInt8(u.rng.below(3))
        var t = start

        func add(_ kind: EventKind, _ time: Int64, page: Int = 0, element: Int = 0, value: Int64 = 0) {
            if u.rng.chance(0.05) { net = UInt8(u.rng.below(3)) }
            var e = SimEvent(kind: kind, time: time, page: UInt8(page), element: UInt8(element), value: value)
            e.network = net
            e.trackID = UInt32(truncatingIfNeeded: u.rng.next() & 0x7FFF_FFFF)
            e.loggedIn = u.loggedIn
            if kind == .click {
                e.section = UInt8(u.rng.below(3))
                e.row = UInt8(u.rng.below(15))
            }
            events.append(e)
        }

        add(.appStart, t, value: (u.isNew && u.sessions == 0) ? 1 : 0)
        if u.rng.chance(0.06) {
            t += u.rng.range(100, 600)
            add(.navScreen, t)
        }
        t += u.rng.range(300, 1500)
        var page = TrafficCatalog.Page.home
        var enterTime = t
        var crashed = false
        // A login during this session's first visit (drawn from the conditions' own stream, so that without the
        // option the traffic stays byte for byte what it was).
        var logsIn = config.loginShare > 0 && !u.loggedIn && u.conditions.chance(config.loginShare)
        session: while true {
            add(classic ? .viewScreen : .enterView, t, page: page)
            enterTime = t
            if logsIn {
                logsIn = false
                t += u.conditions.range(1000, 8000)
                u.loggedIn = true
                add(.signUp, t, page: page)
                stats.logins += 1
            }
            if u.rng.chance(0.01) {
                // viewWillAppear twice: a re-enter without a leave.
                t += u.rng.range(200, 900)
                add(classic ? .viewScreen : .enterView, t, page: page)
                enterTime = t
            }
            let spec = TrafficCatalog.pages[page]
            let clicks = u.rng.below(spec.maxClicks + 1)
            for _ in 0..<clicks {
                t += u.rng.range(1000, 20_000)
                if t >= deadline { break session }
                let el = u.rng.weighted(spec.elementWeights)
                add(.click, t, page: page, element: el)
                let es = spec.elements[el]
                if es.crashes && u.rng.chance(0.3) {
                    t += u.rng.range(150, 900)
                    add(.crash, t, page: page)
                    crashed = true
                    break session
                }
                if es.opensAlert && u.rng.chance(0.8) {
                    t += u.rng.range(700, 3000)
                    add(.alertClick, t, page: page, element: u.rng.below(2))
                }
                if !u.loggedIn && u.signsUp && page == TrafficCatalog.Page.profile && u.rng.chance(0.35) {
                    t += u.rng.range(2000, 8000)
                    u.loggedIn = true
                    add(.signUp, t, page: page)
                }
            }
            t += u.rng.range(1000, 31_000)
            if t >= deadline { break session }
            add(classic ? .pageLeave : .leaveView, t, page: page, value: t - enterTime)
            t += u.rng.range(150, 1500)
            if u.rng.chance(0.03) {
                add(.navScreen, t)
                t += u.rng.range(100, 400)
            }
            page = spec.next[u.rng.weighted(spec.nextWeights)]
        }
        if !crashed {
            let r = u.rng.unit()
            if r < 0.13 {
                t += u.rng.range(500, 5000)
                add(.crash, t, page: page)
            } else if r < 0.21 {
                // Killed silently: no leave, no end; the next session starts with $AppStart.
            } else {
                if u.rng.chance(0.7) {
                    t += u.rng.range(100, 600)
                    add(classic ? .pageLeave : .leaveView, t, page: page, value: t - enterTime)
                }
                t += u.rng.range(50, 800)
                add(.appEnd, t, value: t - start)
            }
        }
        u.sessions += 1
        // An offline app keeps the session's uploads and sends them, oldest first, when it is back.
        var delay: Int64 = 0
        if config.offlineShare > 0 || config.tooLateShare > 0 {
            let x = u.conditions.unit()
            if x < config.tooLateShare {
                delay = u.conditions.range(26 * 3_600_000, 48 * 3_600_000)
            } else if x < config.tooLateShare + config.offlineShare {
                delay = u.conditions.range(120_000, 3 * 3_600_000)
            }
        }
        upload(&u, delay: delay)
        let gap = u.rng.range(60_000, 2_400_000)  // 1 to 40 minutes, as in the sample
        u.nextStart = t + gap
        // The next session follows the cached uploads (up to 3 h; a day-old cache is the phone's last session).
        if delay > 0 && delay < 24 * 3_600_000 { u.nextStart = Swift.max(u.nextStart, t + delay + 60_000) }
        if u.nextStart > windowEnd - 300_000 { u.done = true }  // no session starts in the last 5 minutes
    }

    /// Splits the session's events into uploads and queues their records.
    private func upload(_ u: inout UserState, delay: Int64) {
        // After each event the SDK waits 0.5 to 11 s for more before it uploads (about as in the sample);
        // an upload leaves at most 20 s after its first event, and arrives at most 24 s after it, so that
        // (with clocks a few seconds off) no event is late for a 30 s allowed lateness.
        var i = 0
        let n = events.count
        while i < n {
            var j = i
            var flushAt: Int64 = 0
            while true {
                let k = events[j].kind
                flushAt = Swift.min(events[j].time + u.rng.range(500, 11_000), events[i].time + 20_000)
                j += 1
                if k == .appEnd || k == .crash || j == n || events[j].time > flushAt
                    || events[j].time - events[i].time > 20_000 {
                    break
                }
            }
            emitUpload(&u, i..<j, flushAt: flushAt, delay: delay)
            i = j
        }
    }

    private func pickRecordFault(_ rng: inout SeededRandom) -> RecordFault {
        var x = rng.unit()
        for (f, p) in recordFaultRates {
            if x < p { return f }
            x -= p
        }
        return .none
    }

    /// `delay`: how much later than `flushAt` an offline app sends the upload (its `_flush_time` then says so).
    private func emitUpload(_ u: inout UserState, _ range: Range<Int>, flushAt plannedFlush: Int64, delay: Int64) {
        let flushAt = plannedFlush + delay
        let fault = pickRecordFault(&u.rng)
        let rates = eventFaultRates
        let fixRate = 0.0095 * config.faultScale
        json.removeAll(keepingCapacity: true)
        json.append(0x5B)
        var elements = 0
        var badEvents = 0
        var fixable = 0
        let notObjectAt = u.rng.chance(0.00125 * config.faultScale) ? range.lowerBound + u.rng.below(range.count + 1) : -1
        for idx in range.lowerBound...range.upperBound {
            if idx == notObjectAt {
                if elements > 0 { json.append(0x2C) }
                switch u.rng.below(4) {
                case 0: json.append(static: "\"just a string\"")
                case 1: json.append(static: "42")
                case 2: json.append(static: "null")
                default: json.append(static: "[\"not\",\"an\",\"event\"]")
                }
                elements += 1
                badEvents += 1
            }
            if idx == range.upperBound { break }
            var e = events[idx]
            var x = u.rng.unit()
            for (f, p) in rates {
                if x < p {
                    e.fault = f
                    e.variant = UInt8(u.rng.below(4))
                    break
                }
                x -= p
            }
            if e.fault == .none && u.rng.chance(fixRate) {
                e.fix = UInt8(1 + u.rng.below(6))
                fixable += 1
            }
            if e.fault != .none { badEvents += 1 }
            if e.kind == .crash { stats.crashes += 1 }
            if elements > 0 { json.append(0x2C) }
            writeEvent(e, &u, flushAt: flushAt)
            elements += 1
        }
        if u.rng.chance(0.005) {
            // A profile update rides along.
            json.append(0x2C)
            writeProfile(&u, time: events[range.upperBound - 1].time + u.rng.range(10, 500))
            elements += 1
        }
        json.append(0x5D)

        var value: [UInt8] = []
        switch fault {
        case .none:
            if u.rng.chance(0.018) {
                value = json  // some SDKs upload plain JSON
            } else {
                _ = json.withUnsafeBytes { compressor.compress($0, level: config.compressionLevel, appendingTo: &value) }
            }
        case .badEncoding:
            value = badEncodingValue(&u.rng)
        case .badZstd:
            value = badZstdValue(&u.rng)
        case .badJSON:
            value = badJSONValue(&u.rng)
        case .notArray:
            value = notArrayValue(&u.rng)
        case .tooLarge:
            value = bombValue()
        }
        if fault == .none {
            stats.events += elements
            stats.badEvents += badEvents
            stats.fixableEvents += fixable
        } else {
            stats.badRecords += 1
        }
        var received = flushAt + u.rng.range(60, 2500)
        if u.rng.chance(0.02) { received += u.rng.range(1000, 5000) }  // a slow upload, maybe overtaken by the next
        received = Swift.min(received, events[range.lowerBound].time + 24_000 + delay)
        if delay >= 24 * 3_600_000 { stats.tooLateRecords += 1 } else if delay > 0 { stats.offlineRecords += 1 }
        if u.futureClock > 0 { stats.futureClockEvents += range.count }
        let withUA = u.rng.chance(0.1)
        recordHeap.push(PendingRecord(received: received, user: Int32(u.index), seq: u.seq, value: value, withUA: withUA, ua: u.ua))
        u.seq += 1
        if fault == .none && u.rng.chance(0.0185) {
            // The SDK timed out and retried: the same bytes again, a few seconds later.
            let again = received + u.rng.range(1000, 20_000)
            recordHeap.push(PendingRecord(received: again, user: Int32(u.index), seq: u.seq, value: value, withUA: u.rng.chance(0.1), ua: u.ua))
            u.seq += 1
            stats.retriedRecords += 1
            stats.events += elements
            stats.retriedEvents += elements
            stats.badEvents += badEvents
            stats.fixableEvents += fixable
        }
    }

    // MARK: - Event JSON (written by hand, in the SDK's key order)

    private func writeEvent(_ e: SimEvent, _ u: inout UserState, flushAt: Int64) {
        let page = TrafficCatalog.pages[Int(e.page)]
        json.append(static: "{\"_track_id\":")
        json.append(decimal: Int64(e.trackID))
        if e.fault == .badType {
            switch e.variant {
            case 0, 3: json.append(static: ",\"type\":\"trakc\"")
            case 1: break
            default: json.append(static: ",\"type\":1")
            }
        } else {
            json.append(contentsOf: e.kind == .signUp ? StaticBytes.typeSignup : StaticBytes.typeTrack)
        }
        if e.fault == .badEventName {
            switch e.variant {
            case 0: json.append(static: ",\"event\":\"9bad name\"")
            case 1: json.append(static: ",\"event\":\"\"")
            case 2: break
            default:
                json.append(static: ",\"event\":\"")
                json.append(contentsOf: repeatElement(UInt8(ascii: "e"), count: 101))
                json.append(0x22)
            }
        } else {
            json.append(static: ",\"event\":\"")
            json.append(contentsOf: e.kind.eventName)
            json.append(0x22)
        }
        let clientTime = e.time + u.clockOffset + u.futureClock
        if e.fault == .badTime {
            switch e.variant {
            case 0, 3: break
            case 1: json.append(static: ",\"time\":\"yesterday\"")
            default:
                json.append(static: ",\"time\":")
                json.append(decimal: clientTime)
                json.append(static: ".5")
            }
        } else {
            json.append(static: ",\"time\":")
            json.append(decimal: clientTime)
        }
        if e.fault == .badDistinctID {
            switch e.variant {
            case 0: json.append(static: ",\"distinct_id\":12345")
            case 1: json.append(static: ",\"distinct_id\":\"\"")
            case 2: break
            default:
                json.append(static: ",\"distinct_id\":\"")
                json.append(contentsOf: repeatElement(UInt8(ascii: "d"), count: 300))
                json.append(0x22)
            }
        } else {
            json.append(static: ",\"distinct_id\":\"")
            json.append(contentsOf: e.loggedIn ? u.loginID : u.key)
            json.append(0x22)
        }
        if e.kind == .signUp {
            json.append(static: ",\"original_id\":\"")
            json.append(contentsOf: u.key)
            json.append(0x22)
        }
        json.append(static: ",\"anonymous_id\":\"")
        json.append(contentsOf: u.key)
        json.append(0x22)
        json.append(contentsOf: u.libFragment)
        if e.fault == .badProperties {
            switch e.variant {
            case 0, 3: json.append(static: ",\"properties\":[\"not\",\"an\",\"object\"]")
            case 1: json.append(static: ",\"properties\":\"props\"")
            default: json.append(static: ",\"properties\":42")
            }
        } else {
            json.append(static: ",\"properties\":{")
            json.append(contentsOf: u.propsFragment)
            json.append(contentsOf: TrafficCatalog.networks[Int(e.network)])
            json.append(static: "\",\"$wifi\":")
            if e.network == 0 { json.append(static: "true") } else { json.append(static: "false") }
            json.append(contentsOf: u.libVersionFragment)
            writeSpecific(e, page, &u)
            writeFix(e.fix)
            json.append(0x7D)
        }
        if e.loggedIn {
            json.append(static: ",\"login_id\":\"")
            json.append(contentsOf: u.loginID)
            json.append(0x22)
        }
        // An SDK of a device with a clock far ahead sends no `_flush_time` (nobody can correct its times).
        if u.futureClock == 0 {
            json.append(static: ",\"_flush_time\":")
            json.append(decimal: flushAt + u.clockOffset)
        }
        json.append(0x7D)
    }

    private func writeSpecific(_ e: SimEvent, _ page: PageSpec, _ u: inout UserState) {
        switch e.kind {
        case .appStart:
            json.append(static: ",\"$is_first_time\":")
            if e.value != 0 { json.append(static: "true") } else { json.append(static: "false") }
            json.append(static: ",\"$resume_from_background\":false")
        case .viewScreen:
            json.append(static: ",\"$screen_name\":\"")
            json.append(contentsOf: page.screen)
            json.append(static: "\",\"$title\":\"")
            json.append(contentsOf: page.title)
            json.append(static: "\",\"$page_path\":\"")
            json.append(contentsOf: page.pagePath)
            json.append(0x22)
        case .navScreen:
            json.append(static: ",\"$screen_name\":\"UINavigationController\",\"$title\":\"\"")
        case .pageLeave:
            json.append(static: ",\"$screen_name\":\"")
            json.append(contentsOf: page.screen)
            json.append(static: "\",\"$page_path\":\"")
            json.append(contentsOf: page.pagePath)
            json.append(static: "\",\"event_duration\":")
            appendSeconds(e.value)
        case .enterView, .leaveView:
            json.append(static: ",\"current_url\":\"")
            json.append(contentsOf: page.screen)
            json.append(0x22)
        case .click:
            json.append(static: ",\"$screen_name\":\"")
            json.append(contentsOf: page.screen)
            json.append(0x22)
            let el = page.elements[Int(e.element)]
            switch el.kind {
            case .table: writeTableCell(e, page)
            case .collection: writeCollectionCell(e, page)
            default: json.append(contentsOf: el.fragment)
            }
        case .alertClick:
            json.append(static: ",\"$screen_name\":\"")
            json.append(contentsOf: page.screen)
            json.append(0x22)
            json.append(contentsOf: TrafficCatalog.alertButtons[Int(e.element) & 1])
        case .crash:
            let name = String(decoding: page.screen, as: UTF8.self)
            let reason = u.android
                ? TrafficCatalog.androidCrashReason(&u.rng, page: name)
                : TrafficCatalog.iosCrashReason(&u.rng, page: name)
            json.append(static: ",\"app_crashed_reason\":")
            JSONText.appendQuoted(reason, to: &json)
            json.append(static: ",\"$screen_name\":\"")
            json.append(contentsOf: page.screen)
            json.append(0x22)
        case .appEnd:
            json.append(static: ",\"event_duration\":")
            appendSeconds(e.value)
        case .signUp:
            break
        }
    }

    private func writeTableCell(_ e: SimEvent, _ page: PageSpec) {
        let s = Int(e.section), r = Int(e.row)
        let title = TrafficCatalog.cellTitleBytes[(r + 7 * s) % 10]
        json.append(static: ",\"$element_path\":\"")
        json.append(contentsOf: StaticBytes.tablePath)
        json.append(static: "\",\"$element_type\":\"UITableViewCell\",\"$element_position\":\"")
        json.append(decimal: s)
        json.append(0x2D)
        json.append(decimal: r)
        json.append(static: "\",\"$element_content\":{\"UIView-UILabel(0)\":\"")
        json.append(contentsOf: title)
        json.append(static: "\",\"UIView-UIImageView(1)\":\"main: icon_")
        json.append(decimal: r)
        json.append(static: "\"},\"$element_kind\":\"table\",\"$element_target\":\"")
        json.append(contentsOf: page.tableTarget)
        json.append(static: "\",\"$element_container\":\"UITableView\",\"$element_tag\":0,\"item_name\":\"")
        json.append(contentsOf: title)
        json.append(static: "\",\"item_sku\":\"sku-")
        json.append(decimal: s)
        json.append(0x2D)
        json.append(decimal: r)
        json.append(static: "\",\"price\":")
        json.append(decimal: 10 + r)
    }

    private func writeCollectionCell(_ e: SimEvent, _ page: PageSpec) {
        let r = Int(e.row) % TrafficCatalog.hotWords.count
        json.append(static: ",\"$element_path\":\"")
        json.append(contentsOf: StaticBytes.collectionPath)
        json.append(static: "\",\"$element_type\":\"UICollectionViewCell\",\"$element_position\":\"0-")
        json.append(decimal: r)
        json.append(static: "\",\"$element_content\":")
        JSONText.appendQuoted(TrafficCatalog.hotWords[r], to: &json)
        json.append(static: ",\"$element_kind\":\"collection\",\"$element_target\":\"")
        json.append(contentsOf: page.tableTarget)
        json.append(static: "\",\"$element_container\":\"UICollectionView\",\"$element_tag\":0")
    }

    private func writeFix(_ fix: UInt8) {
        switch fix {
        case 0: break
        case 1: json.append(static: ",\"coupon\":null")
        case 2: json.append(static: ",\"bad-name\":true")
        case 3: json.append(static: ",\"1bad_name\":\"x\"")
        case 4: json.append(static: ",\"tags\":[\"a\",1,\"b\",null]")
        case 5: json.append(static: ",\"nested_obj\":{\"a\":1}")
        default:
            json.append(static: ",\"long_text\":\"")
            json.append(contentsOf: TrafficCatalog.longText)
            json.append(0x22)
        }
    }

    private func writeProfile(_ u: inout UserState, time: Int64) {
        let v = u.rng.below(10)
        if v < 8 {
            json.append(static: "{\"type\":\"profile_set\"")
        } else if v == 8 {
            json.append(static: "{\"type\":\"profile_set_once\"")
        } else {
            json.append(static: "{\"type\":\"profile_increment\"")
        }
        json.append(static: ",\"time\":")
        json.append(decimal: time + u.clockOffset + u.futureClock)
        json.append(static: ",\"distinct_id\":\"")
        json.append(contentsOf: u.loggedIn ? u.loginID : u.key)
        json.append(static: "\",\"properties\":{")
        if v < 8 {
            json.append(static: "\"gender\":\"")
            json.append(u.index % 2 == 0 ? 0x6D : 0x66)
            json.append(static: "\",\"vip\":")
            if u.rng.chance(0.2) { json.append(static: "true") } else { json.append(static: "false") }
        } else if v == 8 {
            json.append(static: "\"first_channel\":\"appstore\"")
        } else {
            json.append(static: "\"orders\":1")
        }
        json.append(static: "}}")
    }

    /// Milliseconds as seconds with up to three decimals (`212.15`, `0`).
    private func appendSeconds(_ ms: Int64) {
        let ms = Swift.max(ms, 0)
        json.append(decimal: ms / 1000)
        var frac = ms % 1000
        if frac == 0 { return }
        json.append(0x2E)
        var div: Int64 = 100
        while frac != 0 {
            json.append(0x30 &+ UInt8(frac / div))
            frac %= div
            div /= 10
        }
    }

    // MARK: - Bad record values

    private func badEncodingValue(_ rng: inout SeededRandom) -> [UInt8] {
        switch rng.below(3) {
        case 0:
            return Array("GET /sa?data_list=abc HTTP/1.1".utf8)
        case 1:
            var v: [UInt8] = [0x1F, 0x8B, 0x08, 0x00]  // a gzip upload
            for _ in 0..<24 { v.append(UInt8(truncatingIfNeeded: rng.next())) }
            return v
        default:
            var v = Array("data_list=".utf8)
            json.prefix(60).withUnsafeBytes { Base64.encode($0, into: &v) }
            v.append(contentsOf: "&gzip=0".utf8)
            return v
        }
    }

    private func failsToDecompress(_ v: [UInt8]) -> Bool {
        scratch.removeAll(keepingCapacity: true)
        var failed = false
        v.withUnsafeBytes { raw in
            do throws(ZstdError) {
                _ = try checker.decompress(raw, into: &scratch, limit: 16 << 20)
            } catch {
                failed = true
            }
        }
        return failed
    }

    private func badZstdValue(_ rng: inout SeededRandom) -> [UInt8] {
        if rng.chance(0.5) {
            var full: [UInt8] = []
            _ = json.withUnsafeBytes { compressor.compress($0, level: config.compressionLevel, appendingTo: &full) }
            let cut = Array(full.prefix(Swift.max(5, full.count / 2)))  // a truncated frame
            if failsToDecompress(cut) { return cut }
        }
        while true {
            var v: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD]
            for _ in 0..<40 { v.append(UInt8(truncatingIfNeeded: rng.next())) }
            if failsToDecompress(v) { return v }
        }
    }

    private func badJSONValue(_ rng: inout SeededRandom) -> [UInt8] {
        let n = json.count
        var text: [UInt8]
        if rng.chance(0.75) {
            text = Array(json.prefix(n / 4 + rng.below(Swift.max(n / 2, 1))))  // cut mid-upload
        } else {
            text = json
            text.append(contentsOf: ",]".utf8)  // trailing garbage
        }
        if rng.chance(0.2) { return text }  // uncompressed, still starts with '['
        var v: [UInt8] = []
        _ = text.withUnsafeBytes { compressor.compress($0, level: config.compressionLevel, appendingTo: &v) }
        return v
    }

    private func notArrayValue(_ rng: inout SeededRandom) -> [UInt8] {
        var text: [UInt8]
        switch rng.below(3) {
        case 0:
            text = Array("{\"not\":\"an array\"}".utf8)
        case 1:
            text = Array("{\"data_list\":".utf8)
            text.append(contentsOf: json)
            text.append(0x7D)
        default:
            text = Array("\"batch\"".utf8)
        }
        var v: [UInt8] = []
        _ = text.withUnsafeBytes { compressor.compress($0, level: config.compressionLevel, appendingTo: &v) }
        return v
    }

    /// A decompression bomb: a few hundred bytes that decompress to more than 16 MiB of JSON array.
    private func bombValue() -> [UInt8] {
        if let bomb { return bomb }
        var text = [UInt8](repeating: 0x20, count: (17 << 20) + 2)
        text[0] = 0x5B
        text[text.count - 1] = 0x5D
        var v: [UInt8] = []
        _ = text.withUnsafeBytes { compressor.compress($0, level: 1, appendingTo: &v) }
        bomb = v
        return v
    }
}

/// Iterating a generator yields its records: `for record in TrafficGenerator(config) { ... }`.
extension TrafficGenerator: Sequence, IteratorProtocol {}

// MARK: - Simulation state

private enum StaticBytes {
    static let typeTrack: [UInt8] = Array(",\"type\":\"track\"".utf8)
    static let typeSignup: [UInt8] = Array(",\"type\":\"track_signup\"".utf8)
    static let tablePath: [UInt8] = Array(TrafficCatalog.tablePath.utf8)
    static let collectionPath: [UInt8] = Array(TrafficCatalog.collectionPath.utf8)
}

private enum EventKind: UInt8 {
    case appStart, viewScreen, pageLeave, enterView, leaveView, navScreen, click, alertClick, crash, appEnd, signUp

    static let names: [[UInt8]] = [
        "$AppStart", "$AppViewScreen", "$AppPageLeave", "enter_view", "leave_view", "$AppViewScreen",
        "$AppClick", "$AppClick", "$AppCrashed", "$AppEnd", "$SignUp",
    ].map { Array($0.utf8) }

    var eventName: [UInt8] { EventKind.names[Int(rawValue)] }
}

private enum EventFault: UInt8 {
    case none, badType, badEventName, badTime, badDistinctID, badProperties
}

private struct SimEvent {
    var kind: EventKind
    var time: Int64
    var page: UInt8
    var element: UInt8
    var value: Int64
    var section: UInt8 = 0
    var row: UInt8 = 0
    var network: UInt8 = 0
    var trackID: UInt32 = 0
    var loggedIn = false
    var fault: EventFault = .none
    var variant: UInt8 = 0
    var fix: UInt8 = 0

    init(kind: EventKind, time: Int64, page: UInt8, element: UInt8, value: Int64) {
        self.kind = kind
        self.time = time
        self.page = page
        self.element = element
        self.value = value
    }
}

private struct UserSlot: Comparable {
    var start: Int64
    var user: Int32
    static func < (a: UserSlot, b: UserSlot) -> Bool {
        a.start != b.start ? a.start < b.start : a.user < b.user
    }
}

private struct PendingRecord: Comparable {
    var received: Int64
    var user: Int32
    var seq: Int32
    var value: [UInt8]
    var withUA: Bool
    var ua: [UInt8]
    static func < (a: PendingRecord, b: PendingRecord) -> Bool {
        if a.received != b.received { return a.received < b.received }
        if a.user != b.user { return a.user < b.user }
        return a.seq < b.seq
    }
    static func == (a: PendingRecord, b: PendingRecord) -> Bool {
        a.received == b.received && a.user == b.user && a.seq == b.seq
    }
}

private struct UserState {
    var rng: SeededRandom
    let index: Int
    let key: [UInt8]
    let loginID: [UInt8]
    var loggedIn: Bool
    let signsUp: Bool
    let device: DeviceSpec
    let android: Bool
    let osVersion: String
    private(set) var appVersion: Int
    let ip: [UInt8]
    private(set) var ua: [UInt8] = []
    let clockOffset: Int64
    let isNew: Bool
    var sessions = 0
    var nextStart: Int64 = 0
    var done = false
    var seq: Int32 = 0
    /// The stream of the real-world conditions (offline caches, clocks far ahead, logins): apart from `rng`, so
    /// that traffic without them stays byte for byte the same.
    var conditions: SeededRandom
    /// How far ahead this device's clock is (0: not far ahead; then its SDK sends `_flush_time`).
    var futureClock: Int64 = 0
    /// `,"lib":{...}`
    private(set) var libFragment: [UInt8] = []
    /// `"$os":...,"$network_type":"` (the network follows).
    private(set) var propsFragment: [UInt8] = []
    /// `,"$lib_version":"4.5.0"`
    private(set) var libVersionFragment: [UInt8] = []

    init(index: Int, config: TrafficConfig) {
        var rng = SeededRandom(seed: config.seed, stream: UInt64(index))
        conditions = SeededRandom(seed: config.seed ^ 0xC0ED_1710_45EE_D5A1, stream: UInt64(index))
        self.index = index
        var key: [UInt8] = [UInt8(ascii: "a")]
        var digits: [UInt8] = []
        digits.append(decimal: index)
        if digits.count < 7 { key.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: 7 - digits.count)) }
        key.append(contentsOf: digits)
        key.append(UInt8(ascii: "-"))
        let hex = Array("0123456789abcdef".utf8)
        let h = rng.next()
        for k in 0..<8 { key.append(hex[Int((h >> UInt64(28 - 4 * k)) & 15)]) }
        self.key = key
        loginID = Array("user".utf8) + digits
        loggedIn = rng.chance(0.35)
        signsUp = !loggedIn && rng.chance(0.08)
        android = rng.chance(config.androidShare)
        let pool = android ? TrafficCatalog.androidDevices : TrafficCatalog.iosDevices
        device = TrafficCatalog.devices[pool[rng.weighted(pool.map { TrafficCatalog.devices[$0].weight })]]
        osVersion = android
            ? TrafficCatalog.androidVersions[rng.weighted(TrafficCatalog.androidVersionWeights)]
            : TrafficCatalog.iosVersions[rng.weighted(TrafficCatalog.iosVersionWeights)]
        appVersion = rng.weighted(TrafficCatalog.appVersionWeights)
        // The client IP, from the sample's ranges.
        let pattern = TrafficCatalog.ipPatterns[rng.below(TrafficCatalog.ipPatterns.count)]
        var ip: [UInt8] = []
        for c in pattern.utf8 {
            if c == UInt8(ascii: "#") { ip.append(decimal: 1 + rng.below(254)) } else { ip.append(c) }
        }
        self.ip = ip
        // Most clocks are right to a few seconds; some are hours off.
        if rng.chance(0.06) {
            let hours = rng.range(1, 73) * 3_600_000 + rng.range(0, 3_600_000)
            clockOffset = rng.chance(0.5) ? hours : -hours
        } else {
            clockOffset = rng.range(-2500, 2500)
        }
        isNew = rng.chance(0.12)
        self.rng = rng
        setAppVersion(appVersion)
    }

    mutating func setAppVersion(_ v: Int) {
        appVersion = v
        let version = TrafficCatalog.appVersions[v]
        let lib = android ? "Android" : "iOS"
        let libVersion = android ? TrafficCatalog.androidLibVersion : TrafficCatalog.iosLibVersion
        libFragment = Array(",\"lib\":{\"$lib\":\"\(lib)\",\"$lib_version\":\"\(libVersion)\",\"$lib_method\":\"autoTrack\",\"$app_version\":\"\(version)\"}".utf8)
        propsFragment = Array("\"$os\":\"\(android ? "Android" : "iOS")\",\"$os_version\":\"\(osVersion)\",\"$model\":\"\(device.model)\",\"$manufacturer\":\"\(device.manufacturer)\",\"$app_version\":\"\(version)\",\"$screen_width\":\(device.width),\"$screen_height\":\(device.height),\"$network_type\":\"".utf8)
        libVersionFragment = Array(",\"$lib_version\":\"\(libVersion)\"".utf8)
        if android {
            ua = Array("Dalvik/2.1.0 (Linux; U; Android \(osVersion); \(device.model) Build/TP1A.220624.014)".utf8)
        } else {
            ua = Array("ShopApp/\(version) (\(device.tablet ? "iPad" : "iPhone"); iOS \(osVersion); Scale/\(device.tablet ? "2.00" : "3.00"))".utf8)
        }
    }
}
