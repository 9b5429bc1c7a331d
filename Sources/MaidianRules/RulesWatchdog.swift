import MaidianEvents

/// Watches rules across app releases: per rule and `app_version`, how many events of the rule's page the
/// engine saw and how many the rule matched. A version that sends normal traffic to the page (at least
/// `minEvents` events of the rule's kind) while the rule matches nothing, or less than `dropRatio` of its share
/// on the previous version, raises one `Alert` (per rule and version).
///
/// A rule's page: a page rule's `screen` (else the last controller of its `page_path`); a `PAGEPV` entry's key;
/// an element rule's `screen`; for element and action rules without one, the page they matched most often so
/// far (learned from the traffic). Counting costs two hash look-ups per page view or click, one per hit;
/// `alerts()` walks the counts (call it now and then, not per event).
public final class RulesWatchdog {
    /// When a version counts as broken.
    public struct Options: Sendable {
        /// Events of the rule's kind on its page, on a version, before that version is judged.
        public var minEvents: Int
        /// A share of matches below this fraction of the previous version's raises an alert (0 matches always does).
        public var dropRatio: Double

        /// Options.
        public init(minEvents: Int = 100, dropRatio: Double = 0.1) {
            self.minEvents = minEvents
            self.dropRatio = dropRatio
        }
    }

    /// A rule that stopped matching (or matches far less) on an app version: one `rules.health` record.
    public struct Alert: Sendable, Equatable {
        /// The rule id (action rules: their identifier).
        public var rule: String
        /// `page`, `element`, or the action table.
        public var kind: String
        /// The version it broke on.
        public var appVersion: String
        /// The rule's page.
        public var page: String
        /// Events of the rule's kind on the page on `appVersion`, and how many the rule matched.
        public var events: Int, matched: Int
        /// The previous version with traffic on the page, its events and matches.
        public var previousVersion: String, previousEvents: Int, previousMatched: Int

        /// `stopped` (no match at all) or `dropped`.
        public var reason: String { matched == 0 ? "stopped" : "dropped" }

        /// The record's key: `{rule}|{app_version}`.
        public var key: String { "\(rule)|\(appVersion)" }

        /// The record (one JSON object; see docs/rules.md).
        public var json: String {
            var out: [UInt8] = []
            func field(_ name: String, _ value: String) {
                out.append(out.isEmpty ? 0x7B : 0x2C)
                JSONOut.appendString(name, to: &out)
                out.append(0x3A)
                JSONOut.appendString(value, to: &out)
            }
            func number(_ name: String, _ value: Int) {
                out.append(0x2C)
                JSONOut.appendString(name, to: &out)
                out.append(contentsOf: ":\(value)".utf8)
            }
            field("rule", rule); field("kind", kind); field("app_version", appVersion); field("page", page)
            field("reason", reason)
            number("events", events); number("matched", matched)
            field("previous_version", previousVersion)
            number("previous_events", previousEvents); number("previous_matched", previousMatched)
            out.append(0x7D)
            return String(decoding: out, as: UTF8.self)
        }
    }

    /// The rules watched.
    public let matcher: RuleMatcher
    /// When a version counts as broken.
    public let options: Options

    /// Distinct pages and versions seen, numbered (by a 64-bit hash of their bytes: a collision would merge two
    /// pages' counts, at odds of 2^-64 per pair).
    private var pageNumbers: [UInt64: Int32] = [:], pages: [String] = []
    private var versionNumbers: [UInt64: Int32] = [:], versions: [String] = []
    /// (role, page, version) → events.
    private var seen: [UInt64: Int] = [:]
    /// (rule, version) → matches; (rule, page) → matches.
    private var matched: [UInt64: Int] = [:]
    private var matchedOnPage: [UInt64: Int] = [:]
    /// (rule, version) already reported.
    private var reported: Set<UInt64> = []

    /// A watchdog for `matcher`'s rules.
    public init(matcher: RuleMatcher, options: Options = Options()) {
        self.matcher = matcher
        self.options = options
    }

    @inline(__always)
    private static func pack(_ a: Int, _ b: Int32, _ c: Int32) -> UInt64 {
        UInt64(UInt32(truncatingIfNeeded: a)) << 40 ^ UInt64(UInt32(bitPattern: b)) << 20 ^ UInt64(UInt32(bitPattern: c))
    }

    private static func number(_ t: ByteView, _ numbers: inout [UInt64: Int32], _ names: inout [String]) -> Int32 {
        guard let p = t.start else { return -1 }
        var h = Hash64()
        h.add(p, t.count)
        if let n = numbers[h.value] { return n }
        let n = Int32(names.count)
        numbers[h.value] = n
        names.append(String(decoding: UnsafeBufferPointer(start: p, count: t.count), as: UTF8.self))
        return n
    }

