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
    /// A further window size: its length and the topic its counts go to (`more_windows`).
    public struct WindowSize: Decodable, Sendable, Equatable, SettingValue {
        enum Settings {
            static let window = Setting<ConfigDuration>.required("window", "window size (more than 0; unlike every other size of the stage)", example: "1h")
            static let countsTopic = Setting<String>.required("counts_topic",
                "its windowed counts (compacted; key `{metric}|{rule}|{window_start}|{dims}` with this size's `window_start`; unlike every other counts topic of the stage)",
                example: "metrics.counts.hourly")
        }
        public static let nestedSettings: ConfigSpec? = ConfigSpec(Settings.window, Settings.countsTopic)
        public static var settingType: String { "mapping" }
        public var settingText: String { "{window: \(window.settingText), counts_topic: \(countsTopic)}" }

        /// The window length.
        public var window: ConfigDuration
        /// The topic of this size's counts.
        public var countsTopic: String

        /// A size for code and tests.
        public init(window: ConfigDuration, countsTopic: String) {
            self.window = window
            self.countsTopic = countsTopic
        }

        /// Decodes and checks one size.
        public init(from decoder: any Decoder) throws {
            let s = try decoder.settings(Self.nestedSettings!)
            window = try s(Settings.window)
            countsTopic = try s(Settings.countsTopic)
            if window.milliseconds <= 0 { throw decoder.fail("'window' must be positive", forKey: Settings.window.codingKey, code: .badValue) }
            if countsTopic.isEmpty { throw decoder.fail("'counts_topic' must not be empty", forKey: Settings.countsTopic.codingKey, code: .badValue) }
        }
    }

    /// The stage's options (pipelines/README.md documents each).
    public struct Config: Decodable, Sendable, DeclaredSettings {
        enum Settings {
            static let window = Setting("window", default: ConfigDuration.seconds(60), "window size (more than 0)", example: "5m")
            static let lateness = Setting("lateness", default: ConfigDuration.seconds(30), "watermark = newest event time − this; older events are late", example: "2m")
            static let allowedLateness = Setting("allowed_lateness", default: ConfigDuration.hours(24),
                "how far behind the watermark a late event still counts, pairs and trails; further: too late (not negative)", example: "6h")
            static let lateFlush = Setting("late_flush", default: ConfigDuration.seconds(10),
                "a window changed by late events is written again at most once per this much time (not negative)", example: "1m")
            static let idleTimeout = Setting("idle_timeout", default: ConfigDuration.seconds(60),
                "wall time without input after which a source partition stops holding windows back (more than 0)", example: "5m")
            static let by = Setting("by", default: ["app_version"],
                "dims: `app_version` (`$app_version`, else `lib.$app_version`) or any property name: the client's own, else one an earlier stage added (presets such as `$province`, `$city`, `$brand`, `$device_type`, `$project`; an action rule's `userDefined` names). Strings, numbers and booleans; an event without the property has no such dim. Not `content`",
                example: "[app_version, $province]")
            static let visitTimeout = Setting("visit_timeout", default: ConfigDuration.minutes(30),
                "an open visit closes `timeout` once the install's own clock, or the watermark after the install's silence of this long, passes its enter time plus this (more than 0)", example: "10m")
            static let trailLength = Setting("trail_length", default: 20, "page enters and clicks per crash trail (not negative)", example: "50")
            static let trailMaxAge = Setting("trail_max_age", default: ConfigDuration.hours(1),
                "trail entries older than this before the crash are left out (bounds the state; more than 0)", example: "30m")
            static let ignorePages = Setting("ignore_pages", default: [String](), "pages ignored besides the defaults and the rules file's", example: "[SplashViewController]")
            static let countsTopic = Setting("counts_topic", default: "metrics.counts",
                "windowed counts (compacted; key `{metric}|{rule}|{window_start}|{dims}`)", example: "app.counts")
            static let moreWindows = Setting("more_windows", default: [WindowSize](),
                "further window sizes, each counted like `window` into a counts topic of its own (`metrics.counts.hourly`); every size is merged across workers, takes late events and is restored after a takeover; dwell records and trails are written once whatever the sizes",
                example: "[{window: 1h, counts_topic: metrics.counts.hourly}, {window: 1d, counts_topic: metrics.counts.daily}]", documented: "`[]` (`window` only)")
            static let dwellTopic = Setting("dwell_topic", default: "metrics.dwell", "one record per closed visit (key `distinct_id`)", example: "app.dwell")
            static let trailsTopic = Setting("trails_topic", default: "crash.trails", "one record per crash (key `distinct_id`)", example: "app.trails")
            static let partialsTopic = Setting<String>.optional("partials_topic",
                "internal: partial aggregates on their way to the merging worker", example: "app.partials", documented: "`<group>.partials`")
        }
        public static let settings = ConfigSpec(
            Settings.window, Settings.lateness, Settings.allowedLateness, Settings.lateFlush, Settings.idleTimeout, Settings.by,
            Settings.visitTimeout, Settings.trailLength, Settings.trailMaxAge, Settings.ignorePages,
            Settings.countsTopic, Settings.moreWindows, Settings.dwellTopic, Settings.trailsTopic, Settings.partialsTopic)
        /// Length of the main tumbling window, counted into `countsTopic`.
        public var window = Settings.window.default
        /// The watermark is the newest event time less this; events older than the watermark are late.
        public var lateness = Settings.lateness.default
        /// How far behind the watermark a late event still counts (wire format §5); further: too late.
        public var allowedLateness = Settings.allowedLateness.default
        /// A window changed by late events is written again at most once per this much time.
        public var lateFlush = Settings.lateFlush.default
        /// Wall time without input after which a source partition stops holding windows back.
        public var idleTimeout = Settings.idleTimeout.default
        /// The dims counts are split by: `app_version` or property names.
        public var by = Settings.by.default
        /// An open visit closes by `timeout` this long after its enter time.
        public var visitTimeout = Settings.visitTimeout.default
        /// Page enters and clicks kept per install for its crash trail (0: none).
        public var trailLength = Settings.trailLength.default
        /// Trail entries older than this before the crash are left out (bounds the state).
        public var trailMaxAge = Settings.trailMaxAge.default
        /// Pages never counted or paired, besides the built-in ones and the rules file's `ignore_pages`.
        public var ignorePages = Settings.ignorePages.default
        /// Topic of the main window's counts (compacted).
        public var countsTopic = Settings.countsTopic.default
        /// Further window sizes, each with its own counts topic.
        public var moreWindows = Settings.moreWindows.default
        /// Topic of one record per closed visit (key `distinct_id`).
        public var dwellTopic = Settings.dwellTopic.default
        /// Topic of one record per crash (key `distinct_id`).
        public var trailsTopic = Settings.trailsTopic.default
        /// The internal topic of partial aggregates; nil: the worker uses `<group>.partials`.
        public var partialsTopic: String?

        /// Every setting at its default.
        public init() {}

        public init(from decoder: any Decoder) throws {
            let s = try decoder.settings(Self.settings)
            func positive(_ setting: Setting<ConfigDuration>) throws -> ConfigDuration {
                let v = try s(setting)
                if v.milliseconds <= 0 { throw PipelineError(code: .badValue, message: "'\(setting.key)' must be positive") }
                return v
            }
            window = try positive(Settings.window)
            lateness = try s(Settings.lateness)
            allowedLateness = try s(Settings.allowedLateness)
            if allowedLateness.milliseconds < 0 { throw PipelineError(code: .badValue, message: "'allowed_lateness' must not be negative") }
            lateFlush = try s(Settings.lateFlush)
            if lateFlush.milliseconds < 0 { throw PipelineError(code: .badValue, message: "'late_flush' must not be negative") }
            idleTimeout = try positive(Settings.idleTimeout)
            by = try s(Settings.by)
            visitTimeout = try positive(Settings.visitTimeout)
            trailLength = try s(Settings.trailLength)
            if trailLength < 0 { throw PipelineError(code: .badValue, message: "'trail_length' must not be negative") }
            trailMaxAge = try positive(Settings.trailMaxAge)
            ignorePages = try s(Settings.ignorePages)
            // The roles are the pipeline's (`roles:` at the top), shared with `match`: a list here could only
            // disagree with what `match` counts, so the old key is refused where it is written.
            if try decoder.container(keyedBy: SettingKey.self).allKeys.contains(where: { $0.stringValue == "roles" }) {
                throw decoder.fail(
                    "'roles' moved to the pipeline level: every stage uses the same roles", forKey: SettingKey("roles"),
                    hint: "write 'roles:' at the top of the pipeline file (beside 'stages:'), with the same keys", code: .badValue)
            }
            countsTopic = try s(Settings.countsTopic)
            moreWindows = try s(Settings.moreWindows)
            try checkSizes(decoder)
            dwellTopic = try s(Settings.dwellTopic)
            trailsTopic = try s(Settings.trailsTopic)
            partialsTopic = try s.optional(Settings.partialsTopic)
            if by.contains("content") { throw PipelineError(code: .badValue, message: "'content' is the dimension of group_by_content rules; it cannot be listed in 'by'") }
        }

        /// Every size (`window` first) with its counts topic.
        public var sizes: [WindowSize] { [WindowSize(window: window, countsTopic: countsTopic)] + moreWindows }

        /// Sizes must differ, and so must their topics (one topic's keys would name two windows): each repeat is
        /// reported at its own element of `more_windows`.
        private func checkSizes(_ decoder: any Decoder) throws {
            let elements = decoder.configNode?[Settings.moreWindows.key]?.elements
            func at(_ i: Int, _ key: String) -> SourceLocation? {
                elements.flatMap { i < $0.count ? ($0[i][key] ?? $0[i]).location : nil } ?? decoder.configLocation(forKey: Settings.moreWindows.codingKey)
            }
            var windows: [Int64: String] = [window.milliseconds: "'window'"]
            var topics: [String: String] = [countsTopic: "'counts_topic'"]
            for (i, size) in moreWindows.enumerated() {
                if let other = windows[size.window.milliseconds] {
                    try decoder.report(PipelineError(
                        code: .badValue, message: "window size \(size.window) is already counted by \(other)", location: at(i, "window"),
                        hint: "each size is counted once; give every entry of 'more_windows' a size of its own"))
                } else {
                    windows[size.window.milliseconds] = "more_windows[\(i)]"
                }
                if let other = topics[size.countsTopic] {
                    try decoder.report(PipelineError(
                        code: .badValue, message: "counts topic '\(size.countsTopic)' is already the topic of \(other)", location: at(i, "counts_topic"),
                        hint: "each size writes its own topic (its keys hold only its window_start), e.g. metrics.counts.hourly"))
                } else {
                    topics[size.countsTopic] = "more_windows[\(i)]"
                }
            }
        }
    }

    public static let kind = "windows"
    public static let summary = "page-view/click counts in event-time windows, dwell time from enter/leave pairs, crash trails"

    let config: Config
    let logger: Logger
    /// Processing time (`StageContext.clock`): idle partitions.
    let clock: ProcessingClock
    /// The stage's constants (see `WindowsSettings`).
    let settings: WindowsSettings

    @exclusivity(unchecked) var partitions: [Int32: PartitionWindows] = [:]
    /// How many times `compactTexts` ran (`windows_text_compactions_total`).
    let textCompactions: StageCounter
    /// How many times `compactCombos` ran (`windows_combo_compactions_total`).
    let comboCompactions: StageCounter
    var held: [Int32] = []
    /// The interned texts, dims, combos and record heads (see `WindowsCatalog`).
    let catalog: WindowsCatalog

    // Output wiring.
    /// `partials_topic` when the pipeline sets it; nil lets the worker derive `<group>.partials`.
    public var partialsTopic: String? { config.partialsTopic }
    let windowMerger: WindowMerger
    /// Writes records, partials and progress (see `WindowsEmitter`).
    let emitter: WindowsEmitter
    /// Marks, counts and pairs events (see `WindowsProcessor`).
    let processor: WindowsProcessor
    /// Merges the window partials of the internal partitions this worker holds.
    public var merger: any PartialMerger { windowMerger }

    public init(config: Config, context: StageContext) throws {
        self.config = config
        self.logger = context.logger
        var names = Interner()
        settings = WindowsSettings(config: config, roles: context.roles, eventNames: &names)
        catalog = WindowsCatalog(
            eventNames: names,
            ignored: (["UINavigationController", "UITabBarController", "UICompatibilityInputViewController"] + config.ignorePages).map { Array($0.utf8) })
        let late = context.counter("late"), tooLate = context.counter("too_late"), orphans = context.counter("orphan_leaves")
        textCompactions = context.counter("text_compactions")
        comboCompactions = context.counter("combo_compactions")
        emitter = WindowsEmitter(catalog: catalog, settings: settings, config: config, context: context)
        clock = context.clock
        processor = WindowsProcessor(catalog: catalog, settings: settings, emitter: emitter, late: late, tooLate: tooLate, orphans: orphans,
                                     clock: context.clock)
        windowMerger = WindowMerger(sizes: config.sizes.enumerated().map { ($0.offset == 0 ? 0 : $0.element.window.milliseconds, $0.element.countsTopic) },
                                    allowedLateness: config.allowedLateness.milliseconds,
                                    lateFlush: .milliseconds(config.lateFlush.milliseconds), clock: context.clock, logger: context.logger)
    }

    /// Names the partials topic (empty: keep the configured one) and sets both partition counts (at least 1).
    public func connect(partialsTopic: String, partialsPartitions: Int32, sourcePartitions: Int32) {
        if !partialsTopic.isEmpty { emitter.partialsName = partialsTopic }
        emitter.partialsPartitions = max(1, partialsPartitions)
        windowMerger.sourcePartitions = max(1, sourcePartitions)
    }

    /// State reaches back the largest window plus the lateness (open windows: a day's window is rebuilt from a
    /// day of input), a visit timeout beyond the last visit sweep (once a minute of watermark, `sweepEvery`),
    /// and the trail age plus the lateness (a crash up to `lateness` behind the newest event time still shows
    /// entries up to the trail age before it).
    public var stateHorizon: Int64 { settings.lateness + max(settings.windows.max()!, WindowsProcessor.sweepEvery + settings.visitTimeout, settings.trailMaxAge) }

    /// Every size's counts topic, then the dwell and trails topics.
    public var outputTopics: [String] { config.sizes.map(\.countsTopic) + [config.dwellTopic, config.trailsTopic] }

    /// Starts the partition afresh; windows the watermark had passed at `maxEventTime` count as closed.
    public func restore(partition: Int32, maxEventTime: Int64?) {
        let st = PartitionWindows(partition: partition, maxTime: maxEventTime, windows: settings.windows, now: clock.now)
        // The previous owner had closed the windows the watermark passed: late events for them are deltas.
        if let maxEventTime {
            st.closedUpTo = saturatingSub(maxEventTime, settings.lateness)
            // The previous owner swept that minute at the record that entered it (`sweepIfDue`): the re-read sweeps
            // at the same records as it did.
            st.lastSweep = alignedStart(st.closedUpTo, every: WindowsProcessor.sweepEvery)
        }
        partitions[partition] = st
    }

    /// Forgets the revoked partitions' windows, visits and trails.
    public func partitionsRevoked(_ revoked: [Int32]) {
        for p in revoked { partitions[p] = nil }
        held.removeAll { revoked.contains($0) }
    }

    func state(_ p: Int32) -> PartitionWindows {
        if let s = partitions[p] { return s }
        let s = PartitionWindows(partition: p, maxTime: nil, windows: settings.windows, now: clock.now)
        partitions[p] = s
        return s
    }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        emitter.wire(&output)
        processor.process(&batch, output: &output) { state($0) }
        if catalog.textsToCompact { compactTexts() }
        if catalog.combosToCompact { compactCombos() }
    }

    /// Aggregate combos, the contents and dims they name and the visit dims are numbered once and kept, like
    /// page and element texts: `group_by_content` over contents that rarely repeat, or dims values that do
    /// (crafted app versions), made them grow without bound (about 650 bytes per distinct content, 1 GB over
    /// 1.6 million; 300 per distinct dims value). Between batches, once the combos doubled since the last time,
    /// only what aggregates still open, visits and waiting events refer to is kept and renumbered. Outputs are
    /// unchanged: keys and heads are written from texts, and an event's tuple finds its open aggregate by its key
    /// text (`WindowsCatalog.aggregate`) once the tuple memos, which name contents and dims by number, start over.
    func compactCombos() {
        var keep = [Bool](repeating: false, count: catalog.combos.count)
        var visitDims = [Bool](repeating: false, count: catalog.dimsSets.count)
        for st in partitions.values {
            for size in st.sizes {
                for a in size.aggregates where a.combo >= 0 { keep[Int(a.combo)] = true }
                for a in size.lateAggregates { keep[Int(a.combo)] = true }
            }
            st.updateVisitDims { d in if d >= 0 { visitDims[Int(d)] = true } }
        }
        let before = (catalog.combos.count, catalog.contents.count, catalog.dimsIdentities.count)
        let numbers = catalog.compactCombos(keeping: keep, visitDims: visitDims)
        for st in partitions.values {
            for size in st.sizes {
                for i in size.aggregates.indices where size.aggregates[i].combo >= 0 {
                    size.aggregates[i].combo = numbers.combos[Int(size.aggregates[i].combo)]
                }
                for i in size.lateAggregates.indices { size.lateAggregates[i].combo = numbers.combos[Int(size.lateAggregates[i].combo)] }
                // Empty between batches (each batch's late contributions are flushed at its end); renumbered anyway.
                var late: [LateTuple: Int32] = [:]
                for (id, a) in size.lateTable { late[LateTuple(tuple: numbers.renumber(id.tuple), offset: id.offset)] = a }
                size.lateTable = late
                size.forgetTuples()
            }
            st.updateVisitDims { d in if d >= 0 { d = numbers.visitDims[Int(d)] } }
        }
        comboCompactions.add()
        logger.debug("windows: aggregate combos compacted", metadata: [
            "combos": "\(before.0) -> \(catalog.combos.count)", "contents": "\(before.1) -> \(catalog.contents.count)",
            "dims": "\(before.2) -> \(catalog.dimsIdentities.count)"])
    }

    /// Page names and click identifiers are numbered once and kept: with element contents that rarely repeat
    /// (order numbers, names) or page URLs with query strings, or uploads crafted that way, they grew without
    /// bound (about 450 bytes of memory per distinct click identifier). Between batches, once they doubled since
    /// the last time, only those the state still refers to are kept and renumbered. Outputs are unchanged: they
    /// are written from the texts, not their numbers.
    func compactTexts() {
        var pages = [Bool](repeating: false, count: catalog.pagesText.count)
        var elements = [Bool](repeating: false, count: catalog.elementsText.count)
        for st in partitions.values {
            st.updateTextNumbers { n, isElement in
                guard n >= 0 else { return }
                if isElement { elements[Int(n)] = true } else { pages[Int(n)] = true }
            }
        }
        let before = (catalog.pagesText.count, catalog.elementsText.count)
        let (pageNumbers, elementNumbers) = catalog.compactTexts(pages: pages, elements: elements)
        for st in partitions.values {
            st.updateTextNumbers { n, isElement in
                if n >= 0 { n = isElement ? elementNumbers[Int(n)] : pageNumbers[Int(n)] }
            }
        }
        processor.recentPaths.forget()
        textCompactions.add()
        logger.debug("windows: page and element texts compacted", metadata: [
            "pages": "\(before.0) -> \(catalog.pagesText.count)", "elements": "\(before.1) -> \(catalog.elementsText.count)"])
    }

    /// End of a bounded run: every held partition's visits, windows and a final progress.
    public func finish(output: inout OutputBuffer) throws {
        emitter.wire(&output)
        var all = Set(partitions.keys)
        for p in held { all.insert(p) }
        for p in all.sorted() {
            processor.advance(state(p), final: true, record: -1, output: &output)
        }
    }

    /// Called by the worker between batches with the source partitions it holds: partitions without input
    /// for the idle timeout stop holding windows back.
    public func tick(held: [Int32], output: inout OutputBuffer) {
        emitter.wire(&output)
        self.held = held
        let now = clock.now
        let idle = Duration.milliseconds(config.idleTimeout.milliseconds)
        for p in held {
            let st = state(p)
            if !st.idleSent && now - st.lastInput >= idle {
                st.idleSent = true
                emitter.idleCounter.add()
                logger.info("source partition \(p) idle for \(config.idleTimeout): it no longer holds windows back")
                emitter.sendProgress(st, st.maxTime.map { saturatingSub($0, settings.lateness) } ?? .min, idle: true, record: -1, output: &output)
            }
        }
        emitter.flushInternal(output: &output)
    }

    /// Open visits and tracked users over all partitions (state-size reports).
    public var stateSize: (users: Int, openVisits: Int) {
        partitions.values.reduce((0, 0)) { ($0.0 + $1.userCount, $0.1 + $1.openVisits) }
    }
}
