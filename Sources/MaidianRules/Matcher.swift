import MaidianEvents

/// The role of an event, by its name (SPEC section 3).
public enum EventRole: UInt8, Sendable {
    /// Not matched against rules.
    case other = 0
    /// `$AppViewScreen`, `enter_view`.
    case pageEnter
    /// `$AppClick`.
    case click

    /// The role of an event name (the defaults of SPEC section 3).
    public static func of(_ name: String) -> EventRole {
        switch name {
        case "$AppViewScreen", "enter_view": return .pageEnter
        case "$AppClick": return .click
        default: return .other
        }
    }
}

/// What the matcher needs to know about one event: the few properties, as read from it.
public struct EventFacts: Sendable {
    /// `$screen_name`.
    public var screenName: String?
    /// `current_url`.
    public var currentURL: String?
    /// `$page_path`.
    public var pagePath: String?
    /// `$app_version` from properties, else from `lib`.
    public var appVersion: String?
    /// `$element_path`.
    public var elementPath: String?
    /// `$element_type`.
    public var elementType: String?
    /// `$element_position` (`section-row`).
    public var elementPosition: String?
    /// `$element_index` as written.
    public var elementIndex: String?
    /// `$element_content` when it is a string.
    public var content: String?
    /// `$element_content` items when it is an object (relative sub-path → text).
    public var contentItems: [(String, String)] = []
    /// `$element_kind`.
    public var elementKind: String?
    /// `$element_target`.
    public var target: String?
    /// `$element_action`.
    public var action: String?
    /// `$element_container`.
    public var container: String?
    /// `$element_tag` as written (default 0).
    public var tag: String?

    /// Empty facts.
    public init() {}

    /// The page: `$screen_name`, else `current_url`.
    public var page: String? { screenName ?? currentURL }

    /// `{$element_path}-{$element_type}({position})_[{content}]` (SPEC section 3).
    public var elementIdentifier: String {
        let position = elementPosition ?? elementIndex ?? ""
        return "\(elementPath ?? "")-\(elementType ?? "")(\(position))_[\(content ?? "null")]"
    }

    /// The click's action identifiers with the table each belongs to (SPEC section 3).
    public var actionIdentifiers: [(ActionKind, String)] {
        guard let target else { return [] }
        let tag = self.tag ?? "0"
        switch elementKind {
        case "control":
            guard let action else { return [] }
            return [(.action, "\(target)/\(action)/\(tag)"), (.action, "\(target)/\(action)")]
        case "gesture":
            guard let action else { return [] }
            return [(.gesture, "\(target)/\(action)")]
        case "table", "collection":
            guard let container else { return [] }
            return [(.tableView, "\(target)/\(container)/\(tag)")]
        default:
            return []
        }
    }

    /// The text of composite content item `key`.
    public func contentItem(_ key: String) -> String? {
        for (k, v) in contentItems where k == key { return v }
        return nil
    }
}

/// Rules compiled for matching: page rules by screen and page path, element rules by (path, type), action
/// rules by identifier, regex rules tried for clicks only.
public final class RuleMatcher: Sendable {
    /// Pages ignored by default (SPEC section 3).
    public static let defaultIgnoredPages: [String] = ["UINavigationController", "UITabBarController", "UICompatibilityInputViewController"]

    /// The rules as loaded.
    public let rules: RulesFile
    /// Defaults plus the file's `ignore_pages`.
    public let ignoredPages: Set<String>
    private let pageByScreen: [String: [Int]]
    private let pageByPath: [String: [Int]]
    private let elementByKey: [String: [Int]]
    private let regexRules: [(Int, PosixRegex)]
    private let clickActions: [String: [Int]]
    private let pageActions: [String: [Int]]
    /// The same tables keyed by raw bytes, for `matchRaw`.
    let tables: RawTables

    /// Compiles `rules` (regexes were checked when the file was loaded).
    public init(rules: RulesFile) throws {
        self.rules = rules
        ignoredPages = Set(RuleMatcher.defaultIgnoredPages + rules.ignorePages)
        var byScreen: [String: [Int]] = [:], byPath: [String: [Int]] = [:]
        for (i, r) in rules.pages.enumerated() {
            if let s = r.screen { byScreen[s, default: []].append(i) } else if let p = r.pagePath { byPath[p, default: []].append(i) }
        }
        var byKey: [String: [Int]] = [:]
        var pairs: [(String, String, Int)] = []
        var regexes: [(Int, PosixRegex)] = []
        for (i, r) in rules.elements.enumerated() {
            if let re = r.identifierRegex {
                regexes.append((i, try PosixRegex(re)))
            } else if let path = r.path, let type = r.type {
                byKey[path + "\u{0}" + type, default: []].append(i)
                pairs.append((path, type, i))
            }
        }
        var click: [String: [Int]] = [:], page: [String: [Int]] = [:]
        for (i, a) in rules.actions.enumerated() {
            if a.kind == .pagePV { page[a.id, default: []].append(i) } else { click[a.id, default: []].append(i) }
        }
        pageByScreen = byScreen
        pageByPath = byPath
        elementByKey = byKey
        regexRules = regexes
        clickActions = click
        pageActions = page
        var ids: [[UInt8]] = []
        for id in rules.pages.map(\.id) + rules.elements.map(\.id) + rules.actions.map(\.id) {
            var out: [UInt8] = []
            JSONOut.appendString(id, to: &out)
            ids.append(out)
        }
        tables = RawTables(
            ignored: ByteTable(Dictionary(ignoredPages.map { ($0, [0]) }, uniquingKeysWith: { a, _ in a })),
            pageByScreen: ByteTable(byScreen), pageByPath: ByteTable(byPath), pageActions: ByteTable(page),
            clickActions: ByteTable(click), elementByKey: ByteTable(pairs: pairs, slow: byKey), regexRules: regexes,
            regexAffixes: regexes.map { regexAffixes($0.1.pattern) }, idJSON: ids)
    }

