import MaidianEvents

/// What `maidian rules test` found: per rule, how many events it matched and a few of them; the rules that
/// matched nothing; for one rule on request, its near misses. Built by ``RulesTestRun``.
public struct RulesReport: Sendable {
    /// One event, as shown in examples.
    public struct Example: Sendable, Equatable {
        /// `_track_id`, when the event has one.
        public var trackID: Int64?
        /// The event's `distinct_id`.
        public var distinctID: String
        /// Event time (after calibration), ms since the epoch.
        public var time: Int64
        /// The event's `event` name.
        public var event: String
        /// `$screen_name`, else `current_url`.
        public var page: String?
        /// The element identifier (clicks).
        public var element: String?
        /// The content a `group_by_content` rule counted the event under.
        public var content: String?
    }

    /// One rule's results.
    public struct RuleResult: Sendable {
        /// The rule id (action rules: their identifier).
        public var id: String
        /// `page`, `element`, or the action table (`ACTION`, `PAGEPV`, `TABLEVIEW`, `GESTURE`).
        public var kind: String
        /// The count the rule feeds: `pv` or `click`.
        public var metric: MatchMetric
        /// Events it matched.
        public var matches = 0
        /// The first few of them.
        public var examples: [Example] = []
        /// `group_by_content` rules: matches per content value.
        public var contents: [String: Int] = [:]
        /// Whether the rule groups by content.
        public var groupsByContent = false
    }

    /// Near misses that differ in the same way.
    public struct NearMiss: Sendable {
        /// The event's identifier (or page path) with the differing parts marked (see ``RulesReport/NearMisses``).
        public var diff: String
        /// Events that differ this way.
        public var count: Int
        /// How many parts differ (the closest near misses are listed first).
        public var differences: Int
        /// The first such event.
        public var example: Example
    }

    /// The events a rule did not match that are closest to it (`--rule ID`).
    ///
    /// - Page rules: page-enter events on the rule's page (its `screen`, or the last controller of its
    ///   `page_path`) that it did not match.
    /// - Element rules: clicks with the rule's `$element_path` that it did not match (section and row of a
    ///   position are compared separately).
    /// - `ACTION`, `GESTURE`, `TABLEVIEW` entries: clicks whose `$element_target` is the entry's target.
    /// - `PAGEPV` entries and `identifier_regex` rules have none (see `note`).
    ///
    /// Differences are marked `[-expected-]{+actual+}` inside the part that differs, after the common prefix
    /// and before the common suffix of that part: `UIButton([-0-]{+2+})_[Buy]` is a button at index 2 where
    /// the rule wants index 0. Element identifiers are shown without their path (the same for all of them,
    /// written `…`); for `content_key` rules the bracket shows that content item, `<any>` stands for a wildcard
    /// that needs a value. Scope conditions follow: `screen …`, `page_path …`, `app_version 3.1.0 not >=3.2.0`,
    /// `page ignored`. Groups are listed closest first (fewest differing parts), then by count.
    public struct NearMisses: Sendable {
        /// The rule.
        public var rule: String
        /// Which events were looked at.
        public var scope: String
        /// Near-miss events.
        public var total = 0
        /// The most frequent differences, most frequent first.
        public var groups: [NearMiss] = []
        /// Why there are none by construction, when that is so.
        public var note: String?
    }

    /// What went in and what came out of the stages before the rules.
    public struct Totals: Sendable, Equatable {
        /// Input records decoded.
        public var records = 0
        /// Events decoded.
        public var events = 0
        /// Events still live after `match`.
        public var kept = 0
        /// Dropped on purpose (duplicates, noise).
        public var dropped = 0
        /// Rejected to the dead-letter topic.
        public var rejected = 0
        /// Marked late (not counted).
        public var late = 0
        /// Kept page-enter and click events.
        public var pageViews = 0
        /// Kept click events, too-late ones excluded.
        public var clicks = 0
        /// Kept events that matched at least one rule.
        public var matchedEvents = 0
    }

    /// Every rule, in rule order (pages, elements, actions).
    public var rules: [RuleResult]
    /// Input and stage counts ahead of the rules.
    public var totals = Totals()
    /// With `--rule`.
    public var nearMisses: NearMisses?

    /// Ids of the rules that matched nothing, in rule order.
    public var unmatched: [String] { rules.filter { $0.matches == 0 }.map(\.id) }

    /// The result of rule `id`.
    public func rule(_ id: String) -> RuleResult? { rules.first { $0.id == id } }

    // MARK: - rendering

