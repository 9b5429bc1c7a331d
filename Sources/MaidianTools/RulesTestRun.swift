import Logging
import MaidianEvents
import MaidianPipeline
import MaidianRules
import MaidianStages

/// `maidian rules test`: runs a pipeline's stages up to and including `match`, with the `match` stage's rules
/// file replaced, over batches of input records, and collects a ``RulesReport`` from the match results the
/// stage leaves in each batch (`batch.hitRange`). Stages after `match` and the outputs do not run; nothing is
/// written. Events the pipeline drops (duplicates, noise) or rejects are not counted, nor events a stage before
/// `match` marked late. (In `app-analytics.yaml` lateness is decided by `windows`, after `match`: late events
/// are counted here, so a rule's matches can exceed the sum of its windowed counts by its late events.)
public final class RulesTestRun {
    /// What to collect.
    public struct Options: Sendable {
        /// Examples kept per rule.
        public var examples: Int
        /// A rule id whose near misses to collect.
        public var nearMissesOf: String?
        /// Most kinds of near miss reported.
        public var nearMissGroups: Int

        /// Options of one run (by default: 3 examples a rule, no near misses, at most 10 kinds of near miss).
        public init(examples: Int = 3, nearMissesOf: String? = nil, nearMissGroups: Int = 10) {
            self.examples = examples
            self.nearMissesOf = nearMissesOf
            self.nearMissGroups = nearMissGroups
        }
    }

    /// Decoding and the stages before `match`.
    public let engine: PipelineEngine
    /// The `match` stage, with the rules under test (never reloaded during the run).
    public let match: MatchStage
    let options: Options
    private var output = OutputBuffer()
    private var report: RulesReport
    /// JSON-serialized id (as `batch.id(ofHit:)` gives it) → rule index.
    private var ruleByID: [[UInt8]: Int] = [:]
    private var nearMissFinder: NearMissFinder?
    private var nearMissCounts: [String: Int] = [:]
    /// Per difference: the first event and how many parts differ.
    private var nearMissExamples: [String: (RulesReport.Example, Int)] = [:]
    private var found = [Int](repeating: -1, count: 15)

    /// Builds the stages of `spec` before its first `match` stage, and that `match` stage with `rules` (a path,
    /// relative to the working directory) in place of its own rules file.
    ///
    /// - Throws: ``PipelineError`` when the pipeline has no `match` stage, a stage does not build, the rules file
    ///   does not load (located), or `options.nearMissesOf` names no rule.
    public init(spec: PipelineSpec, registry: StageRegistry, rules: String, options: Options = Options(), logger: Logger) throws {
        guard let m = spec.stages.firstIndex(where: { $0.kind == MatchStage.kind }) else {
            throw PipelineError(code: .invalid, message: "pipeline '\(spec.file)' has no '\(MatchStage.kind)' stage", hint: "rules are tested through the pipeline's match stage")
        }
        var before = spec
        before.stages = Array(spec.stages[..<m])
        before.outputs = []
        engine = try PipelineEngine(spec: before, registry: registry, logger: logger, clock: .frozen())
        var config = try spec.stages[m].node.decode(MatchStage.Config.self, ignoringKeys: ["kind"])
        config.rules = rules
        config.reload = false
        var stageLogger = logger
        stageLogger[metadataKey: "stage"] = "\(MatchStage.kind)"
        match = try MatchStage(config: config, context: StageContext(logger: stageLogger, baseDirectory: "", position: "\(m)"))
        self.options = options

        let matcher = match.matcher
        let r = matcher.rules
        let n = r.pages.count + r.elements.count + r.actions.count
        var results: [RulesReport.RuleResult] = []
        for h in 0..<n {
            let kind = h < r.pages.count ? "page" : matcher.action(of: h)?.kind.rawValue ?? "element"
            var result = RulesReport.RuleResult(id: matcher.id(of: h), kind: kind, metric: matcher.metric(of: h))
            result.groupsByContent = matcher.groupingKey(of: h) != nil
            results.append(result)
            var id: [UInt8] = []
            JSONOut.appendString(result.id, to: &id)
            ruleByID[id] = h
        }
        report = RulesReport(rules: results)
        if let focus = options.nearMissesOf {
            guard let h = results.firstIndex(where: { $0.id == focus }) else {
                throw PipelineError(code: .badValue, message: "no rule '\(focus)' in \(rules)",
                                    hint: PipelineError.suggestion(for: focus, among: results.map(\.id)))
            }
            let finder = NearMissFinder(matcher: matcher, hit: h)
            nearMissFinder = finder
            report.nearMisses = RulesReport.NearMisses(rule: focus, scope: finder.scope, note: finder.note)
        }
    }

    /// Decodes the batch's records, runs the stages up to `match`, and collects the results.
    public func process(_ batch: inout EventBatch) throws {
        output.reset()
        try engine.process(&batch, output: &output)
        try match.process(&batch, output: &output)
        collect(batch)
    }

