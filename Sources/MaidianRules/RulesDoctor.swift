import MaidianEvents

/// `maidian rules doctor`: proposes the repaired definition of an element rule a release broke, from its near
/// misses on the broken version (clicks on the rule's page, of its element type, that it did not match).
///
/// Elements move: a view path gains a container, a cell moves. The candidates are the near misses' element
/// paths, most frequent first; each is tried as the rule with that path (everything else unchanged, the rule's
/// conditions included) on the near misses that have it, and the one that matches most wins (ties: the path
/// sharing the longest tail with the old one). The proposal keeps the old drawing for the versions before the
/// break and adds the new one from it (`any_of`, one rule id, so counts and users continue).
public struct RulesDoctor {
    /// A proposed repair.
    public struct Proposal: Sendable, Equatable {
        /// The rule.
        public var rule: String
        /// The broken version.
        public var appVersion: String
        /// The path the rule has, and the one the near misses have.
        public var oldPath: String, newPath: String
        /// Near misses on the version, and how many the repaired rule matches.
        public var nearMisses: Int, repaired: Int
        /// A rules-file fragment to paste in place of the rule (`elements:` entry).
        public var fragment: String
    }

    /// How many of the most frequent near-miss paths are tried.
    public var candidates = 5

    /// A doctor.
    public init() {}

    /// The repair of element rule `alert.rule` from `nearMisses` (clicks on its page, of the broken version,
    /// that it did not match); nil when the rule is not an element rule with a path, or nothing repairs it.
    public func propose(_ alert: RulesWatchdog.Alert, matcher: RuleMatcher, nearMisses: [EventFacts]) -> Proposal? {
        guard let e = matcher.rules.elements.firstIndex(where: { $0.id == alert.rule }) else { return nil }
        let rule = matcher.rules.elements[e]
        let template = rule.drawings.last ?? rule
        guard let oldPath = template.path, template.identifierRegex == nil else { return nil }
        let types = Set(rule.definitions.compactMap(\.type))
        var byPath: [String: [EventFacts]] = [:]
        for f in nearMisses where f.elementPath != nil && f.elementPath != oldPath && (types.isEmpty || types.contains(f.elementType ?? "")) {
            byPath[f.elementPath!, default: []].append(f)
        }
        let ranked = byPath.sorted { $0.value.count != $1.value.count ? $0.value.count > $1.value.count : $0.key < $1.key }.prefix(candidates)
        var best: (path: String, matched: Int, tail: Int)?
        for (path, events) in ranked {
            var repaired = rule
            if repaired.drawings.isEmpty { repaired.path = path } else { repaired.drawings = [template].map { var d = $0; d.path = path; return d } }
            guard let m = try? RuleMatcher(rules: RulesFile(elements: [repaired]), regexCache: 0, matchCache: 0) else { continue }
            var n = 0
            for f in events {
                var hits: [Int] = []
                m.match(role: .click, facts: f, into: &hits)
                if !hits.isEmpty { n += 1 }
            }
            let tail = Self.commonTail(oldPath, path)
            if n > 0, best == nil || n > best!.matched || (n == best!.matched && tail > best!.tail) { best = (path, n, tail) }
        }
        guard let best else { return nil }
        return Proposal(rule: rule.id, appVersion: alert.appVersion, oldPath: oldPath, newPath: best.path, nearMisses: nearMisses.count,
                        repaired: best.matched, fragment: Self.fragment(rule, alert, newPath: best.path, matched: best.matched, of: nearMisses.count))
    }

    /// Components (`-`-separated) the two paths end with in common.
    static func commonTail(_ a: String, _ b: String) -> Int {
        let x = a.split(separator: "-"), y = b.split(separator: "-")
        var n = 0
        while n < min(x.count, y.count) && x[x.count - 1 - n] == y[y.count - 1 - n] { n += 1 }
        return n
    }

    /// The rule with the new drawing, as YAML.
    static func fragment(_ rule: ElementRule, _ alert: RulesWatchdog.Alert, newPath: String, matched: Int, of total: Int) -> String {
        let q = JSONOut.quoted
        func versions(_ v: [VersionCondition]) -> String {
            "[" + v.map { q($0.op.rawValue + $0.parts.map(String.init).joined(separator: ".")) }.joined(separator: ", ") + "]"
        }
        func drawing(_ d: ElementRule, extra: [VersionCondition], keepOwn: Bool = true) -> String {
            var keys: [String] = []
            if rule.drawings.isEmpty {
                keys.append("path: \(q(d.path ?? ""))")
            } else {
                if let s = d.screen, rule.screen == nil { keys.append("screen: \(q(s))") }
                if let p = d.path { keys.append("path: \(q(p))") }
                if let t = d.type, rule.type == nil { keys.append("type: \(q(t))") }
                if let i = d.index, rule.index == nil { keys.append("index: \(i)") }
                if let s = d.section, rule.section == nil { keys.append("section: \(s)") }
                if let r = d.row, rule.row == nil { keys.append("row: \(r)") }
                if let c = d.content, rule.content == nil { keys.append("content: \(q(c))") }
            }
            let own = rule.drawings.isEmpty || !keepOwn ? extra : Array(d.appVersions.dropFirst(rule.appVersions.count)) + extra
            if !own.isEmpty { keys.append("app_versions: \(versions(own))") }
            return "      - {" + keys.joined(separator: ", ") + "}"
        }
        var lines = [
            "# '\(rule.id)' matched \(alert.matched) of \(alert.events) clicks on \(alert.page) on app_version \(alert.appVersion)"
                + " (\(alert.previousVersion): \(alert.previousMatched) of \(alert.previousEvents)).",
            "# With $element_path \(q(newPath)) it matches \(matched) of the \(total) near misses on \(alert.appVersion). Replace the rule with:",
            "elements:",
            "  - id: \(q(rule.id))",
        ]
        if let s = rule.screen { lines.append("    screen: \(q(s))") }
        if let p = rule.pagePath { lines.append("    page_path: \(q(p))") }
        if let t = rule.type { lines.append("    type: \(q(t))") }
        if let i = rule.index { lines.append("    index: \(i)") }
        if let s = rule.section { lines.append("    section: \(s)") }
        if let r = rule.row { lines.append("    row: \(r)") }
        if let c = rule.content { lines.append("    content: \(q(c))") }
        if let k = rule.contentKey { lines.append("    content_key: \(q(k))") }
        if rule.groupByContent { lines.append("    group_by_content: true") }
        if !rule.appVersions.isEmpty { lines.append("    app_versions: \(versions(rule.appVersions))") }
        if !rule.conditions.isEmpty || rule.pagePathRegex != nil || rule.contentRegex != nil {
            lines.append("    # keep the rule's where: and regex keys as they are")
        }
        let v = VersionCondition("<\(alert.appVersion)"), from = VersionCondition(">=\(alert.appVersion)")
        lines.append("    any_of:")
        if rule.drawings.isEmpty {
            lines.append(drawing(rule, extra: v.map { [$0] } ?? []))
        } else {
            for d in rule.drawings { lines.append(drawing(d, extra: [])) }
        }
        var added = rule.drawings.last ?? rule
        added.path = newPath
        if rule.drawings.isEmpty {
            lines.append("      - {path: \(q(newPath))" + (from.map { ", app_versions: \(versions([$0]))" } ?? "") + "}")
        } else {
            lines.append(drawing(added, extra: from.map { [$0] } ?? [], keepOwn: false))
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
