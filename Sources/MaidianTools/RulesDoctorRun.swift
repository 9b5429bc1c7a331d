import Logging
import MaidianEvents
import MaidianPipeline
import MaidianRules
import MaidianStages

/// `maidian rules doctor`: two passes over the same input through a pipeline's stages up to `match` (as
/// ``RulesTestRun``). The first feeds a ``RulesWatchdog`` and finds the rules a release broke; the second
/// collects each broken rule's near misses on its broken version (clicks on its page it did not match) and
/// asks ``RulesDoctor`` for a repaired definition.
public final class RulesDoctorRun {
    /// What the first pass found, then what the second proposes.
    public private(set) var alerts: [RulesWatchdog.Alert] = []
    /// Repairs, in the order of `alerts` (rules without one are left out).
    public private(set) var proposals: [RulesDoctor.Proposal] = []

    let spec: PipelineSpec
    let registry: StageRegistry
    let rules: String
    let logger: Logger
    let watchdog: RulesWatchdog
    private var run: RulesTestRun
    private var pass = 1
    /// JSON-serialized id (as `batch.id(ofHit:)` gives it) → hit number.
    private var hitByID: [[UInt8]: Int] = [:]
    /// Per alert: its rule's hit number and the near misses collected.
    private var nearMisses: [[EventFacts]] = []
    private var alertHits: [Int] = []

    /// Builds the first pass (see ``RulesTestRun/init(spec:registry:rules:options:logger:)`` for errors).
    public init(spec: PipelineSpec, registry: StageRegistry, rules: String, options: RulesWatchdog.Options, logger: Logger) throws {
        self.spec = spec
        self.registry = registry
        self.rules = rules
        self.logger = logger
        run = try RulesTestRun(spec: spec, registry: registry, rules: rules, options: .init(examples: 0), logger: logger)
        let matcher = run.match.matcher
        watchdog = RulesWatchdog(matcher: matcher, options: options)
        let r = matcher.rules
        for h in 0..<(r.pages.count + r.elements.count + r.actions.count) {
            var id: [UInt8] = []
            JSONOut.appendString(matcher.id(of: h), to: &id)
            hitByID[id] = h
        }
    }

    /// Runs one batch of the current pass.
    public func process(_ batch: inout EventBatch) throws {
        try run.process(&batch)
        var hits: [Int] = []
        for i in 0..<batch.eventCount {
            let ev = batch.event(i)
            guard ev.isLive, ev.flags & (EventFlag.late | EventFlag.ignoredPage) == 0 else { continue }
            let (role, facts) = EventFacts.read(batch, event: i)
            guard role != .other else { continue }
            hits.removeAll(keepingCapacity: true)
            for k in batch.hitRange(i) {
                if let h = hitByID[batch.withBytes(of: batch.id(ofHit: k)) { $0.array }] { hits.append(h) }
            }
            if pass == 1 {
                watchdog.observe(role: role, page: facts.page, version: facts.appVersion, hits: hits)
            } else if role == .click {
                for (n, alert) in alerts.enumerated()
                where facts.page == alert.page && facts.appVersion == alert.appVersion && !hits.contains(alertHits[n]) {
                    nearMisses[n].append(facts)
                }
            }
        }
    }

    /// Ends the first pass: the alerts; true when a second pass over the same input is needed.
    public func finishFirstPass() throws -> Bool {
        alerts = watchdog.alerts()
        let matcher = run.match.matcher
        alertHits = alerts.map { a in (0..<(matcher.rules.pages.count + matcher.rules.elements.count + matcher.rules.actions.count)).first { matcher.id(of: $0) == a.rule }! }
        nearMisses = alerts.map { _ in [] }
        guard alerts.contains(where: { $0.kind == "element" }) else { return false }
        // Fresh stages: deduplication state must not remember the first pass.
        run = try RulesTestRun(spec: spec, registry: registry, rules: rules, options: .init(examples: 0), logger: logger)
        pass = 2
        return true
    }

    /// Ends the second pass: the proposals.
    public func finish() {
        let doctor = RulesDoctor()
        proposals = alerts.indices.compactMap { doctor.propose(alerts[$0], matcher: run.match.matcher, nearMisses: nearMisses[$0]) }
    }

    /// The alerts (as `rules.health` records) and the proposals, as text.
    public var text: String {
        if alerts.isEmpty { return "no rule stopped matching on a version with traffic to its page\n" }
        var out = ""
        for a in alerts {
            out += "rules.health \(a.json)\n"
            if let p = proposals.first(where: { $0.rule == a.rule && $0.appVersion == a.appVersion }) {
                out += p.fragment
            } else {
                out += "# no repair found for '\(a.rule)' (only element rules with a path, from near misses of the same type)\n"
            }
            out += "\n"
        }
        return out
    }

    /// `{"alerts": [records], "proposals": [{rule, app_version, old_path, new_path, near_misses, repaired, fragment}]}`.
    public var json: String {
        let q = JSONOut.quoted
        let p = proposals.map {
            "{\"rule\":\(q($0.rule)),\"app_version\":\(q($0.appVersion)),\"old_path\":\(q($0.oldPath)),\"new_path\":\(q($0.newPath)),"
                + "\"near_misses\":\($0.nearMisses),\"repaired\":\($0.repaired),\"fragment\":\(q($0.fragment))}"
        }
        return "{\"alerts\":[" + alerts.map(\.json).joined(separator: ",") + "],\"proposals\":[" + p.joined(separator: ",") + "]}"
    }
}
