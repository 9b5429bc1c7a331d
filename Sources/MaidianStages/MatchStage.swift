import class Foundation.FileManager
import class Foundation.Thread
import Logging
import MaidianEvents
import MaidianGeo
import MaidianPipeline
import MaidianRules
import Synchronization

/// Matches page-enter and click events against the rules file (wire format §3 and §4) and adds
/// `$matched_rules` plus the `userDefined` and `pagePara` values of matched action rules to `properties`.
/// Client properties are never overwritten.
///
/// The rules file is reloaded while the worker runs: between batches, at most every `reload_check`, the stage
/// looks at the file's stamp (device, inode, size, times); a changed file is loaded and compiled on a
/// background thread and the new rule set replaces the old one at the start of the next batch after that, so
/// every batch is matched by exactly one rule set. A new file that does not load keeps the old set (an error
/// with file:line:column is logged) and is tried again when it changes.
public final class MatchStage: Stage {
    /// The stage's options.
    public struct Config: Decodable, Sendable, DeclaredSettings {
        @usableFromInline enum Settings {
            static let rules = Setting<String>.required("rules",
                "the rules file, YAML or JSON ([wire format §4](../docs/wire-format.md#4-rules)); relative paths are relative to the pipeline file. `app-analytics.yaml` reads `MAIDIAN_RULES`, else `data/rules-sample.yaml`",
                example: "data/rules-sample.yaml")
            @usableFromInline static let reload = Setting("reload", default: true, "pick up a changed rules file while running", example: "false")
            @usableFromInline static let reloadCheck = Setting("reload_check", default: ConfigDuration.seconds(1),
                "how often, at most, the file is checked for a new version (a duration; `0s`: before every batch)", example: "5s")
            static let healthTopic = Setting<String>.optional("health_topic",
                "the release watchdog's topic ([docs/rules.md](../docs/rules.md)); absent: no watchdog", example: "rules.health", documented: "none")
            static let healthMinEvents = Setting("health_min_events", default: 100,
                "events of a rule's kind on its page, on one app version, before the version is judged. At least 1", example: "500")
            static let healthDropRatio = Setting("health_drop_ratio", default: 0.1,
                "a share of matches below this fraction of the previous version's raises a record. In (0, 1]", example: "0.2")
            static let healthCheck = Setting("health_check", default: ConfigDuration.seconds(60),
                "how often, at most, the watchdog's counts are judged (a duration; `0s`: every batch)", example: "5m")
            static let rulesChangedSince = Setting<String>.optional("rules_changed_since",
                "an older rules file: match only the rules added or changed since it (a backfill; see `replay --rules-changed-since`); relative to the pipeline file",
                example: "rules-old.yaml", documented: "none (every rule)")
        }
        public static let settings = ConfigSpec(
            Settings.rules, Settings.reload, Settings.reloadCheck, Settings.healthTopic, Settings.healthMinEvents,
            Settings.healthDropRatio, Settings.healthCheck, Settings.rulesChangedSince)
        /// The rules file (YAML or JSON), relative to the pipeline file.
        public var rules: String
        /// Whether a changed rules file is picked up while running.
        public var reload = Settings.reload.default
        /// How often, at most, the rules file is checked for a new version (between batches). `0s`: every batch.
        public var reloadCheck = Settings.reloadCheck.default
        /// The release watchdog's topic (`rules.health`, see docs/rules.md); nil: no watchdog.
        public var healthTopic: String?
        /// Events of a rule's kind on its page, on one app version, before the version is judged.
        public var healthMinEvents = Settings.healthMinEvents.default
        /// A share of matches below this fraction of the previous version's raises a record.
        public var healthDropRatio = Settings.healthDropRatio.default
        /// How often, at most, the watchdog's counts are judged (between batches). `0s`: every batch.
        public var healthCheck = Settings.healthCheck.default
        /// An older rules file: match only the rules added or changed since it (a backfill; see `replay
        /// --rules-changed-since`). Relative to the pipeline file.
        public var rulesChangedSince: String?

        /// Options.
        public init(rules: String, reload: Bool = Settings.reload.default, reloadCheck: ConfigDuration = Settings.reloadCheck.default) {
            self.rules = rules
            self.reload = reload
            self.reloadCheck = reloadCheck
        }

        /// Decodes the YAML keys `rules`, `reload`, `reload_check`.
        public init(from decoder: any Decoder) throws {
            let s = try decoder.settings(Self.settings)
            rules = try s(Settings.rules)
            reload = try s(Settings.reload)
            reloadCheck = try s(Settings.reloadCheck)
            healthTopic = try s.optional(Settings.healthTopic)
            healthMinEvents = try s(Settings.healthMinEvents)
            healthDropRatio = try s(Settings.healthDropRatio)
            healthCheck = try s(Settings.healthCheck)
            rulesChangedSince = try s.optional(Settings.rulesChangedSince)
            if healthMinEvents < 1 { throw decoder.fail("'health_min_events' must be at least 1", forKey: Settings.healthMinEvents.codingKey, code: .badValue) }
            if !(healthDropRatio > 0 && healthDropRatio <= 1) {
                throw decoder.fail("'health_drop_ratio' must be in (0, 1]", forKey: Settings.healthDropRatio.codingKey, code: .badValue)
            }
        }
    }

    public static let kind = "match"
    public static let summary = "match page views and clicks against circle-select rules; add $matched_rules and action parameters"

