import MaidianEvents
import MaidianPipeline

/// Drops click noise before rules see it: `$AppClick` events that autotrack SDKs record for UIKit's internal
/// target-actions and that no operator means to count.
///
/// The default rule drops the `_buttonDown:` and `_buttonUp:` clicks a tab-bar tap sends beside its
/// `_tabBarItemClicked:` click (a `UITabBarButton` fires all three at its `UITabBar`). "Beside" means: a live
/// `$AppClick` of the same `distinct_id` with a `beside` action, in the same batch, at most `within` apart in
/// event time (before or after), and, with `same_target`, with the same `$element_target`. A `_buttonDown:`
/// with no such click nearby (a touch that was cancelled, or another control) is kept.
///
/// A rule without `beside` drops every click with one of its actions. Dropped events are counted, not
/// dead-lettered: `noise_filter.noise_dropped` in total and `noise_filter.<rule name>` per rule.
public final class NoiseFilterStage: Stage {
    /// One kind of noise.
    public struct Rule: Decodable, Sendable, Equatable {
        /// Names the rule's counter (`[a-z0-9_]`, unique).
        public var name: String
        /// `$element_action` values of the noise clicks.
        public var actions: [String]
        /// Only clicks with one of these `$element_target` values; empty: any target.
        public var targets: [String] = []
        /// `$element_action` values of the click the noise comes beside; empty: the noise is dropped alone.
        public var beside: [String] = []
        /// How far apart in event time the noise and the `beside` click may be.
        public var within: ConfigDuration = .seconds(1)
        /// The `beside` click must have the same `$element_target` as the noise.
        public var sameTarget = true

        enum CodingKeys: String, CodingKey {
            case name, actions, targets, beside, within
            case sameTarget = "same_target"
        }

        /// A rule for code and tests.
        public init(name: String, actions: [String], targets: [String] = [], beside: [String] = [], within: ConfigDuration = .seconds(1), sameTarget: Bool = true) {
            self.name = name
            self.actions = actions
            self.targets = targets
            self.beside = beside
            self.within = within
            self.sameTarget = sameTarget
        }

