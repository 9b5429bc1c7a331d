import MaidianEvents
import MaidianRules

extension EventFacts {
    /// The role and facts of event `e` of a decoded batch, values decoded to Strings (benchmarks and tools;
    /// the match stage reads raw bytes). Role `.other` for events that are not live track events.
    public static func read(_ batch: borrowing EventBatch, event e: Int) -> (EventRole, EventFacts) {
        let ev = batch.event(e)
        guard ev.isLive, ev.type.isTrack, let name = batch.jsonString(ev.eventName) else { return (.other, EventFacts()) }
        let role = EventRole.of(name)
        guard role != .other else { return (.other, EventFacts()) }
        func value(_ name: StaticString) -> (Property, [UInt8])? {
            guard let k = batch.propertyIndex(event: e, name: name) else { return nil }
            return (batch.property(k), batch.withBytes(of: batch.value(ofProperty: k)) { $0.array })
        }
        func text(_ name: StaticString) -> String? {
            guard let (p, bytes) = value(name) else { return nil }
            switch p.kind {
            case .string: return bytes.withByteView { $0.jsonString }
            case .number, .bool: return String(decoding: bytes, as: UTF8.self)
            default: return nil
            }
        }
        var f = EventFacts()
        f.screenName = text("$screen_name")
        f.currentURL = text("current_url")
        f.pagePath = text("$page_path")
        f.appVersion = text("$app_version")
        // Every kept property, for `where:` conditions.
        for k in batch.propertyRange(e) where batch.property(k).fix != .drop {
            // The name decoded, the value as written (the replacement when a stage replaced it).
            f.properties.append((batch.withBytes(of: batch.name(ofProperty: k)) { $0.string },
                                 batch.withBytes(of: batch.value(ofProperty: k)) { $0.string }))
        }
        if f.appVersion == nil, ev.lib.isPresent {
            f.appVersion = batch.withBytes(of: batch.lib(e)) { RuleMatcher.libAppVersion($0) }
        }
        guard role == .click else { return (role, f) }
        f.elementPath = text("$element_path")
        f.elementType = text("$element_type")
        f.elementPosition = text("$element_position")
        f.elementIndex = text("$element_index")
        if let (p, bytes) = value("$element_content") {
            if p.kind == .string {
                f.content = bytes.withByteView { $0.jsonString }
            } else if p.kind == .object && p.fix == .keep {
                bytes.withByteView { b in
                    b.forEachJSONMember { key, escaped, value in
                        if let text = b[value].jsonString {
                            f.contentItems.append((String(decoding: escaped ? key.unescaped : key.array, as: UTF8.self), text))
                        }
                        return true
                    }
                }
            }
        }
        f.elementKind = text("$element_kind")
        f.target = text("$element_target")
        f.action = text("$element_action")
        f.container = text("$element_container")
        f.tag = text("$element_tag")
        return (role, f)
    }
}

/// What the pages, elements and actions of some traffic look like, to generate rules sets from (benchmarks,
/// tests). Entries are distinct, most frequent first (ties in order of first appearance): deterministic.
public struct RuleCatalog: Sendable {
    struct Page: Hashable {
        var screen: String
        var pagePath: String?
    }

    struct Element: Hashable {
        var page: String?, pagePath: String?
        var path: String, type: String
        var index: Int?, section: Int?, row: Int?
        var content: String?
        var items: [String]
        var itemValues: [String]
    }

    struct Action: Hashable {
        var kind: ActionKind
        var id: String
    }

    private var pageCounts: [Page: (Int, Int)] = [:]
    private var elementCounts: [Element: (Int, Int)] = [:]
    private var actionCounts: [Action: (Int, Int)] = [:]
    private var versionSet: [String: Int] = [:]
    /// First sightings so far: each new page, element or action identifier gets the next number, so ties in
    /// count are ordered by first sighting, also between the identifiers of one click (ordering them by the
    /// event's number left those ties to the dictionary's per-process order).
    private var firsts = 0

    /// An empty catalog.
    public init() {}

