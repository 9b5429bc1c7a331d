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
    public struct Rule: Decodable, Sendable, Equatable, SettingValue {
        @usableFromInline enum Settings {
            static let name = Setting<String>.required("name", "names the rule's counter: lower-case letters, digits and `_`, unique", example: "keyboard")
            static let actions = Setting<[String]>.required("actions", "`$element_action` values of the noise clicks (at least one)", example: "[\"_keyboardTap:\"]")
            @usableFromInline static let targets = Setting("targets", default: [String](), "only noise clicks with one of these `$element_target` values", example: "[UIKBKeyView]", documented: "`[]` (any)")
            @usableFromInline static let beside = Setting("beside", default: [String](),
                "`$element_action` values of the click the noise comes with; empty: the noise is dropped alone", example: "[\"_tabBarItemClicked:\"]")
            @usableFromInline static let within = Setting("within", default: ConfigDuration.seconds(1),
                "how far apart in event time the noise and the `beside` click may be (a duration)", example: "500ms")
            @usableFromInline static let sameTarget = Setting("same_target", default: true, "the `beside` click must have the noise's `$element_target`", example: "false")
        }
        public static let nestedSettings: ConfigSpec? = ConfigSpec(
            Settings.name, Settings.actions, Settings.targets, Settings.beside, Settings.within, Settings.sameTarget)
        public static var settingType: String { "mapping" }
        public var settingText: String { name }

        /// Names the rule's counter (`[a-z0-9_]`, unique).
        public var name: String
        /// `$element_action` values of the noise clicks.
        public var actions: [String]
        /// Only clicks with one of these `$element_target` values; empty: any target.
        public var targets = Settings.targets.default
        /// `$element_action` values of the click the noise comes beside; empty: the noise is dropped alone.
        public var beside = Settings.beside.default
        /// How far apart in event time the noise and the `beside` click may be.
        public var within = Settings.within.default
        /// The `beside` click must have the same `$element_target` as the noise.
        public var sameTarget = Settings.sameTarget.default

        /// A rule for code and tests.
        public init(
            name: String, actions: [String], targets: [String] = Settings.targets.default, beside: [String] = Settings.beside.default,
            within: ConfigDuration = Settings.within.default, sameTarget: Bool = Settings.sameTarget.default
        ) {
            self.name = name
            self.actions = actions
            self.targets = targets
            self.beside = beside
            self.within = within
            self.sameTarget = sameTarget
        }

        /// Decodes and checks a rule.
        public init(from decoder: any Decoder) throws {
            let s = try decoder.settings(Self.nestedSettings!)
            name = try s(Settings.name)
            actions = try s(Settings.actions)
            targets = try s(Settings.targets)
            beside = try s(Settings.beside)
            within = try s(Settings.within)
            sameTarget = try s(Settings.sameTarget)
            if name.isEmpty || !name.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }) {
                throw decoder.fail("rule name '\(name)' must be lower-case letters, digits and _", forKey: Settings.name.codingKey, code: .badValue)
            }
            if actions.isEmpty || actions.contains(where: \.isEmpty) {
                throw decoder.fail("'actions' must list at least one $element_action value", forKey: Settings.actions.codingKey, code: .badValue)
            }
            if let both = actions.first(where: beside.contains) {
                throw decoder.fail("'\(both)' is in both 'actions' and 'beside'", forKey: Settings.beside.codingKey, code: .badValue)
            }
        }

        /// The `_buttonDown:`/`_buttonUp:` clicks beside a `_tabBarItemClicked:` click.
        public static let tabBarTouches = Rule(name: "tab_bar_touch", actions: ["_buttonDown:", "_buttonUp:"], beside: ["_tabBarItemClicked:"])
    }

    /// The stage's options.
    public struct Config: Decodable, Sendable, DeclaredSettings {
        @usableFromInline enum Settings {
            @usableFromInline static let rules = Setting("rules", default: [Rule.tabBarTouches], "the kinds of noise; `[]` drops nothing",
                example: "[{name: keyboard, actions: [\"_keyboardTap:\"], targets: [UIKBKeyView]}]", documented: "the `tab_bar_touch` rule above")
        }
        public static let settings = ConfigSpec(Settings.rules)
        /// The kinds of noise; `[]` drops nothing.
        public var rules = Settings.rules.default

        /// Options for code and tests.
        public init(rules: [Rule] = Settings.rules.default) { self.rules = rules }

        /// Decodes `rules` and checks that rule names are unique.
        public init(from decoder: any Decoder) throws {
            rules = try decoder.settings(Self.settings)(Settings.rules)
            var seen = Set<String>()
            for r in rules where !seen.insert(r.name).inserted {
                throw decoder.fail("two noise rules are named '\(r.name)'", forKey: Settings.rules.codingKey, code: .badValue)
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
        for i in 0..<batch.eventCount {
            let ev = batch.event(i)
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
        for c in candidates where c.isNoise && batch.isLive(c.event) {
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
        let ev = batch.event(c.event)
        let target = rule.sameTarget ? stringValue(batch, c.event, "$element_target") : nil
        for a in candidates where !a.isNoise && a.rule == c.rule {
            let other = batch.event(a.event)
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
        let value = batch.stringValue(ofProperty: k)
        // Selector and class names never need JSON escapes; an escaped or replaced value is not one of them.
        guard value.isPresent, !value.escaped else { return nil }
        return value.span
    }

    private func equal(_ batch: borrowing EventBatch, _ s: Span, _ bytes: [UInt8]) -> Bool {
        batch.jsonEqual(s, bytes)
    }

    private func sameBytes(_ batch: borrowing EventBatch, _ a: Span, _ b: Span) -> Bool {
        batch.jsonEqual(a, b)
    }
}