        /// Decodes and checks a rule.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            name = try c.decode(String.self, forKey: .name)
            actions = try c.decode([String].self, forKey: .actions)
            targets = try c.decodeIfPresent([String].self, forKey: .targets) ?? []
            beside = try c.decodeIfPresent([String].self, forKey: .beside) ?? []
            within = try c.decodeIfPresent(ConfigDuration.self, forKey: .within) ?? .seconds(1)
            sameTarget = try c.decodeIfPresent(Bool.self, forKey: .sameTarget) ?? true
            if name.isEmpty || !name.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }) {
                throw decoder.fail("rule name '\(name)' must be lower-case letters, digits and _", forKey: CodingKeys.name, code: .badValue)
            }
            if actions.isEmpty || actions.contains(where: \.isEmpty) {
                throw decoder.fail("'actions' must list at least one $element_action value", forKey: CodingKeys.actions, code: .badValue)
            }
            if let both = actions.first(where: beside.contains) {
                throw decoder.fail("'\(both)' is in both 'actions' and 'beside'", forKey: CodingKeys.beside, code: .badValue)
            }
        }

        /// The `_buttonDown:`/`_buttonUp:` clicks beside a `_tabBarItemClicked:` click.
        public static let tabBarTouches = Rule(name: "tab_bar_touch", actions: ["_buttonDown:", "_buttonUp:"], beside: ["_tabBarItemClicked:"])
    }

    /// The stage's options.
    public struct Config: Decodable, Sendable {
        /// The kinds of noise; `[]` drops nothing.
        public var rules: [Rule] = [.tabBarTouches]

        enum CodingKeys: String, CodingKey { case rules }

        /// Options for code and tests.
        public init(rules: [Rule] = [.tabBarTouches]) { self.rules = rules }

        /// Decodes `rules` and checks that rule names are unique.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            rules = try c.decodeIfPresent([Rule].self, forKey: .rules) ?? [.tabBarTouches]
            var seen = Set<String>()
            for r in rules where !seen.insert(r.name).inserted {
                throw decoder.fail("two noise rules are named '\(r.name)'", forKey: CodingKeys.rules, code: .badValue)
            }
        }
    }

    /// `kind: noise_filter`.
    public static let kind = "noise_filter"
    public static let summary = "drops click noise, by default the _buttonDown:/_buttonUp: clicks beside a tab bar's _tabBarItemClicked:"

    let rules: [Rule]
    /// Every action name of every rule: what a click's `$element_action` is compared with.
    private let names: [(bytes: [UInt8], rule: Int, isNoise: Bool)]
    private let targets: [[[UInt8]]]
    let dropped: StageCounter
    let droppedByRule: [StageCounter]

    /// A click whose action is named by a rule, found in the first pass.
    private struct Candidate {
        var event: Int
        var rule: Int
        var isNoise: Bool
    }
    private var candidates: [Candidate] = []

    /// The pipeline's roles: noise is looked for among click events.
    let roles: EventRoles.Table

    public init(config: Config, context: StageContext) throws {
        rules = config.rules
        var names: [(bytes: [UInt8], rule: Int, isNoise: Bool)] = []
        for (r, rule) in config.rules.enumerated() {
            for a in rule.actions { names.append((Array(a.utf8), r, true)) }
            for a in rule.beside { names.append((Array(a.utf8), r, false)) }
        }
        self.names = names
        targets = config.rules.map { $0.targets.map { Array($0.utf8) } }
        dropped = context.counter("noise_dropped")
        droppedByRule = config.rules.map { context.counter($0.name) }
        roles = context.roles.table
    }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        if names.isEmpty { return }
        candidates.removeAll(keepingCapacity: true)
        var noise = 0
        for i in batch.events.indices {
            let ev = batch.events[i]
            // `known` is a bit test: events without `$element_action` cost nothing more.
            guard ev.isLive, ev.type.isTrack, ev.known & KnownProperty.elementAction.bit != 0,
                  roles.role(ofEvent: i, in: batch) == .click,
                  let action = stringValue(batch, i, "$element_action") else { continue }
            for n in names.indices where names[n].bytes.count == action.count && equal(batch, action, names[n].bytes) {
                candidates.append(Candidate(event: i, rule: names[n].rule, isNoise: names[n].isNoise))
                if names[n].isNoise { noise += 1 }
            }
        }
        if noise == 0 { return }
        for c in candidates where c.isNoise && batch.events[c.event].isLive {
            let rule = rules[c.rule]
            if !targets[c.rule].isEmpty {
                guard let t = stringValue(batch, c.event, "$element_target"), targets[c.rule].contains(where: { equal(batch, t, $0) }) else { continue }
            }
            if !rule.beside.isEmpty && !hasBeside(batch, c, rule) { continue }
            batch.drop(c.event)
            dropped.add()
            droppedByRule[c.rule].add()
        }
    }

    /// Whether a live `beside` click of the same rule, user (and target) lies within the rule's window.
    private func hasBeside(_ batch: borrowing EventBatch, _ c: Candidate, _ rule: Rule) -> Bool {
        let ev = batch.events[c.event]
        let target = rule.sameTarget ? stringValue(batch, c.event, "$element_target") : nil
        for a in candidates where !a.isNoise && a.rule == c.rule {
            let other = batch.events[a.event]
            guard other.isLive, abs(other.time - ev.time) <= rule.within.milliseconds,
                  sameBytes(batch, ev.distinctID, other.distinctID) else { continue }
            if rule.sameTarget {
                guard let target, let t = stringValue(batch, a.event, "$element_target"), sameBytes(batch, target, t) else { continue }
            }
            return true
        }
        return false
    }

    /// The raw content (between the quotes) of a kept, unescaped string property.
    private func stringValue(_ batch: borrowing EventBatch, _ i: Int, _ name: StaticString) -> Span? {
        guard let k = batch.propertyIndex(event: i, name: name) else { return nil }
        let p = batch.properties[k]
        // Selector and class names never need JSON escapes; an escaped or replaced value is not one of them.
        guard p.kind == .string, p.fix == .keep, !p.valueEscaped else { return nil }
        return Span(start: p.value.start + 1, end: p.value.end - 1)
    }

    private func equal(_ batch: borrowing EventBatch, _ s: Span, _ bytes: [UInt8]) -> Bool {
        guard s.count == bytes.count else { return false }
        let lo = Int(s.start)
        for k in 0..<bytes.count where batch.json[lo + k] != bytes[k] { return false }
        return true
    }

    private func sameBytes(_ batch: borrowing EventBatch, _ a: Span, _ b: Span) -> Bool {
        batch.jsonEqual(a, b)
    }
}