    /// Notes one event.
    public mutating func observe(role: EventRole, facts f: EventFacts) {
        if let v = f.appVersion, versionSet[v] == nil { versionSet[v] = versionSet.count }
        switch role {
        case .pageEnter:
            guard let screen = f.page else { return }
            Self.count(&pageCounts, Page(screen: screen, pagePath: f.pagePath), &firsts)
            Self.count(&actionCounts, Action(kind: .pagePV, id: screen), &firsts)
        case .click:
            for (kind, id) in f.actionIdentifiers { Self.count(&actionCounts, Action(kind: kind, id: id), &firsts) }
            guard let path = f.elementPath, let type = f.elementType else { return }
            var section: Int?, row: Int?
            if let pos = f.elementPosition {
                let parts = pos.split(separator: "-", maxSplits: 1)
                if parts.count == 2 { section = Int(parts[0]); row = Int(parts[1]) }
            }
            Self.count(&elementCounts, Element(
                page: f.page, pagePath: f.pagePath, path: path, type: type, index: f.elementIndex.flatMap { Int($0) },
                section: section, row: row, content: f.content, items: f.contentItems.map(\.0), itemValues: f.contentItems.map(\.1)), &firsts)
        case .other:
            break
        }
    }

    private static func count<K: Hashable>(_ d: inout [K: (Int, Int)], _ k: K, _ firsts: inout Int) {
        if let (n, first) = d[k] { d[k] = (n + 1, first) } else { d[k] = (1, firsts); firsts += 1 }
    }

    private static func ordered<K: Hashable>(_ d: [K: (Int, Int)]) -> [K] {
        d.sorted { $0.value.0 != $1.value.0 ? $0.value.0 > $1.value.0 : $0.value.1 < $1.value.1 }.map(\.key)
    }

    var pages: [Page] { Self.ordered(pageCounts) }
    var elements: [Element] { Self.ordered(elementCounts) }
    var actions: [Action] { Self.ordered(actionCounts) }

    /// Every second page by page views: where operators selected something.
    var selectedScreens: Set<String> {
        var views: [String: Int] = [:]
        for (p, (n, _)) in pageCounts { views[p.screen, default: 0] += n }
        let ranked = views.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.map(\.key)
        return Set(ranked.enumerated().filter { $0.offset % 2 == 0 }.map(\.element))
    }
    var versions: [String] { versionSet.sorted { $0.value < $1.value }.map(\.key) }

    /// Distinct pages, elements and action identifiers seen.
    public var summary: (pages: Int, elements: Int, actions: Int) { (pageCounts.count, elementCounts.count, actionCounts.count) }
}

/// Generates rules files of any size from a `RuleCatalog`: every rule kind of wire format §4, about 10%
/// `identifier_regex` rules, about 10% with `app_versions`. Up to 30% of each kind are rules the traffic
/// matches, each distinct, on every second page by frequency (operators circle-select some of an app, not all
/// of it; element rules that match are scoped to their page); the others are near misses (same element path
/// and type, another index, section, content, screen or version; unknown pages, targets, class names), which
/// is what a large deployment's rules mostly are for any one app build.
///
/// With `conditions` > 0, that percentage of the rules also get a `where:` condition (any of, numeric, regex,
/// equality on properties the traffic generator sends: `$app_version`, `$screen_width`, `$network_type`, `$os`);
/// most hold for some of the events, so rules that matched may now match fewer.
public struct RuleSetGenerator {
    let catalog: RuleCatalog
    let seed: UInt64
    let conditions: Int

    /// A generator; the same catalog, seed and conditions percentage give the same text.
    public init(catalog: RuleCatalog, seed: UInt64 = 1, conditions: Int = 0) {
        self.catalog = catalog
        self.seed = seed
        self.conditions = conditions
    }

    /// A `where:` condition for rule `i` of a kind, or "" (about `conditions` percent of the rules).
    func whereYAML(_ i: Int, _ salt: UInt64) -> String {
        guard conditions > 0 else { return "" }
        var h = Hash64()
        h.add(seed); h.add(salt); h.add(UInt64(i))
        let r = h.value
        guard Int(r % 100) < conditions else { return "" }
        let versions = catalog.versions
        switch (r >> 8) % 4 {
        case 0 where !versions.isEmpty:
            let a = versions[Int((r >> 16) % UInt64(versions.count))], b = versions[Int((r >> 24) % UInt64(versions.count))]
            return ", where: {$app_version: [\(q(a)), \(q(b))]}"
        case 1:
            return ", where: {$screen_width: {\">=\": \(320 + Int((r >> 16) % 200))}}"
        case 2:
            // Distinct patterns on one property: one database, however many rules.
            return ", where: {$network_type: {regex: \(q("^(WIFI|4G)|^Z\(i)$"))}}"
        default:
            return ", where: {$os: \((r >> 16) % 2 == 0 ? "iOS" : "Android")}"
        }
    }