    /// The compiled rules in use; replaced between batches when the rules file changes.
    public private(set) var matcher: RuleMatcher
    /// The rule set's version: 1 for the file loaded at start, one more for each reload.
    public private(set) var version = 1
    let matchedCounter: StageCounter
    /// The pipeline's roles (`StageContext.roles`): which events are page views and clicks to match.
    let roles: EventRoles.Table

    // Reloading (worker thread only, except `mailbox`).
    /// The rules file; nil when the stage was built from a matcher.
    let rulesPath: String?
    /// When the rules file is due for loading; nil: no reloading.
    private var watch: FileWatch?
    /// `rules_changed_since`, resolved.
    let changedSince: String?
    private var logger: Logger
    /// Processing time (`StageContext.clock`): when the watchdog checks next.
    private let clock: ProcessingClock
    /// A background load is under way; its result arrives in `mailbox`.
    private var loading = false
    private let mailbox = RulesMailbox()
    let reloads: StageCounter
    let reloadFailures: StageCounter
    let versionCounter: StageCounter

    // The release watchdog (nil without `health_topic`); counts start again with each rule set.
    private var watchdog: RulesWatchdog?
    private let health: (topic: String, options: RulesWatchdog.Options, every: Duration)?
    private var healthTopicIndex: Int32 = -1
    private var nextHealthCheck: ContinuousClock.Instant
    /// Records written (registered only with a watchdog: the counters of pipelines without one do not change).
    let healthAlerts: StageCounter?

    /// Loads and compiles the rules file.
    public convenience init(config: Config, context: StageContext) throws {
        let path = context.resolvePath(config.rules)
        let stamp = GeoFileStamp(path: path)
        let since = config.rulesChangedSince.map { context.resolvePath($0) }
        let matcher = try RuleMatcher(rules: Self.load(path, changedSince: since))
        let watch = config.reload ? FileWatch(path: path, every: .milliseconds(config.reloadCheck.milliseconds), loaded: stamp) : nil
        let health = config.healthTopic.map {
            ($0, RulesWatchdog.Options(minEvents: config.healthMinEvents, dropRatio: config.healthDropRatio), Duration.milliseconds(config.healthCheck.milliseconds))
        }
        self.init(matcher: matcher, context: context, health: health, file: (path, since, watch))
    }

    /// Builds the stage from already loaded rules (tests); no reloading. `health`: the watchdog's topic, options
    /// and check interval (nil: none).
    public convenience init(matcher: RuleMatcher, context: StageContext, health: (topic: String, options: RulesWatchdog.Options, every: Duration)? = nil) {
        self.init(matcher: matcher, context: context, health: health, file: nil)
    }

    /// The one place that sets the stage up, so both ways in register the same counters. `file`: the rules
    /// file's path, `rules_changed_since` resolved, and its reload watch (nil: rules given in code).
    private init(matcher: RuleMatcher, context: StageContext, health: (topic: String, options: RulesWatchdog.Options, every: Duration)?,
                 file: (path: String, changedSince: String?, watch: FileWatch?)?) {
        self.matcher = matcher
        rulesPath = file?.path
        changedSince = file?.changedSince
        watch = file?.watch
        logger = context.logger
        roles = context.roles.table
        matchedCounter = context.counter("matched")
        reloads = context.counter("rules_reloads")
        reloadFailures = context.counter("rules_reload_failures")
        versionCounter = context.gauge("rules_version")
        versionCounter.add()
        self.health = health
        watchdog = health.map { RulesWatchdog(matcher: matcher, options: $0.options) }
        clock = context.clock
        nextHealthCheck = context.clock.now.advanced(by: health?.every ?? .zero)
        healthAlerts = health.map { _ in context.counter("rules_health_alerts") }
    }