    /// One JSON object: `{"rules": {"<id>": {"kind", "metric", "matches", "examples": [...], "contents"?}},
    /// "unmatched": [...], "totals": {...}, "near_misses"?: {...}}`.
    public var json: String {
        var o: [UInt8] = []
        JSONOut.appendRaw("{\"rules\":{", to: &o)
        for (n, r) in rules.enumerated() {
            if n > 0 { o.append(0x2C) }
            JSONOut.appendString(r.id, to: &o)
            JSONOut.appendRaw(":{\"kind\":", to: &o)
            JSONOut.appendString(r.kind, to: &o)
            JSONOut.appendRaw(",\"metric\":", to: &o)
            JSONOut.appendString(r.metric == .pv ? "pv" : "click", to: &o)
            JSONOut.appendRaw(",\"matches\":", to: &o)
            JSONOut.appendInt(Int64(r.matches), to: &o)
            JSONOut.appendRaw(",\"examples\":[", to: &o)
            for (k, e) in r.examples.enumerated() {
                if k > 0 { o.append(0x2C) }
                Self.appendJSON(e, to: &o)
            }
            o.append(0x5D)
            if r.groupsByContent {
                JSONOut.appendRaw(",\"contents\":{", to: &o)
                for (k, (content, count)) in r.contents.sorted(by: { $0.key < $1.key }).enumerated() {
                    if k > 0 { o.append(0x2C) }
                    JSONOut.appendString(content, to: &o)
                    o.append(0x3A)
                    JSONOut.appendInt(Int64(count), to: &o)
                }
                o.append(0x7D)
            }
            o.append(0x7D)
        }
        JSONOut.appendRaw("},\"unmatched\":[", to: &o)
        for (n, id) in unmatched.enumerated() {
            if n > 0 { o.append(0x2C) }
            JSONOut.appendString(id, to: &o)
        }
        JSONOut.appendRaw("],\"totals\":{", to: &o)
        let t = totals
        let fields: [(String, Int)] = [
            ("records", t.records), ("events", t.events), ("kept", t.kept), ("dropped", t.dropped), ("rejected", t.rejected),
            ("late", t.late), ("page_views", t.pageViews), ("clicks", t.clicks), ("matched_events", t.matchedEvents),
        ]
        for (n, (k, v)) in fields.enumerated() {
            if n > 0 { o.append(0x2C) }
            JSONOut.appendString(k, to: &o)
            o.append(0x3A)
            JSONOut.appendInt(Int64(v), to: &o)
        }
        o.append(0x7D)
        if let nm = nearMisses {
            JSONOut.appendRaw(",\"near_misses\":{\"rule\":", to: &o)
            JSONOut.appendString(nm.rule, to: &o)
            JSONOut.appendRaw(",\"scope\":", to: &o)
            JSONOut.appendString(nm.scope, to: &o)
            JSONOut.appendRaw(",\"total\":", to: &o)
            JSONOut.appendInt(Int64(nm.total), to: &o)
            if let note = nm.note {
                JSONOut.appendRaw(",\"note\":", to: &o)
                JSONOut.appendString(note, to: &o)
            }
            JSONOut.appendRaw(",\"groups\":[", to: &o)
            for (n, g) in nm.groups.enumerated() {
                if n > 0 { o.append(0x2C) }
                JSONOut.appendRaw("{\"count\":", to: &o)
                JSONOut.appendInt(Int64(g.count), to: &o)
                JSONOut.appendRaw(",\"differences\":", to: &o)
                JSONOut.appendInt(Int64(g.differences), to: &o)
                JSONOut.appendRaw(",\"diff\":", to: &o)
                JSONOut.appendString(g.diff, to: &o)
                JSONOut.appendRaw(",\"example\":", to: &o)
                Self.appendJSON(g.example, to: &o)
                o.append(0x7D)
            }
            JSONOut.appendRaw("]}", to: &o)
        }
        o.append(0x7D)
        return String(decoding: o, as: UTF8.self)
    }

    private static func appendJSON(_ e: Example, to o: inout [UInt8]) {
        JSONOut.appendRaw("{\"_track_id\":", to: &o)
        if let id = e.trackID { JSONOut.appendInt(id, to: &o) } else { JSONOut.appendRaw("null", to: &o) }
        JSONOut.appendRaw(",\"distinct_id\":", to: &o)
        JSONOut.appendString(e.distinctID, to: &o)
        JSONOut.appendRaw(",\"time\":", to: &o)
        JSONOut.appendInt(e.time, to: &o)
        JSONOut.appendRaw(",\"event\":", to: &o)
        JSONOut.appendString(e.event, to: &o)
        for (name, value) in [("page", e.page), ("element", e.element), ("content", e.content)] {
            guard let value else { continue }
            o.append(0x2C)
            JSONOut.appendString(name, to: &o)
            o.append(0x3A)
            JSONOut.appendString(value, to: &o)
        }
        o.append(0x7D)
    }