    /// A rules file with `count` rules, as YAML. `matching: false` leaves out the rules that match: only near
    /// misses (the cost of looking rules up, without the work of what matches).
    public func yaml(count: Int, matching: Bool = true) -> String {
        var draws: UInt64 = 0
        // Deterministic choices: a hash of (seed, count, draw number), never the system generator.
        func random() -> UInt64 {
            var h = Hash64()
            h.add(seed); h.add(UInt64(count)); h.add(draws)
            draws += 1
            return h.value
        }
        let regexQuota = count / 10
        let pageQuota = count * 15 / 100
        let actionQuota = count * 25 / 100
        let elementQuota = count - regexQuota - pageQuota - actionQuota
        func real(_ quota: Int) -> Int { quota == 0 || !matching ? 0 : max(1, quota * 3 / 10) }
        let versions = catalog.versions
        func versionsYAML(_ k: Int) -> String {
            guard random() % 10 == 0, !versions.isEmpty else { return "" }
            let v = versions[Int(random() % UInt64(versions.count))]
            let ranges = [[">=\(v)"], ["<\(v)"], ["=\(v)"], [">=1.0", "<\(v)"], [">=\(v)", "<99.0"]]
            return ", app_versions: [" + ranges[k % ranges.count].map(q).joined(separator: ", ") + "]"
        }

        let selected = catalog.selectedScreens
        var out = "version: 1\nignore_pages: [\"DebugMenuViewController\"]\npages:\n"
        let pages = catalog.pages
        var pageRules: [String] = []
        var seenPage = Set<String>()
        for p in pages where selected.contains(p.screen) && pageRules.count < real(pageQuota) {
            for body in ["screen: \(q(p.screen))"] + (p.pagePath.map { ["page_path: \(q($0))"] } ?? []) where seenPage.insert(body).inserted {
                pageRules.append(body)
            }
        }
        pageRules = Array(pageRules.prefix(real(pageQuota)))
        var k = 0
        while pageRules.count < pageQuota {
            let p = pages.isEmpty ? Page.placeholder : pages[k % pages.count]
            if k % 2 == 0 || p.pagePath == nil {
                pageRules.append("screen: \(q("Gone\(k)" + p.screen))")
            } else {
                pageRules.append("page_path: \(q(p.pagePath! + "-Gone\(k)ViewController(0)"))")
            }
            k += 1
        }
        for (i, body) in pageRules.enumerated() { out += "  - {id: \(q("p\(i)")), \(body)\(versionsYAML(i))\(whereYAML(i, 1))}\n" }

        out += "elements:\n"
        let elements = catalog.elements
        var elementRules: [String] = []
        var seenElement = Set<String>()
        let chosen = elements.filter { $0.page.map(selected.contains) ?? false }
        for e in chosen where elementRules.count < real(elementQuota) {
            for body in Self.variants(e, miss: nil) where seenElement.insert(body).inserted { elementRules.append(body) }
        }
        elementRules = Array(elementRules.prefix(real(elementQuota)))
        k = 0
        while elementRules.count < elementQuota && !elements.isEmpty {
            let variants = Self.variants(elements[k % elements.count], miss: k)
            elementRules.append(variants[(k / elements.count) % variants.count])
            k += 1
        }
        var regexRules: [String] = []
        var seenRegex = Set<String>()
        for e in chosen where regexRules.count < real(regexQuota) {
            for re in Self.regexes(e, miss: nil) where seenRegex.insert(re + e.page!).inserted { regexRules.append(q(re) + ", screen: \(q(e.page!))") }
        }
        regexRules = Array(regexRules.prefix(real(regexQuota)))
        k = 0
        while regexRules.count < regexQuota && !elements.isEmpty {
            let res = Self.regexes(elements[k % elements.count], miss: k)
            regexRules.append(q(res[(k / elements.count) % res.count]))
            k += 1
        }
        for (i, body) in elementRules.enumerated() { out += "  - {id: \(q("e\(i)")), \(body)\(versionsYAML(i))\(whereYAML(i, 2))}\n" }
        for (i, re) in regexRules.enumerated() { out += "  - {id: \(q("r\(i)")), identifier_regex: \(re)\(versionsYAML(i))\(whereYAML(i, 3))}\n" }

        // Action identifiers are the rules' ids: all distinct.
        // Real ones: PAGEPV keys and click targets (view controllers) on the selected pages.
        let onSelected = catalog.actions.filter { selected.contains(String($0.id.split(separator: "/", maxSplits: 1).first ?? "")) }
        var actionRules: [(ActionKind, String)] = Array(onSelected.prefix(real(actionQuota)).map { ($0.kind, $0.id) })
        var ids = Set(actionRules.map(\.1))
        let actions = catalog.actions
        k = 0
        while actionRules.count < actionQuota && !actions.isEmpty {
            let a = actions[k % actions.count]
            let parts = a.id.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            var id: String
            switch (a.kind, parts.count) {
            case (.pagePV, _): id = "Gone\(k)" + a.id
            case (_, 3) where k % 2 == 1: id = "\(parts[0])/\(parts[1])/\(100 + k)"
            default: id = "\(parts[0])\(k)/" + parts.dropFirst().joined(separator: "/")
            }
            if ids.insert(id).inserted { actionRules.append((a.kind, id)) }
            k += 1
        }
        out += "actions:\n"
        for kind in ActionKind.allCases {
            let mine = actionRules.enumerated().filter { $0.element.0 == kind }
            guard !mine.isEmpty else { continue }
            out += "  \(kind.rawValue):\n"
            for (i, (_, id)) in mine {
                var para = "{}"
                switch (kind, i % 3) {
                case (.action, 0): para = "{ver: {propertyName: \"$app_version\", propertyPath: \"\", containIn: \"0\"}}"
                case (.tableView, 0): para = "{title: {propertyName: \"UIView-UILabel(0)\", propertyPath: \"\", containIn: \"1\"}}"
                default: break
                }
                out += "    \(q(id)): {userDefined: {eventid: \(q("g\(i)")), pageid: \(q("\(100 + i)"))}, pagePara: \(para)\(whereYAML(i, 4))}\n"
            }
        }
        return out
    }