    // Property names read per event, compared by length first.
    private static let names: [[UInt8]] = [
        "$screen_name", "current_url", "$page_path", "$app_version", "$element_path", "$element_type",
        "$element_position", "$element_index", "$element_content", "$element_kind", "$element_target",
        "$element_action", "$element_container", "$element_tag", "$matched_rules",
    ].map { Array($0.utf8) }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        if watch != nil { reloadBetweenBatches() }
        let matcher = self.matcher
        if matcher.isEmpty { return }
        if ignoredFor !== matcher {
            ignoredPageBytes = matcher.ignoredPages.map { Array($0.utf8) }
            ignoredLengths = ignoredPageBytes.reduce(0) { $0 | 1 << UInt64(min($1.count, 63)) }
            ignoredFor = matcher
            work.resize(outputs: matcher.outputs)
            work.cache = MatchCache(matcher: matcher, slots: matcher.matchCacheSlots)
        }
        // The per-event buffers as a local for the batch: no dynamic exclusivity check per access.
        var w = work
        work = Work()
        defer { work = w }
        let outputs = matcher.outputs
        let ignoredPageBytes = self.ignoredPageBytes, ignoredLengths = self.ignoredLengths
        var matched = 0
        for i in 0..<batch.eventCount {
            batch.prefetch(event: i + Self.prefetchDistance)
            let ev = batch.head(i)
            guard ev.isLive, ev.isTrack, ev.eventName.isPresent else { continue }
            // The pipeline's roles: page leaves are looked at only to mark ignored pages for later stages.
            let kind = roles.role(of: ev, in: batch)
            let role: EventRole = kind == .pageEnter ? .pageEnter : kind == .click ? .click : .other
            if role == .other && kind != .pageLeave { continue }
            w.otherCount = Self.findProperties(batch, ev, &w.found, others: &w.others)
            // Later stages (dwell, trails) skip ignored pages without knowing the rules file.
            if Self.pageIgnored(batch, w.found, matcher, ignoredPageBytes, ignoredLengths) {
                batch.setFlag(i, EventFlag.ignoredPage)
                continue
            }
            if role == .other { continue }
            w.hits.removeAll(keepingCapacity: true)
            if Self.needsDecoding(batch, w.found, role) {
                if !Self.slowMatch(batch, ev, role, matcher, &w) { continue }
            } else {
                Self.fastMatch(batch, ev, role, matcher, &w)
            }
            if matcher.hasConditions && !w.hits.isEmpty { Self.checkConditions(batch, ev, matcher, &w) }
            if let watchdog { Self.watch(batch, ev, role, watchdog, w) }
            if w.hits.isEmpty { continue }
            matched += 1
            Self.publishHits(&batch, i, outputs, w)
            if outputs.hasEntries { Self.addParameters(&batch, i, ev, outputs, &w) }
        }
        if matched > 0 { matchedCounter.add(matched) }
        if let watchdog, let health, batch.eventCount > 0, health.every == .zero || clock.now >= nextHealthCheck {
            nextHealthCheck = clock.now.advanced(by: health.every)
            writeAlerts(watchdog.alerts(), topic: health.topic, record: batch.recordIndex(of: batch.eventCount - 1), &output)
        }
    }

    /// How many events ahead of the loop `process` asks for an event's properties and text to be loaded.
    /// Two: an event takes a few hundred nanoseconds, about a memory latency or two (1, 2 and 4 measured alike).
    static let prefetchDistance = 2

    /// Counts one page view or click for the watchdog: its page and app version as raw bytes (escaped or
    /// replaced ones are left out: rare, and a count is an estimate of traffic).
    static func watch(_ batch: borrowing EventBatch, _ ev: EventView, _ role: EventRole, _ watchdog: RulesWatchdog, _ w: borrowing Work) {
        batch.withJSON { j in
            func raw(_ n: Int) -> ByteView {
                let k = w.found[n]
                guard k >= 0 else { return .absent }
                let p = batch.property(k)
                guard p.fix == .keep, !p.valueEscaped else { return .absent }
                switch p.kind {
                case .string: return j[Int(p.value.start) + 1 ..< Int(p.value.end) - 1]
                case .number: return j[p.value]
                default: return .absent
                }
            }
            let screen = raw(0)
            let page = screen.isPresent ? screen : raw(1)
            var version = raw(3)
            if !version.isPresent && ev.lib.isPresent {
                let lib = j[ev.lib]
                if let r = lib.jsonMember(RuleMatcher.appVersionKey), lib[r.lowerBound] == 0x22 { version = lib[(r.lowerBound + 1)..<(r.upperBound - 1)] }
            }
            watchdog.observe(role: role, page: page, version: version, hits: w.hits[...])
        }
    }

    /// Writes the watchdog's new alerts to the `rules.health` topic: key `{rule}|{app_version}`, value the record.
    private func writeAlerts(_ alerts: [RulesWatchdog.Alert], topic: String, record: Int32, _ output: inout OutputBuffer) {
        guard !alerts.isEmpty else { return }
        if healthTopicIndex < 0 { healthTopicIndex = output.topicIndex(topic) }
        for a in alerts {
            let keyStart = output.begin()
            output.bytes.append(contentsOf: a.key.utf8)
            let valueStart = output.bytes.count
            output.bytes.append(contentsOf: a.json.utf8)
            output.finish(topic: healthTopicIndex, record: record, keyStart: keyStart, valueStart: valueStart)
            logger.warning("rule stopped matching on a release", metadata: [
                "rule": "\(a.rule)", "app_version": "\(a.appVersion)", "page": "\(a.page)", "events": "\(a.events)", "matched": "\(a.matched)",
                "previous_version": "\(a.previousVersion)",
            ])
        }
        healthAlerts?.add(alerts.count)
    }

    /// The fields of an event the stage reads first (`EventHead`, read in place).
    package typealias EventView = EventHead

    /// The stage's reused per-event buffers.
    struct Work {
        var hits: [Int] = []
        /// `findProperties`' result (sized by `resize`).
        var found: [Int] = []
        /// The event's properties `findProperties` did not place by `Property.known` (`otherCount` of them; only
        /// the first `others.count` are listed).
        var others: [Int32] = Array(repeating: 0, count: 16)
        var otherCount = 0
        var buffer: [UInt8] = []
        /// Per name of `HitOutputs`: `seen[n] == stamp` when the event has a kept property of that name, the first
        /// being `first[n]`; `added[n] == stamp` when the stage added it. `stamp` changes per event: nothing to clear.
        var seen: [UInt32] = [], first: [Int32] = [], added: [UInt32] = []
        var stamp: UInt32 = 0
        /// Results of the current matcher by facts (replaced with the matcher).
        var cache: MatchCache?
        /// `addParameters`' copies.
        var pieces: [Piece] = []
        /// `where:` conditions' per-event state.
        var conditions = ConditionScratch()

        /// The entries' names that are known properties the stage finds anyway (`findProperties`): (name
        /// number, slot of `found`). `knownNamesFound`: every known entry name is one of them.
        var knownNameSlots: [(name: Int, slot: Int)] = []
        var knownNamesFound = true

        mutating func resize(outputs: HitOutputs) {
            let names = outputs.nameCount
            knownNameSlots = []
            knownNamesFound = true
            for known in 0..<256 where outputs.nameOfKnown[known] >= 0 {
                let slot = Int(MatchStage.nameOfKnown[known])
                if slot >= 0 { knownNameSlots.append((Int(outputs.nameOfKnown[known]), slot)) } else { knownNamesFound = false }
            }
            found = Array(repeating: -1, count: 15)
            seen = Array(repeating: 0, count: names)
            first = Array(repeating: -1, count: names)
            added = Array(repeating: 0, count: names)
            stamp = 0
        }

        /// Starts a new event's stamp.
        mutating func nextStamp() {
            stamp &+= 1
            if stamp == 0 {
                for n in seen.indices { seen[n] = 0; added[n] = 0 }
                stamp = 1
            }
        }
    }
    private var work = Work()

    /// Adds the `userDefined` and `pagePara` values of the event's action hits (wire format §4): the first
    /// entry of a name wins, and names the event already has are left alone.
    static func addParameters(_ batch: inout EventBatch, _ i: Int, _ ev: EventView, _ outputs: HitOutputs, _ w: inout Work) {
        var any = false
        for h in w.hits where outputs.hits[h].hasEntries { any = true; break }
        guard any else { return }
        w.nextStamp()
        // The entries' known names (`$app_version` read by a `pagePara`) come from `findProperties`' pass, and
        // the others (`eventid`, `pageid`, ...) are looked for among the few properties that pass listed as not
        // known: no second pass over every property, unless the list ran out of room or a name is escaped.
        if w.knownNamesFound && w.otherCount <= w.others.count && markKnownNames(batch, &w) {
            if w.otherCount > 0 && outputs.otherNameLengths != 0 { markOtherNames(batch, outputs, &w) }
        } else {
            markNames(batch, ev, outputs, &w)
        }
        let stamp = w.stamp
        // What to copy is decided first (a parameter's value is read before anything is written), then copied as
        // one fragment: the added properties joined by commas, linked once (readers and the output writer take
        // a fragment of several).
        w.pieces.removeAll(keepingCapacity: true)
        for h in w.hits {
            let hit = outputs.hits[h]
            for n in Int(hit.entryStart)..<Int(hit.entryEnd) {
                let e = outputs.entries[n]
                let name = Int(e.name)
                if w.added[name] == stamp || w.seen[name] == stamp { continue }
                let separator = !w.pieces.isEmpty
                if e.source == .constant {
                    if separator { w.pieces.append(Piece(from: .comma, start: 0, end: 0)) }
                    w.pieces.append(Piece(from: .outputs, start: e.fragmentStart, end: e.fragmentEnd))
                } else {
                    guard let value = parameterValue(batch, ev, e, outputs, w) else { continue }
                    if separator { w.pieces.append(Piece(from: .comma, start: 0, end: 0)) }
                    w.pieces.append(Piece(from: .outputs, start: e.fragmentStart, end: e.fragmentEnd))
                    w.pieces.append(Piece(from: value.inScratch ? .scratch : .json, start: value.span.start, end: value.span.end))
                }
                w.added[name] = stamp
            }
        }
        guard !w.pieces.isEmpty else { return }
        let base = batch.scratchEnd
        outputs.bytes.withByteView { ob in
            for p in w.pieces {
                switch p.from {
                case .outputs: batch.appendToScratch(ob[Int(p.start)..<Int(p.end)])
                case .json: batch.appendToScratch(json: Span(start: p.start, end: p.end))
                case .scratch: batch.appendToScratch(scratch: Span(start: p.start, end: p.end))
                case .comma: batch.appendToScratch(0x2C)
                }
            }
        }
        batch.linkAdded(event: i, Span(base, batch.scratchEnd))
    }

    /// A byte range `addParameters` copies into `scratch`.
    struct Piece {
        /// Where the bytes are; `comma`: a separator between two added properties (no range).
        enum Arena: UInt8 { case outputs, json, scratch, comma }
        var from: Arena
        var start: Int32, end: Int32
    }

    /// Marks the entries' known names from `found` (the first kept property placed by `Property.known`); false,
    /// marking nothing, when one of those is an escaped name (`markNames` compares its bytes instead).
    static func markKnownNames(_ batch: borrowing EventBatch, _ w: inout Work) -> Bool {
        for (_, slot) in w.knownNameSlots where w.found[slot] >= 0 && batch.property(w.found[slot]).nameEscaped { return false }
        for (name, slot) in w.knownNameSlots where w.found[slot] >= 0 {
            w.seen[name] = w.stamp
            w.first[name] = Int32(w.found[slot])
        }
        return true
    }

    /// One pass over the event's kept properties: which of the outputs' names it has, and where the first of each is.
    static func markNames(_ batch: borrowing EventBatch, _ ev: EventView, _ outputs: HitOutputs, _ w: inout Work) {
        let lo = Int(ev.firstProperty), hi = lo + Int(ev.propertyCount)
        let longest = outputs.longestName, lengths = outputs.nameLengths, stamp = w.stamp
        let nameOfKnown = outputs.nameOfKnown
        batch.withJSON { j in
            outputs.bytes.withByteView { nb in
                for k in lo..<hi {
                    let p = batch.property(k)
                    guard p.fix != .drop else { continue }
                    // A known property's name is known without reading its bytes (not in cache: most of this loop's cost).
                    if p.known != KnownProperty.none && !p.nameEscaped {
                        let n = Int(nameOfKnown[Int(p.known)])
                        if n >= 0 && w.seen[n] != stamp {
                            w.seen[n] = stamp
                            w.first[n] = Int32(k)
                        }
                        continue
                    }
                    markByBytes(k, p, j, nb, outputs, longest, lengths, &w)
                }
            }
        }
    }

    /// `markNames` over the properties `findProperties` listed as not placed by `Property.known` (its other
    /// names can only be among them: the bytes of a known name are a known property's, and no known name has
    /// a backslash), after `markKnownNames` marked the known ones.
    static func markOtherNames(_ batch: borrowing EventBatch, _ outputs: HitOutputs, _ w: inout Work) {
        let longest = outputs.longestName, lengths = outputs.otherNameLengths
        batch.withJSON { j in
            outputs.bytes.withByteView { nb in
                for o in 0..<w.otherCount {
                    let k = Int(w.others[o])
                    markByBytes(k, batch.property(k), j, nb, outputs, longest, lengths, &w)
                }
            }
        }
    }

    /// Marks the first of the outputs' names that property `k`'s name bytes are (`j`: the JSON arena, `nb`:
    /// the outputs' bytes; `lengths`: bit `min(c, 63)` set when some name looked for is `c` bytes long).
    @inline(__always)
    static func markByBytes(_ k: Int, _ p: Property, _ j: ByteView, _ nb: ByteView, _ outputs: HitOutputs, _ longest: Int, _ lengths: UInt64,
                            _ w: inout Work) {
        let c = p.name.count
        guard (lengths >> UInt64(min(c, 63))) & 1 != 0, c <= longest else { return }
        let name = j[p.name]
        let stamp = w.stamp
        for e in Int(outputs.byLength[c])..<Int(outputs.byLength[c + 1]) {
            let n = Int(outputs.nameOrder[e])
            let start = Int(outputs.nameStarts[n])
            if w.seen[n] != stamp && name.equals(nb[start..<(start + c)]) {
                w.seen[n] = stamp
                w.first[n] = Int32(k)
                return
            }
        }
    }

    private var ignoredPageBytes: [[UInt8]] = []
    /// Bit `n` (63: 63 or more): some ignored page name is `n` bytes long. Most pages are no ignored one's
    /// length and are told apart by it alone.
    private var ignoredLengths: UInt64 = 0
    private var ignoredFor: RuleMatcher?

    /// Whether the event's page (`$screen_name`, else `current_url`) is ignored: a byte comparison against
    /// the few ignored names.
    static func pageIgnored(_ batch: borrowing EventBatch, _ found: [Int], _ matcher: RuleMatcher, _ ignoredPageBytes: [[UInt8]],
                            _ ignoredLengths: UInt64) -> Bool {
        let k = found[0] >= 0 ? found[0] : found[1]
        guard k >= 0 else { return false }
        let p = batch.property(k)
        guard p.kind == .string else { return false }
        if p.fix == .replace || p.valueEscaped { return matcher.isIgnored(page: Self.text(batch, k)) }
        guard (ignoredLengths >> UInt64(min(p.value.count - 2, 63))) & 1 != 0 else { return false }
        return batch.withJSON { j in
            let page = j[Int(p.value.start) + 1 ..< Int(p.value.end) - 1]
            for name in ignoredPageBytes where page.equals(name) { return true }
            return false
        }
    }

    /// Writes `$matched_rules` (unless the client sent one) and records the hits (`appendHit`, `setHitRange`) for later
    /// stages: ids point into the fragment, so they cost nothing extra.
    static func publishHits(_ batch: inout EventBatch, _ i: Int, _ outputs: HitOutputs, _ w: borrowing Work) {
        let firstHit = batch.matchHitCount
        let start = batch.scratchEnd
        outputs.bytes.withByteView { ob in
            Self.matchedRulesHead.withByteView {
                batch.appendJoinedToScratch(head: $0, pieces: ob, list: w.hits, separator: 0x2C, tail: 0x5D) { h in
                    Int(outputs.hits[h].idStart)..<Int(outputs.hits[h].idEnd)
                }
            }
        }
        var idStart = start + Self.matchedRulesHead.count
        for h in w.hits {
            let record = outputs.hits[h]
            let idEnd = idStart + Int(record.idEnd - record.idStart)
            var hit = MatchHit(id: Span(idStart, idEnd), metric: record.metric)
            if record.groupStart >= 0 { (hit.content, hit.contentInScratch) = groupingContent(batch, outputs, record, w.found[8]) }
            batch.appendHit(hit)
            idStart = idEnd + 1
        }
        if w.found[14] < 0 { batch.linkAdded(event: i, Span(start, batch.scratchEnd)) }
        batch.setHitRange(i, firstHit..<(firstHit + w.hits.count))
    }

    private static let matchedRulesHead = Array("\"$matched_rules\":[".utf8)

    /// The content a `group_by_content` hit (`record`) counts under: the string content (key "") or the item `key`
    /// of a composite content, as a JSON string span; `k` is the event's `$element_content` property. The batch
    /// is borrowed, never captured from the caller's `inout` (a closure doing that copied the batch, retaining
    /// every arena, per hit).
    static func groupingContent(_ batch: borrowing EventBatch, _ outputs: HitOutputs, _ record: HitOutputs.Hit, _ k: Int) -> (Span, Bool) {
        guard k >= 0 else { return (.absent, false) }
        let p = batch.property(k)
        let keyStart = Int(record.groupStart), keyEnd = Int(record.groupEnd)
        if keyStart == keyEnd {
            guard p.kind == .string else { return (.absent, false) }
            return p.fix == .replace ? (p.replacement, true) : (p.value, false)
        }
        guard p.kind == .object, p.fix == .keep else { return (.absent, false) }
        return batch.withJSON { j in
            outputs.bytes.withByteView { ob in
                let lo = Int(p.value.start)
                let b = j[p.value]
                guard let r = b.jsonMember(ob[keyStart..<keyEnd]), b[r.lowerBound] == 0x22 else { return (.absent, false) }
                return (Span(lo + r.lowerBound, lo + r.upperBound), false)
            }
        }
    }

    /// The matcher over decoded Strings (escaped or replaced values); false when the page is ignored.
    static func slowMatch(_ batch: borrowing EventBatch, _ ev: EventView, _ role: EventRole, _ matcher: RuleMatcher, _ w: inout Work) -> Bool {
        let f = facts(batch, ev, role, w.found)
        if matcher.isIgnored(page: f.page) { return false }
        // Conditions read the batch's properties: `checkConditions`, as for the fast path.
        matcher.match(role: role, facts: f, into: &w.hits, conditions: false)
        return true
    }

    /// Drops the hits whose `where:` conditions do not hold (read from the event's kept properties).
    static func checkConditions(_ batch: borrowing EventBatch, _ ev: EventView, _ matcher: RuleMatcher, _ w: inout Work) {
        matcher.applyConditions(&w.hits, from: 0, batch: batch, event: ev, scratch: &w.conditions)
    }

    /// What the matcher reads of an event, decoded to Strings; `found` comes from `findProperties`.
    package static func facts(_ batch: borrowing EventBatch, _ ev: EventView, _ role: EventRole, _ found: [Int]) -> EventFacts {
        var f = EventFacts()
        f.screenName = text(batch, found[0])
        f.currentURL = text(batch, found[1])
        f.pagePath = text(batch, found[2])
        f.appVersion = text(batch, found[3]) ?? libAppVersion(batch, ev.lib)
        if role == .click {
            f.elementPath = text(batch, found[4])
            f.elementType = text(batch, found[5])
            f.elementPosition = text(batch, found[6])
            f.elementIndex = text(batch, found[7])
            if found[8] >= 0 {
                let p = batch.property(found[8])
                if p.kind == .string { f.content = text(batch, found[8]) } else if p.kind == .object && p.fix == .keep {
                    f.contentItems = objectItems(batch, p.value)
                }
            }
            f.elementKind = text(batch, found[9])
            f.target = text(batch, found[10])
            f.action = text(batch, found[11])
            f.container = text(batch, found[12])
            f.tag = text(batch, found[13])
        }
        return f
    }

    /// The matcher over raw bytes (no string has escapes or replacements).
    static func fastMatch(_ batch: borrowing EventBatch, _ ev: EventView, _ role: EventRole, _ matcher: RuleMatcher, _ w: inout Work) {
        let found = w.found
        batch.withJSON { j in
            func raw(_ n: Int) -> ByteView {
                let k = found[n]
                guard k >= 0 else { return .absent }
                let p = batch.property(k)
                switch p.kind {
                case .string: return j[Int(p.value.start) + 1 ..< Int(p.value.end) - 1]
                case .number, .bool: return j[p.value]
                default: return .absent
                }
            }
            var f = RawFacts()
            f.screenName = raw(0)
            f.currentURL = raw(1)
            f.pagePath = raw(2)
            f.appVersion = raw(3)
            if ev.lib.isPresent { f.lib = j[ev.lib] }
            if role == .click {
                f.elementPath = raw(4)
                f.elementType = raw(5)
                f.elementPosition = raw(6)
                f.elementIndex = raw(7)
                if found[8] >= 0 {
                    let p = batch.property(found[8])
                    if p.kind == .string { f.content = raw(8) } else if p.kind == .object && p.fix == .keep {
                        f.contentObject = j[p.value]
                    }
                }
                f.elementKind = raw(9)
                f.target = raw(10)
                f.action = raw(11)
                f.container = raw(12)
                f.tag = raw(13)
            }
            if let cache = w.cache, cache.matcher === matcher {
                cache.match(role: role, facts: f, into: &w.hits, buffer: &w.buffer)
            } else {
                matcher.matchRaw(role: role, facts: f, into: &w.hits, buffer: &w.buffer)
            }
        }
    }

    /// Whether a string property the matcher reads is escaped or replaced (then Strings are decoded).
    static func needsDecoding(_ batch: borrowing EventBatch, _ found: [Int], _ role: EventRole) -> Bool {
        for n in 0..<(role == .click ? 14 : 4) {
            let k = found[n]
            guard k >= 0 else { continue }
            let p = batch.property(k)
            if p.kind == .string && (p.fix == .replace || p.valueEscaped) { return true }
        }
        return false
    }

    /// The default roles (wire format §3), for tools that read a recording without a pipeline.
    private static let defaultRoles = EventRoles().table

    /// The role of an event named by `name` (JSON arena) under the default roles: for tools without a
    /// pipeline (`rules test`); stages use `StageContext.roles`.
    package static func role(_ batch: borrowing EventBatch, _ name: Span) -> EventRole {
        guard name.isPresent else { return .other }
        let kind = batch.withJSON { j in defaultRoles.role(of: j[name], hash: j[name].hash) }
        return kind == .pageEnter ? .pageEnter : kind == .click ? .click : .other
    }

    /// Per `KnownProperty` raw value: its index in `names`, or -1. Every name but `current_url` is a known
    /// property, found by `Property.known` without reading name bytes.
    static let nameOfKnown: [Int8] = (0..<256).map { k in
        guard let known = KnownProperty(rawValue: k) else { return -1 }
        let name = known.name.withUTF8Buffer { Array($0) }
        return Int8(names.firstIndex(of: name) ?? -1)
    }
    private static let currentURL = names.firstIndex(of: Array("current_url".utf8))!

    /// One pass over the event's kept properties: the index of each of `names` (the first kept one of a name).
    package static func findProperties(_ batch: borrowing EventBatch, _ ev: EventView, _ found: inout [Int]) {
        batch.firstProperties(of: ev, slotOfKnown: nameOfKnown, extra: "current_url", extraSlot: currentURL, into: &found)
    }

    /// The same, and the properties not placed by `Property.known` into `others`; returns how many there are
    /// (`EventBatch.firstProperties`).
    static func findProperties(_ batch: borrowing EventBatch, _ ev: EventView, _ found: inout [Int], others: inout [Int32]) -> Int {
        batch.firstProperties(of: ev, slotOfKnown: nameOfKnown, extra: "current_url", extraSlot: currentURL, into: &found, others: &others)
    }

    /// The value bytes of a kept property (its replacement when fixed).
    static func valueBytes(_ batch: borrowing EventBatch, _ k: Int) -> [UInt8] {
        let p = batch.property(k)
        return p.fix == .replace ? batch.withScratch { $0[p.replacement].array } : batch.withJSON { $0[p.value].array }
    }

    /// A string property's text, or a number's/bool's text as written; nil otherwise.
    static func text(_ batch: borrowing EventBatch, _ k: Int) -> String? {
        guard k >= 0 else { return nil }
        let p = batch.property(k)
        switch p.kind {
        case .string:
            if p.fix == .replace || p.valueEscaped {
                return valueBytes(batch, k).withByteView { $0.jsonString }
            }
            return batch.withJSON { $0[Span(start: p.value.start + 1, end: p.value.end - 1)].string }
        case .number, .bool:
            return batch.withJSON { $0[p.value].string }
        default:
            return nil
        }
    }

    static func objectItems(_ batch: borrowing EventBatch, _ value: Span) -> [(String, String)] {
        batch.withJSON { j in
            let b = j[value]
            var items: [(String, String)] = []
            b.forEachJSONMember { key, escaped, value in
                if let text = b[value].jsonString { items.append((String(decoding: escaped ? key.unescaped : key.array, as: UTF8.self), text)) }
                return true
            }
            return items
        }
    }

    /// `$app_version` inside the event's `lib` object.
    static func libAppVersion(_ batch: borrowing EventBatch, _ lib: Span) -> String? {
        guard lib.isPresent, lib.count > 2 else { return nil }
        return batch.withJSON { j in
            let b = j[lib]
            return b.jsonMember(RuleMatcher.appVersionKey).flatMap { b[$0].jsonString }
        }
    }

    /// The JSON value a `pagePara` entry reads from the event (wire format §4): a span of `json`, or of
    /// `scratch` for a replaced value; nil when the event has none. `markNames` has run for the event.
    static func parameterValue(_ batch: borrowing EventBatch, _ ev: EventView, _ e: HitOutputs.Entry, _ outputs: HitOutputs,
                               _ w: borrowing Work) -> (span: Span, inScratch: Bool)? {
        func property(_ n: Int32) -> Int? { n >= 0 && w.seen[Int(n)] == w.stamp ? Int(w.first[Int(n)]) : nil }
        return outputs.bytes.withByteView { ob in
            let key = ob[Int(e.keyStart)..<Int(e.keyEnd)]
            switch e.source {
            case .constant, .none:
                return nil
            case .path:
                guard let k = property(e.property) else { return nil }
                return inObject(batch, k, key, depthFirst: false).map { ($0, false) }
            case .content:
                let k = w.found[8]
                return k >= 0 ? inObject(batch, k, key, depthFirst: true).map { ($0, false) } : nil
            case .property:
                if let k = property(e.property) {
                    let p = batch.property(k)
                    return p.fix == .replace ? (p.replacement, true) : (p.value, false)
                }
                let lo = Int(ev.firstProperty), hi = lo + Int(ev.propertyCount)
                for k in lo..<hi where batch.property(k).kind == .object && batch.property(k).fix == .keep {
                    if let v = inObject(batch, k, key, depthFirst: true) { return (v, false) }
                }
                return nil
            }
        }
    }

    /// Member `key` of kept object property `k` (or, depth-first, of the objects inside it), as a span of `json`.
    static func inObject(_ batch: borrowing EventBatch, _ k: Int, _ key: ByteView, depthFirst: Bool) -> Span? {
        let p = batch.property(k)
        guard p.kind == .object, p.fix == .keep else { return nil }
        return batch.withJSON { j in
            let lo = Int(p.value.start)
            let b = j[p.value]
            let r = depthFirst ? b.jsonMemberDepthFirst(key) : b.jsonMember(key)
            return r.map { Span(lo + $0.lowerBound, lo + $0.upperBound) }
        }
    }
}