    /// The report for people: a table of rules with their examples, the rules without matches, near misses.
    /// With `only`, just that rule's lines (and the near misses).
    public func text(only: String? = nil) -> String {
        var lines: [String] = []
        let t = totals
        lines.append("\(t.records) records, \(t.events) events: \(t.kept) kept, \(t.dropped) dropped, \(t.rejected) rejected"
                     + (t.late > 0 ? ", \(t.late) late" : "")
                     + "; \(t.pageViews) page views and \(t.clicks) clicks, \(t.matchedEvents) events matched a rule")
        lines.append("")
        let shown = rules.filter { only == nil || $0.id == only }
        let width = min(40, max(4, shown.map(\.id.count).max() ?? 0))
        lines.append(Self.pad("rule", width) + "  " + Self.pad("kind", 9) + " metric  matches")
        for r in shown {
            lines.append(Self.pad(r.id, width) + "  " + Self.pad(r.kind, 9) + " " + Self.pad(r.metric == .pv ? "pv" : "click", 6)
                         + Self.padLeft(String(r.matches), 9))
            for e in r.examples { lines.append("    " + Self.describe(e)) }
            if r.groupsByContent && !r.contents.isEmpty {
                let top = r.contents.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.prefix(10)
                lines.append("    by content: " + top.map { "\($0.key)=\($0.value)" }.joined(separator: ", ")
                             + (r.contents.count > 10 ? ", … (\(r.contents.count) values)" : ""))
            }
        }
        if only == nil {
            lines.append("")
            let none = unmatched
            lines.append(none.isEmpty ? "every rule matched" : "matched nothing (\(none.count)): " + none.joined(separator: ", "))
        }
        if let nm = nearMisses {
            lines.append("")
            lines.append("near misses of \(nm.rule): \(nm.scope)")
            if let note = nm.note { lines.append("  " + note) }
            lines.append("  \(nm.total) events; [-expected-]{+actual+} marks what differs")
            for g in nm.groups {
                lines.append(Self.padLeft(String(g.count), 7) + "  " + g.diff)
                lines.append("         e.g. " + Self.describe(g.example))
            }
        }
        return lines.joined(separator: "\n")
    }

    /// `_track_id=… distinct_id=… 2025-11-21T05:00:11.951Z $AppClick page=… element=…`.
    static func describe(_ e: Example) -> String {
        var s = "_track_id=\(e.trackID.map(String.init) ?? "-") distinct_id=\(e.distinctID) \(utcText(e.time)) \(e.event)"
        if let p = e.page { s += " page=\(p)" }
        if let el = e.element { s += " element=\(shortElement(el))" }
        if let c = e.content { s += " content=\(c)" }
        return s
    }

    /// An element identifier with all but the last two classes of its path left out (`…-UITableView-UITableViewCell(1-2)_[null]`).
    static func shortElement(_ identifier: String) -> String {
        let head = identifier.range(of: "_[").map { identifier[..<$0.lowerBound] } ?? identifier[...]
        guard let paren = head.lastIndex(of: "(") else { return identifier }
        let classes = head[..<paren].split(separator: "-", omittingEmptySubsequences: false)
        if classes.count <= 3 { return identifier }
        return "…-" + classes.suffix(2).joined(separator: "-") + identifier[paren...]
    }

    static func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
    static func padLeft(_ s: String, _ n: Int) -> String { s.count >= n ? s : String(repeating: " ", count: n - s.count) + s }

    /// ISO 8601 UTC with milliseconds, without Foundation.
    static func utcText(_ ms: Int64) -> String {
        let (days, msOfDay) = ms.quotientAndRemainder(dividingBy: 86_400_000)
        var d = days, t = msOfDay
        if t < 0 { t += 86_400_000; d -= 1 }
        // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
        let z = d + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let millis = t % 1000
        let msText = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(year)-\(two(month))-\(two(day))T\(two(t / 3_600_000)):\(two(t / 60_000 % 60)):\(two(t / 1000 % 60)).\(msText)Z"
    }

    /// `got` with the part that differs from `want` marked `[-want's part-]{+got's part+}`, between the common
    /// prefix and the common suffix, both cut back to word boundaries (CamelCase humps, digit runs, punctuation),
    /// so `ProductViewController` against `CartViewController` reads `[-Product-]{+Cart+}ViewController`.
    /// `got` unchanged when they are equal; nil `got` (absent) reads `[-want-]{+(none)+}`.
    public static func markDifference(expected want: String, actual got: String?) -> String {
        guard let got else { return "[-\(want)-]{+(none)+}" }
        if want == got { return got }
        let a = Array(want), b = Array(got)
        var p = 0
        while p < a.count && p < b.count && a[p] == b[p] { p += 1 }
        while p > 0 && !(isBoundary(a, p) && isBoundary(b, p)) { p -= 1 }
        var s = 0
        while s < a.count - p && s < b.count - p && a[a.count - 1 - s] == b[b.count - 1 - s] { s += 1 }
        while s > 0 && !(isBoundary(a, a.count - s) && isBoundary(b, b.count - s)) { s -= 1 }
        let removed = String(a[p..<(a.count - s)]), added = String(b[p..<(b.count - s)])
        return String(a[..<p]) + (removed.isEmpty ? "" : "[-\(removed)-]") + (added.isEmpty ? "" : "{+\(added)+}") + String(a[(a.count - s)...])
    }

    /// Whether a word starts or ends between `c[i - 1]` and `c[i]`.
    private static func isBoundary(_ c: [Character], _ i: Int) -> Bool {
        if i <= 0 || i >= c.count { return true }
        let x = c[i - 1], y = c[i]
        if !(x.isLetter || x.isNumber) || !(y.isLetter || y.isNumber) { return true }
        if x.isNumber != y.isNumber { return true }
        return y.isUppercase && (x.isLowercase || x.isNumber)
    }
}