    /// The report so far (complete after the last batch).
    public var result: RulesReport {
        var r = report
        r.totals.records = engine.decodeCounts.records
        r.totals.events = engine.decodeCounts.events
        if var nm = r.nearMisses {
            // Closest first (fewest differing parts), then most frequent.
            nm.groups = nearMissCounts.map { diff, count in
                let (example, differences) = nearMissExamples[diff]!
                return RulesReport.NearMiss(diff: diff, count: count, differences: differences, example: example)
            }
            .sorted { ($0.differences, $1.count, $0.diff) < ($1.differences, $0.count, $1.diff) }
            nm.groups = Array(nm.groups.prefix(options.nearMissGroups))
            r.nearMisses = nm
        }
        return r
    }

    private func collect(_ batch: borrowing EventBatch) {
        report.totals.dropped += batch.droppedCount
        report.totals.rejected += batch.failedCount
        for i in 0..<batch.eventCount {
            let ev = batch.event(i)
            guard ev.isLive else { continue }
            report.totals.kept += 1
            guard ev.type.isTrack, ev.eventName.isPresent else { continue }
            if ev.flags & EventFlag.tooLate != 0 {
                report.totals.late += 1
                continue
            }
            let role = MatchStage.role(batch, ev.eventName)
            if role == .pageEnter { report.totals.pageViews += 1 } else if role == .click { report.totals.clicks += 1 }
            var matchedFocus = false
            if ev.hitCount > 0 { report.totals.matchedEvents += 1 }
            for h in batch.hitRange(i) {
                guard let r = ruleByID[batch.withBytes(of: batch.id(ofHit: h)) { $0.array }] else { continue }
                report.rules[r].matches += 1
                if r == nearMissFinder?.hit { matchedFocus = true }
                var content: String?
                let hitContent = batch.content(ofHit: h)
                if hitContent.isPresent {
                    content = batch.withBytes(of: hitContent) { $0.jsonString }
                    if let content { report.rules[r].contents[content, default: 0] += 1 }
                }
                if report.rules[r].examples.count < options.examples {
                    var e = example(batch, ev, role)
                    e.content = content
                    report.rules[r].examples.append(e)
                }
            }
            if let finder = nearMissFinder, !matchedFocus, role == finder.role {
                Self.resetFound(&found)
                MatchStage.findProperties(batch, MatchStage.EventView(ev), &found)
                let facts = MatchStage.facts(batch, MatchStage.EventView(ev), role, found)
                if let (diff, differences) = finder.difference(facts) {
                    report.nearMisses?.total += 1
                    nearMissCounts[diff, default: 0] += 1
                    if nearMissExamples[diff] == nil {
                        nearMissExamples[diff] = (example(batch, ev, role, facts: facts), differences)
                    }
                }
            }
        }
    }

    private static func resetFound(_ found: inout [Int]) {
        for k in found.indices { found[k] = -1 }
    }

    private func example(_ batch: borrowing EventBatch, _ ev: Event, _ role: EventRole, facts: EventFacts? = nil) -> RulesReport.Example {
        let f: EventFacts
        if let facts { f = facts } else {
            Self.resetFound(&found)
            MatchStage.findProperties(batch, MatchStage.EventView(ev), &found)
            f = MatchStage.facts(batch, MatchStage.EventView(ev), role, found)
        }
        // distinct_id and event are raw string contents: widen to the quotes to decode escapes.
        func string(_ s: Span) -> String {
            batch.withJSON { $0[Int(s.start - 1)..<Int(s.end + 1)].jsonString } ?? ""
        }
        return RulesReport.Example(
            trackID: ev.hasTrackID ? ev.trackID : nil, distinctID: string(ev.distinctID), time: ev.time, event: string(ev.eventName),
            page: f.page, element: role == .click ? f.elementIdentifier : nil, content: nil)
    }
}

/// Finds and describes the near misses of one rule (see ``RulesReport/NearMisses``).
struct NearMissFinder {
    enum Target {
        case page(PageRule, page: String)
        case element(ElementRule, path: String)
        case action(ActionRule, target: String)
        case none
    }

    let matcher: RuleMatcher
    /// The rule, as a hit index.
    let hit: Int
    let target: Target
    let role: EventRole
    let scope: String
    let note: String?

    init(matcher: RuleMatcher, hit: Int) {
        self.matcher = matcher
        self.hit = hit
        let r = matcher.rules
        if hit < r.pages.count {
            let rule = r.pages[hit]
            // A page_path rule's page is the last controller of its path: `…-ProfileViewController(0)`.
            let page = rule.screen ?? NearMissFinder.lastController(rule.pagePath ?? "")
            target = .page(rule, page: page)
            role = .pageEnter
            scope = "page-enter events on page \(page) that it did not match"
            note = nil
        } else if let action = matcher.action(of: hit) {
            let t = String(action.id.split(separator: "/", omittingEmptySubsequences: false).first ?? "")
            if action.kind == .pagePV {
                target = .none
                role = .other
                scope = "page-enter events on page \(action.id)"
                note = "a PAGEPV entry matches every page-enter event of its page (not ignored): no near misses"
            } else {
                target = .action(action, target: t)
                role = .click
                scope = "clicks with $element_target \(t) that it did not match"
                note = nil
            }
        } else {
            let rule = r.elements[hit - r.pages.count]
            if let path = rule.path, rule.identifierRegex == nil {
                target = .element(rule, path: path)
                role = .click
                scope = "clicks with $element_path \(path) that it did not match; identifiers shown after that path (…)"
                note = nil
            } else {
                target = .none
                role = .other
                scope = "clicks"
                note = "identifier_regex rules have no fixed path to compare with: no near misses"
            }
        }
    }