    /// Whether the matcher has no rules at all.
    public var isEmpty: Bool { rules.pages.isEmpty && rules.elements.isEmpty && rules.actions.isEmpty }

    /// Whether `page` is ignored.
    public func isIgnored(page: String?) -> Bool {
        guard let page else { return false }
        return ignoredPages.contains(page)
    }

    /// The id of a hit (rule order: pages, then elements, then actions).
    public func id(of hit: Int) -> String {
        if hit < rules.pages.count { return rules.pages[hit].id }
        let e = hit - rules.pages.count
        if e < rules.elements.count { return rules.elements[e].id }
        return rules.actions[e - rules.elements.count].id
    }

    /// The action rule of a hit, if it is one.
    public func action(of hit: Int) -> ActionRule? {
        let a = hit - rules.pages.count - rules.elements.count
        return a >= 0 ? rules.actions[a] : nil
    }

    /// Appends the rules event `facts` of role `role` matches to `hits` (in rule order: pages, elements, actions).
    public func match(role: EventRole, facts: EventFacts, into hits: inout [Int]) {
        let start = hits.count
        guard role != .other, !isIgnored(page: facts.page) else { return }
        var versionParsed = false
        var version: [Int]? = nil
        func versionHolds(_ conditions: [VersionCondition]) -> Bool {
            if conditions.isEmpty { return true }
            if !versionParsed {
                versionParsed = true
                version = facts.appVersion.flatMap { VersionCondition.parse(Substring($0)) }
            }
            guard let v = version else { return false }
            return conditions.allSatisfy { $0.holds(v) }
        }
        let pageCount = rules.pages.count, elementCount = rules.elements.count
        switch role {
        case .pageEnter:
            if let page = facts.page, let list = pageByScreen[page] {
                for i in list {
                    let r = rules.pages[i]
                    if let p = r.pagePath, p != facts.pagePath { continue }
                    if versionHolds(r.appVersions) { hits.append(i) }
                }
            }
            if let path = facts.pagePath, let list = pageByPath[path] {
                for i in list where versionHolds(rules.pages[i].appVersions) { hits.append(i) }
            }
            if let page = facts.page, let list = pageActions[page] {
                for i in list { hits.append(pageCount + elementCount + i) }
            }
        case .click:
            if let path = facts.elementPath, let type = facts.elementType, let list = elementByKey[path + "\u{0}" + type] {
                for i in list where elementMatches(rules.elements[i], facts) && versionHolds(rules.elements[i].appVersions) {
                    hits.append(pageCount + i)
                }
            }
            if !regexRules.isEmpty {
                let identifier = facts.elementIdentifier
                identifier.withCString { c in
                    for (i, re) in regexRules where re.matches(cString: c) {
                        let r = rules.elements[i]
                        if elementMatches(r, facts) && versionHolds(r.appVersions) { hits.append(pageCount + i) }
                    }
                }
            }
            for (kind, identifier) in facts.actionIdentifiers {
                guard let list = clickActions[identifier] else { continue }
                for i in list where rules.actions[i].kind == kind && !hits[start...].contains(pageCount + elementCount + i) {
                    hits.append(pageCount + elementCount + i)
                }
            }
        case .other:
            break
        }
        if hits.count - start > 1 { hits[start...].sort() }
    }

    /// The conditions of an element rule other than its index key and versions.
    func elementMatches(_ r: ElementRule, _ f: EventFacts) -> Bool {
        if let p = r.path, p != f.elementPath { return false }
        if let t = r.type, t != f.elementType { return false }
        if let s = r.screen, s != f.page { return false }
        if let p = r.pagePath, p != f.pagePath { return false }
        if let index = r.index {
            guard let text = f.elementIndex, Int(text) == index else { return false }
        }
        if r.section != nil || r.row != nil {
            guard let pos = f.elementPosition else { return false }
            let parts = pos.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let s = Int(parts[0]), let row = Int(parts[1]) else { return false }
            if let want = r.section, want != s { return false }
            if let want = r.row, want != row { return false }
        }
        if let key = r.contentKey {
            guard let item = f.contentItem(key) else { return false }
            if let want = r.content, want != item { return false }
        } else {
            if let want = r.content, want != f.content { return false }
            if r.groupByContent && f.content == nil { return false }
        }
        return true
    }
}