    /// Counts one page view or click (after matching): its page, its app version (absent: not counted) and
    /// the rules it matched (hit numbers).
    public func observe(role: EventRole, page: ByteView, version: ByteView, hits: ArraySlice<Int>) {
        guard role != .other, page.isPresent, version.isPresent else { return }
        let p = Self.number(page, &pageNumbers, &pages)
        let v = Self.number(version, &versionNumbers, &versions)
        seen[Self.pack(Int(role.rawValue), p, v), default: 0] += 1
        for h in hits {
            matched[Self.pack(h, v, -1), default: 0] += 1
            matchedOnPage[Self.pack(h, p, -2), default: 0] += 1
        }
    }

    /// `observe` with Strings (tools and tests).
    public func observe(role: EventRole, page: String?, version: String?, hits: [Int]) {
        guard var page, var version else { return }
        page.withUTF8 { pb in
            version.withUTF8 { vb in
                observe(role: role, page: ByteView(pb.baseAddress ?? emptyBytes, pb.count), version: ByteView(vb.baseAddress ?? emptyBytes, vb.count),
                        hits: hits[...])
            }
        }
    }

    /// The role and page a rule is watched on (nil: not known yet).
    public func scope(of h: Int) -> (role: EventRole, page: String)? {
        let r = matcher.rules
        if h < r.pages.count {
            let rule = r.pages[h].definitions[0]
            if let s = rule.screen { return (.pageEnter, s) }
            if let p = rule.pagePath { return (.pageEnter, Self.lastController(p)) }
            return learned(h).map { (.pageEnter, $0) }
        }
        if let a = matcher.action(of: h) {
            if a.kind == .pagePV { return (.pageEnter, a.id) }
            return learned(h).map { (.click, $0) }
        }
        let e = r.elements[h - r.pages.count]
        if let s = e.screen ?? (e.drawings.count > 0 && e.drawings.allSatisfy({ $0.screen == e.drawings[0].screen }) ? e.drawings[0].screen : nil) {
            return (.click, s)
        }
        return learned(h).map { (.click, $0) }
    }

    /// The page rule `h` matched most often.
    private func learned(_ h: Int) -> String? {
        var best: (Int, String)?
        for (p, name) in pages.enumerated() {
            if let n = matchedOnPage[Self.pack(h, Int32(p), -2)], n > (best?.0 ?? 0) || (n == best?.0 && name < best!.1) { best = (n, name) }
        }
        return best?.1
    }

    /// `UITabBarController-UINavigationController(3)-ProfileViewController(0)` → `ProfileViewController`.
    public static func lastController(_ path: String) -> String {
        let last = path.split(separator: "-").last.map(String.init) ?? path
        if let paren = last.firstIndex(of: "(") { return String(last[..<paren]) }
        return last
    }

    /// Versions in release order (dotted numbers compared as numbers; others after, by text).
    private func ordered() -> [Int32] {
        let parsed = versions.map { VersionCondition.parse(Substring($0)) }
        return versions.indices.sorted { a, b in
            switch (parsed[a], parsed[b]) {
            case let (x?, y?):
                let c = VersionCondition.compare(x, y)
                return c != 0 ? c < 0 : versions[a] < versions[b]
            case (.some, .none): return true
            case (.none, .some): return false
            case (.none, .none): return versions[a] < versions[b]
            }
        }.map(Int32.init)
    }

    /// The alerts not raised before: rules that match nothing (or far less than on the previous version) on a
    /// version with normal traffic to their page.
    public func alerts() -> [Alert] {
        let order = ordered()
        let total = matcher.rules.pages.count + matcher.rules.elements.count + matcher.rules.actions.count
        var out: [Alert] = []
        for h in 0..<total {
            guard let (role, page) = scope(of: h) else { continue }
            var pageBytes = page
            let p: Int32? = pageBytes.withUTF8 { b in
                var hash = Hash64()
                hash.add(b.baseAddress ?? emptyBytes, b.count)
                return pageNumbers[hash.value]
            }
            guard let p else { continue }
            var previous: (v: Int32, events: Int, matched: Int)?
            for v in order {
                let events = seen[Self.pack(Int(role.rawValue), p, v)] ?? 0
                guard events >= options.minEvents else { continue }
                let hits = matched[Self.pack(h, v, -1)] ?? 0
                if let prev = previous, prev.matched > 0 {
                    let share = Double(hits) / Double(events), before = Double(prev.matched) / Double(prev.events)
                    if share < options.dropRatio * before {
                        if reported.insert(Self.pack(h, v, -1)).inserted {
                            out.append(Alert(
                                rule: matcher.id(of: h), kind: kind(h), appVersion: versions[Int(v)], page: page, events: events, matched: hits,
                                previousVersion: versions[Int(prev.v)], previousEvents: prev.events, previousMatched: prev.matched))
                        }
                        continue  // later versions compare with the last one where the rule worked
                    }
                }
                previous = (v, events, hits)
            }
        }
        return out
    }

    private func kind(_ h: Int) -> String {
        if h < matcher.rules.pages.count { return "page" }
        return matcher.action(of: h)?.kind.rawValue ?? "element"
    }
}