    typealias Page = RuleCatalog.Page
    typealias Element = RuleCatalog.Element

    /// The element rules an observed element supports (exact), or near misses of them (`miss` set).
    static func variants(_ e: Element, miss: Int?) -> [String] {
        let base = "path: \(q(e.path)), type: \(q(e.type))"
        var out: [String] = []
        let m = miss ?? 0
        // Rules that match are scoped to their page; near misses alternate between scoped and not.
        let scope = e.page.map { ", screen: \(q(miss == nil ? $0 : "Gone\(m)" + $0))" } ?? ""
        let some = miss.map { $0 % 2 == 0 } ?? true ? scope : ""
        if let index = e.index {
            out.append(base + some + ", index: \(miss == nil ? index : index + 100 + m)")
            out.append(base + scope + ", index: \(index)")
        }
        if let content = e.content { out.append(base + some + ", content: \(q(miss == nil ? content : content + " #\(m)"))") }
        if let section = e.section, let row = e.row {
            out.append(base + some + ", section: \(miss == nil ? section : section + 20 + m)")
            out.append(base + scope + ", section: \(section), row: \(miss == nil ? row : row + 50 + m)")
        }
        if let key = e.items.first {
            out.append(base + some + ", content_key: \(q(miss == nil ? key : key + "#\(m)")), group_by_content: true")
            out.append(base + some + ", content_key: \(q(key)), content: \(q(miss == nil ? e.itemValues[0] : e.itemValues[0] + " #\(m)"))")
        }
        if out.isEmpty || e.page != nil { out.append(base + scope) }
        return out
    }

    /// Regexes over the identifier of an observed element (exact), or near misses of them.
    static func regexes(_ e: Element, miss: Int?) -> [String] {
        let type = miss.map { e.type + "X\($0)" } ?? e.type
        let content = e.content.map(escapeRegex) ?? "null"
        var out = ["^" + escapeRegex(e.path) + "-" + escapeRegex(type) + "\\(" + (e.section != nil ? "\\d+-\\d+" : "\\d*") + "\\)_\\[.*\\]$"]
        if let s = e.section {
            out.append("^UIWindow-.*-" + escapeRegex(type) + "\\(\(miss.map { s + 20 + $0 } ?? s)-\\d+\\)_\\[.*\\]$")
        } else {
            out.append("-" + escapeRegex(type) + "\\(\\d*\\)_\\[" + (miss.map { content + "\($0)" } ?? content) + "\\]$")
        }
        out.append("(UIView|UIScrollView)-" + escapeRegex(type) + "\\(")
        return out
    }
}

extension RuleCatalog.Page {
    static let placeholder = RuleCatalog.Page(screen: "ViewController", pagePath: nil)
}

/// A YAML double-quoted scalar (JSON string syntax, which YAML accepts).
private func q(_ s: String) -> String { JSONOut.quoted(s) }

/// `s` as a regex matching it literally.
func escapeRegex(_ s: String) -> String {
    var out = ""
    for c in s {
        if "\\^$.|?*+()[]{}".contains(c) { out.append("\\") }
        out.append(c)
    }
    return out
}
