import Logging
import MaidianEvents
import MaidianPipeline

/// Page-view and click counts in event-time windows, dwell time from enter/leave pairs and crash trails
/// (wire format §5), with watermarks and lateness.
///
/// Per source partition it marks late events (`$late: true`), counts matched events into tumbling windows
/// (rules and dims from the `match` stage's results), pairs page visits in event-time order and keeps each
/// user's trail. A window's partial aggregate goes through an internal topic to the worker that holds its
/// key's internal partition, which merges the partials of every source partition (see `WindowMerger`).
public final class WindowsStage: Stage, Repartitioning {
    /// Event names per role (wire format §3).
    public struct Roles: Decodable, Sendable {
        public var pageEnter = ["$AppViewScreen", "enter_view"]
        public var pageLeave = ["$AppPageLeave", "leave_view"]
        public var click = ["$AppClick"]
        public var appStart = ["$AppStart"]
        public var appEnd = ["$AppEnd"]
        public var crash = ["$AppCrashed"]
        enum CodingKeys: String, CodingKey {
            case pageEnter = "page_enter", pageLeave = "page_leave", click, appStart = "app_start", appEnd = "app_end", crash
        }
        public init() {}
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            let d = Roles()
            pageEnter = try c.decodeIfPresent([String].self, forKey: .pageEnter) ?? d.pageEnter
            pageLeave = try c.decodeIfPresent([String].self, forKey: .pageLeave) ?? d.pageLeave
            click = try c.decodeIfPresent([String].self, forKey: .click) ?? d.click
            appStart = try c.decodeIfPresent([String].self, forKey: .appStart) ?? d.appStart
            appEnd = try c.decodeIfPresent([String].self, forKey: .appEnd) ?? d.appEnd
            crash = try c.decodeIfPresent([String].self, forKey: .crash) ?? d.crash
        }
    }

    /// The stage's options (pipelines/README.md documents each).
    public struct Config: Decodable, Sendable {
        public var window = ConfigDuration(milliseconds: 60_000)
        public var lateness = ConfigDuration(milliseconds: 30_000)
        /// How far behind the watermark a late event still counts (wire format §5); further: too late.
        public var allowedLateness = ConfigDuration(milliseconds: 24 * 3_600_000)
        /// A window changed by late events is written again at most once per this much time.
        public var lateFlush = ConfigDuration(milliseconds: 10_000)
        public var idleTimeout = ConfigDuration(milliseconds: 60_000)
        public var by = ["app_version"]
        public var visitTimeout = ConfigDuration(milliseconds: 30 * 60_000)
        public var trailLength = 20
        public var trailMaxAge = ConfigDuration(milliseconds: 60 * 60_000)
        public var ignorePages: [String] = []
        public var roles = Roles()
        public var countsTopic = "metrics.counts"
        public var dwellTopic = "metrics.dwell"
        public var trailsTopic = "crash.trails"
        public var partialsTopic: String?

        enum CodingKeys: String, CodingKey {
            case window, lateness, allowedLateness = "allowed_lateness", lateFlush = "late_flush", idleTimeout = "idle_timeout", by, visitTimeout = "visit_timeout"
            case trailLength = "trail_length", trailMaxAge = "trail_max_age", ignorePages = "ignore_pages", roles
            case countsTopic = "counts_topic", dwellTopic = "dwell_topic", trailsTopic = "trails_topic", partialsTopic = "partials_topic"
        }

        public init() {}

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            let d = Config()
            func positive(_ key: CodingKeys, _ def: ConfigDuration) throws -> ConfigDuration {
                let v = try c.decodeIfPresent(ConfigDuration.self, forKey: key) ?? def
                if v.milliseconds <= 0 { throw PipelineError(code: .badValue, message: "'\(key.rawValue)' must be positive") }
                return v
            }
            window = try positive(.window, d.window)
            lateness = try c.decodeIfPresent(ConfigDuration.self, forKey: .lateness) ?? d.lateness
            allowedLateness = try c.decodeIfPresent(ConfigDuration.self, forKey: .allowedLateness) ?? d.allowedLateness
            if allowedLateness.milliseconds < 0 { throw PipelineError(code: .badValue, message: "'allowed_lateness' must not be negative") }
            lateFlush = try c.decodeIfPresent(ConfigDuration.self, forKey: .lateFlush) ?? d.lateFlush
            if lateFlush.milliseconds < 0 { throw PipelineError(code: .badValue, message: "'late_flush' must not be negative") }
            idleTimeout = try positive(.idleTimeout, d.idleTimeout)
            by = try c.decodeIfPresent([String].self, forKey: .by) ?? d.by
            visitTimeout = try positive(.visitTimeout, d.visitTimeout)
            trailLength = try c.decodeIfPresent(Int.self, forKey: .trailLength) ?? d.trailLength
            if trailLength < 0 { throw PipelineError(code: .badValue, message: "'trail_length' must not be negative") }
            trailMaxAge = try positive(.trailMaxAge, d.trailMaxAge)
            ignorePages = try c.decodeIfPresent([String].self, forKey: .ignorePages) ?? []
            roles = try c.decodeIfPresent(Roles.self, forKey: .roles) ?? d.roles
            countsTopic = try c.decodeIfPresent(String.self, forKey: .countsTopic) ?? d.countsTopic
            dwellTopic = try c.decodeIfPresent(String.self, forKey: .dwellTopic) ?? d.dwellTopic
            trailsTopic = try c.decodeIfPresent(String.self, forKey: .trailsTopic) ?? d.trailsTopic
            partialsTopic = try c.decodeIfPresent(String.self, forKey: .partialsTopic)
            if by.contains("content") { throw PipelineError(code: .badValue, message: "'content' is the dimension of group_by_content rules; it cannot be listed in 'by'") }
        }
    }

    public static let kind = "windows"
    public static let summary = "page-view/click counts in event-time windows, dwell time from enter/leave pairs, crash trails"

    let config: Config
    let logger: Logger
    let window: Int64
    let lateness: Int64
    let allowedLateness: Int64
    let visitTimeout: Int64
    let trailMaxAge: Int64
    let trailLength: Int
    /// Dims names in output order (sorted), with the slot where `content=` goes.
    let dimNames: [[UInt8]]
    let contentSlot: Int
    /// Index in `dimNames` of `app_version` (read from `lib` when properties lack it), or -1.
    let appVersionSlot: Int
    let finder: PropertyFinder
    let ignored: [[UInt8]]

    @exclusivity(unchecked) var partitions: [Int32: PartitionWindows] = [:]
    var held: [Int32] = []
    @exclusivity(unchecked) var pagesText = Interner()
    @exclusivity(unchecked) var elementsText = Interner()
    @exclusivity(unchecked) var eventNames = Interner()
    @exclusivity(unchecked) var ruleSets = Interner()
    /// Per `ruleSets` number: the `ruleTexts` numbers of its rules.
    @exclusivity(unchecked) var ruleSetRules: [[Int32]] = []
    /// Decoded rule ids and `group_by_content` contents, numbered for aggregate tuples.
    @exclusivity(unchecked) var ruleTexts = Interner()
    @exclusivity(unchecked) var contents = Interner()
    /// Visit dims: `k=v,...` keys, and the JSON first seen for each.
    @exclusivity(unchecked) var dimsSets = Interner()
    @exclusivity(unchecked) var dimsHeads: [[UInt8]] = []
    /// Dims identities (see `dimsIdentity`) and their forms.
    @exclusivity(unchecked) var dimsIdentities = Interner()
    @exclusivity(unchecked) var dimsInfos: [DimsInfo] = []
    /// Aggregate combos (tuples without their window), by hash, with their key and head pieces.
    @exclusivity(unchecked) var comboTable = HashTable64(capacity: 256)
    @exclusivity(unchecked) var combos: [ComboPieces] = []
    @exclusivity(unchecked) var comboBytes: [UInt8] = []
    /// Visit record heads by (page, rule set): see `visitHead`.
    @exclusivity(unchecked) var visitHeads = HashTable64(capacity: 64)
    @exclusivity(unchecked) var visitHeadBytes: [UInt8] = []
    @exclusivity(unchecked) var visitHeadSpans: [Range<Int>] = []
    /// Per `pagesText` number: whether the page is ignored (filled on demand).
    @exclusivity(unchecked) var pageIgnored: [Bool] = []
    /// Role names by `Hash64` of their bytes.
    struct RoleEntry {
        var role: Int
        var event: Int32
        var name: UnsafeMutablePointer<UInt8>
        var count: Int
    }
    let roleByHash: HashTable64
    let roleEntries: [RoleEntry]
    let roleHashCollisions: Bool
    /// `PropertyFinder` bits of the `by` properties.
    let dimsWanted: UInt64

    // Output wiring.
    public var partialsTopic: String? { config.partialsTopic }
    var partialsName = ""
    var partialsPartitions: Int32 = 1
    var sourcePartitions: Int32 = 1
    var topicPartials: Int32 = -1
    var topicDwell: Int32 = -1
    var topicTrails: Int32 = -1
    let windowMerger: WindowMerger
    public var merger: any PartialMerger { windowMerger }

    let lateCounter: StageCounter
    let tooLateCounter: StageCounter
    let orphanCounter: StageCounter
    let visitsCounter: StageCounter
    let trailsCounter: StageCounter
    let idleCounter: StageCounter

    // Reused buffers.
    @exclusivity(unchecked) var text: [UInt8] = []
    @exclusivity(unchecked) var keyBuffer: [UInt8] = []
    @exclusivity(unchecked) var identity: [UInt8] = []
    @exclusivity(unchecked) var headBuffer: [UInt8] = []
    @exclusivity(unchecked) var identifier: [UInt8] = []
    @exclusivity(unchecked) var libMemoKey: [UInt8] = []
    @exclusivity(unchecked) var libMemoValue: [UInt8]?
    @exclusivity(unchecked) var lateEvents: [Int32] = []
    @exclusivity(unchecked) var tooLateEvents: [Int32] = []
    /// Hash64 of the current record's key, and whether one of its events was that install's (see `process`).
    @exclusivity(unchecked) var recordKey: UInt64 = 0
    @exclusivity(unchecked) var recordKeyTaken = false

    public init(config: Config, context: StageContext) throws {
        self.config = config
        self.logger = context.logger
        window = config.window.milliseconds
        lateness = config.lateness.milliseconds
        allowedLateness = config.allowedLateness.milliseconds
        visitTimeout = config.visitTimeout.milliseconds
        trailMaxAge = config.trailMaxAge.milliseconds
        trailLength = config.trailLength
        var dims = config.by.sorted()
        contentSlot = dims.firstIndex { $0 > "content" } ?? dims.count
        dims.insert("content", at: contentSlot)
        dimNames = dims.map { Array($0.utf8) }
        appVersionSlot = dims.firstIndex(of: "app_version") ?? -1
        // Property slots: 0 $screen_name, 1 current_url, 2 $app_version, 3 $element_path, 4 $element_type,
        // 5 $element_position, 6 $element_index, 7 $element_content, then the `by` properties.
        let fixed = ["$screen_name", "current_url", "$app_version", "$element_path", "$element_type",
                     "$element_position", "$element_index", "$element_content"]
        // A page is read from current_url only without $screen_name, a position from $element_index only
        // without $element_position.
        finder = PropertyFinder(fixed + config.by.sorted().map { $0 == "app_version" ? "$app_version" : $0 },
                                alternatives: [(0, 1), (5, 6)])
        var dimsBits: UInt64 = 0
        for n in fixed.count..<(fixed.count + config.by.count) where n < 64 { dimsBits |= 1 << UInt64(n) }
        dimsWanted = dimsBits
        let r = config.roles
        let roleNames = [r.pageEnter, r.pageLeave, r.click, r.appStart, r.appEnd, r.crash].map { $0.map { Array($0.utf8) } }
        var names = Interner()
        let roleEventIDs = roleNames.map { $0.map { names.intern($0) } }
        eventNames = names
        var table = HashTable64(capacity: 16)
        var entries: [RoleEntry] = []
        var collisions = false
        for (role, list) in roleNames.enumerated() {
            for (i, name) in list.enumerated() {
                var h = Hash64()
                name.withUnsafeBufferPointer { if let b = $0.baseAddress { h.add(b, $0.count) } }
                // The first role listing a name wins (as a scan in role order would find).
                if entries.contains(where: { e in e.count == name.count && (0..<name.count).allSatisfy { e.name[$0] == name[$0] } }) { continue }
                let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: max(1, name.count))
                for (k, b) in name.enumerated() { bytes[k] = b }
                // Two names with one hash: the second is found by the scan `role` falls back to.
                if table.get(h.value) == nil { table.set(h.value, Int64(entries.count)) } else { collisions = true }
                entries.append(RoleEntry(role: role, event: roleEventIDs[role][i], name: bytes, count: name.count))
            }
        }
        roleByHash = table
        roleEntries = entries
        roleHashCollisions = collisions
        ignored = (["UINavigationController", "UITabBarController", "UICompatibilityInputViewController"] + config.ignorePages).map { Array($0.utf8) }
        windowMerger = WindowMerger(countsTopic: config.countsTopic, allowedLateness: config.allowedLateness.milliseconds,
                                    lateFlush: .milliseconds(config.lateFlush.milliseconds), logger: context.logger)
        lateCounter = context.counter("late")
        tooLateCounter = context.counter("too_late")
        orphanCounter = context.counter("orphan_leaves")
        visitsCounter = context.counter("visits_closed")
        trailsCounter = context.counter("trails")
        idleCounter = context.counter("idle_partitions")
    }

    deinit {
        for e in roleEntries { e.name.deallocate() }
    }

    public func connect(partialsTopic: String, partialsPartitions: Int32, sourcePartitions: Int32) {
        partialsName = partialsTopic
        self.partialsPartitions = max(1, partialsPartitions)
        self.sourcePartitions = max(1, sourcePartitions)
        windowMerger.sourcePartitions = self.sourcePartitions
    }

    /// State reaches back a visit timeout (open visits), a window plus the lateness (open windows), and the
    /// trail age plus the lateness (a crash up to `lateness` behind the newest event time still shows entries
    /// up to the trail age before it).
    public var stateHorizon: Int64 { lateness + max(window + visitTimeout, trailMaxAge) }

    public var outputTopics: [String] { [config.countsTopic, config.dwellTopic, config.trailsTopic] }

    public func restore(partition: Int32, maxEventTime: Int64?) {
        let st = PartitionWindows(partition: partition, maxTime: maxEventTime)
        // The previous owner had closed the windows the watermark passed: late events for them are deltas.
        if let maxEventTime { st.closedUpTo = saturatingSub(maxEventTime, lateness) }
        partitions[partition] = st
    }

    public func partitionsRevoked(_ revoked: [Int32]) {
        for p in revoked { partitions[p] = nil }
        held.removeAll { revoked.contains($0) }
    }

    func wire(_ output: inout OutputBuffer) {
        if topicDwell < 0 {
            topicDwell = output.topicIndex(config.dwellTopic)
            topicTrails = output.topicIndex(config.trailsTopic)
            topicPartials = output.topicIndex(partialsName.isEmpty ? (config.partialsTopic ?? "maidian.partials") : partialsName)
        }
    }

    func state(_ p: Int32) -> PartitionWindows {
        if let s = partitions[p] { return s }
        let s = PartitionWindows(partition: p, maxTime: nil)
        partitions[p] = s
        return s
    }
}