// MARK: - reloading the rules file

extension MatchStage {
    /// The rules file at `path`; with `changedSince`, only its rules added or changed since that older file.
    static func load(_ path: String, changedSince: String?) throws -> RulesFile {
        let rules = try RulesFile.load(path: path)
        guard let changedSince else { return rules }
        return rules.changed(since: try RulesFile.load(path: changedSince))
    }

    /// `spec` with its `match` stage matching only the rules added or changed since `oldRules` (a path), and
    /// without reloading or watchdog: the pipeline of a backfill. The stage's rules path is made absolute
    /// (relative to the pipeline file, as before), `oldRules` too (relative to the working directory).
    public static func backfill(_ spec: PipelineSpec, changedSince oldRules: String) throws -> PipelineSpec {
        guard let m = spec.stages.firstIndex(where: { $0.kind == kind }) else {
            throw PipelineError(code: .invalid, message: "pipeline '\(spec.file)' has no '\(kind)' stage", hint: "a backfill recomputes the rules of its match stage")
        }
        let config = try spec.stages[m].node.decode(Config.self, ignoringKeys: ["kind"])
        // The stage resolves relative paths against the pipeline's directory: both are made absolute here.
        let cwd = FileManager.default.currentDirectoryPath
        func absolute(_ p: String) -> String { p.hasPrefix("/") ? p : cwd + "/" + p }
        let file = absolute(spec.file)
        let rules = config.rules.hasPrefix("/") ? config.rules : String(file[..<file.lastIndex(of: "/")!]) + "/" + config.rules
        let oldRules = absolute(oldRules)
        let q = JSONOut.quoted
        let yaml = "kind: \(kind)\nrules: \(q(rules))\nreload: false\nrules_changed_since: \(q(oldRules))\n"
        var out = spec
        out.stages[m].node = try ConfigDocument.parse(yaml: yaml, file: spec.file, environment: [:])
        return out
    }