    /// `UITabBarController-UINavigationController(3)-ProfileViewController(0)` → `ProfileViewController`.
    static func lastController(_ path: String) -> String {
        let last = path.split(separator: "-").last.map(String.init) ?? path
        if let paren = last.firstIndex(of: "(") { return String(last[..<paren]) }
        return last
    }

    /// The marked difference and how many parts differ, when the event is a near miss of the rule; nil when it
    /// is out of scope.
    func difference(_ f: EventFacts) -> (text: String, differences: Int)? {
        var m = Marker()
        var parts: [String] = []
        switch target {
        case .none:
            return nil
        case let .page(rule, page):
            guard f.page == page else { return nil }
            if let want = rule.pagePath, want != f.pagePath { parts.append("page_path " + m.mark(want, f.pagePath)) }
            parts += versionAndIgnored(rule.appVersions, f, &m)
        case let .element(rule, path):
            guard f.elementPath == path else { return nil }
            parts.append(elementDifference(rule, f, &m))
            if let want = rule.screen, want != f.page { parts.append("screen " + m.mark(want, f.page)) }
            if let want = rule.pagePath, want != f.pagePath { parts.append("page_path " + m.mark(want, f.pagePath)) }
            parts += versionAndIgnored(rule.appVersions, f, &m)
        case let .action(rule, target):
            guard f.target == target else { return nil }
            let identifiers = f.actionIdentifiers
            let components = rule.id.split(separator: "/", omittingEmptySubsequences: false).count
            let sameShape = identifiers.filter { $0.1.split(separator: "/", omittingEmptySubsequences: false).count == components }
            let closest = sameShape.first { $0.0 == rule.kind } ?? sameShape.first ?? identifiers.first
            if let (kind, id) = closest {
                parts.append(m.mark(rule.id, id))
                if kind != rule.kind { parts.append("table " + m.mark(rule.kind.rawValue, kind.rawValue)) }
            } else {
                m.differences += 1
                parts.append("no action identifier ($element_kind \(f.elementKind ?? "(none)"))")
            }
            if matcher.isIgnored(page: f.page) {
                m.differences += 1
                parts.append("page ignored: \(f.page ?? "")")
            }
        }
        return (parts.joined(separator: "  "), m.differences)
    }

    /// Marks differences and counts them.
    struct Marker {
        var differences = 0
        mutating func mark(_ want: String, _ got: String?) -> String {
            if want != got { differences += 1 }
            return RulesReport.markDifference(expected: want, actual: got)
        }
    }

    /// `…-{type}({position})_[{content}]` with the rule's values as expected; wildcards take the event's value.
    /// Section and row of a list cell's position are compared separately.
    private func elementDifference(_ rule: ElementRule, _ f: EventFacts, _ m: inout Marker) -> String {
        let type = m.mark(rule.type ?? "", f.elementType)
        let actualPosition = f.elementPosition ?? f.elementIndex ?? ""
        let position: String
        if let index = rule.index {
            position = m.mark(String(index), actualPosition)
        } else if let section = rule.section {
            let parts = actualPosition.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            if parts.count == 2 {
                position = m.mark(String(section), parts[0]) + "-" + m.mark(rule.row.map(String.init) ?? parts[1], parts[1])
            } else {
                position = m.mark("\(section)-\(rule.row.map(String.init) ?? "*")", actualPosition)
            }
        } else {
            position = actualPosition
        }
        let content: String
        if let key = rule.contentKey {
            let got = f.contentItem(key)
            content = "\(key)=" + m.mark(rule.content ?? got ?? "<any>", got)
        } else {
            let got = f.content ?? "null"
            content = m.mark(rule.content ?? (rule.groupByContent && f.content == nil ? "<any>" : got), got)
        }
        return "…-\(type)(\(position))_[\(content)]"
    }

    private func versionAndIgnored(_ conditions: [VersionCondition], _ f: EventFacts, _ m: inout Marker) -> [String] {
        var parts: [String] = []
        if !conditions.isEmpty {
            let v = f.appVersion.flatMap { VersionCondition.parse(Substring($0)) }
            if v == nil || !conditions.allSatisfy({ $0.holds(v!) }) {
                m.differences += 1
                let text = conditions.map { "\($0.op.rawValue)\($0.parts.map(String.init).joined(separator: "."))" }.joined(separator: ",")
                parts.append("app_version \(f.appVersion ?? "(none)") not \(text)")
            }
        }
        if matcher.isIgnored(page: f.page) {
            m.differences += 1
            parts.append("page ignored: \(f.page ?? "")")
        }
        return parts
    }
}