    /// Between batches: installs a rule set loaded in the background, and looks at the file when it is time.
    private func reloadBetweenBatches() {
        if loading, let delivery = mailbox.take() {
            loading = false
            install(delivery)
        }
        if !loading { checkRulesFile() }
    }

    /// Starts loading the rules file on a background thread when its stamp changed.
    private func checkRulesFile() {
        guard let path = rulesPath, let finding = watch?.check() else { return }
        let stamp: GeoFileStamp
        switch finding {
        case .unchanged: return
        case .gone:
            logger.warning("rules file is gone; keeping the loaded rules", metadata: ["rules": "\(path)", "version": "\(version)"])
            return
        case .changed(let s): stamp = s
        }
        loading = true
        let mailbox = self.mailbox
        let since = changedSince
        // Parsing YAML and compiling regexes takes milliseconds: not on the worker thread.
        let thread = Thread {
            mailbox.put(RulesMailbox.Delivery(stamp: stamp, result: Result { try RuleMatcher(rules: Self.load(path, changedSince: since)) }))
        }
        thread.name = "maidian-rules-load"
        thread.start()
    }

    /// Swaps in a freshly loaded rule set (at a batch boundary), or keeps the old one when the file was invalid.
    private func install(_ delivery: RulesMailbox.Delivery) {
        let path = rulesPath ?? ""
        switch delivery.result {
        case .success(let fresh):
            let diff = RulesDiff(from: matcher.rules, to: fresh.rules)
            matcher = fresh
            if let health { watchdog = RulesWatchdog(matcher: fresh, options: health.options) }
            watch?.loaded(delivery.stamp)
            version += 1
            reloads.add()
            versionCounter.add()
            let r = fresh.rules
            logger.notice("rules reloaded", metadata: [
                "rules": "\(path)", "version": "\(version)",
                "added": "\(diff.added.joined(separator: ","))", "removed": "\(diff.removed.joined(separator: ","))",
                "changed": "\(diff.changed.joined(separator: ","))", "ignore_pages_changed": "\(diff.ignorePagesChanged)",
                "pages": "\(r.pages.count)", "elements": "\(r.elements.count)", "actions": "\(r.actions.count)",
            ])
        case .failure(let error):
            watch?.failed(delivery.stamp)
            reloadFailures.add()
            // PipelineError descriptions are located: file:line:column: message (hint).
            logger.error("new rules file does not load; keeping rules version \(version)", metadata: [
                "rules": "\(path)", "error": "\(error)",
            ])
        }
    }
}

/// Hands a rule set loaded on a background thread to the worker thread.
final class RulesMailbox: Sendable {
    struct Delivery: Sendable {
        var stamp: GeoFileStamp
        var result: Result<RuleMatcher, any Error>
    }
    private let slot = Mutex<Delivery?>(nil)

    func put(_ delivery: Delivery) { slot.withLock { $0 = delivery } }

    func take() -> Delivery? { slot.withLock { d in defer { d = nil }; return d } }
}
