import MaidianEvents

/// The role of an event, by its name (wire format §3).
public enum EventRole: UInt8, Sendable {
    /// Not matched against rules.
    case other = 0
    /// `$AppViewScreen`, `enter_view`.
    case pageEnter
    /// `$AppClick`.
    case click

    /// The role of an event name (the defaults of wire format §3).
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
    /// Other properties `where:` conditions read: name and JSON value text (`"Phones"` with quotes, `12.5`).
    public var properties: [(String, String)] = []

    /// Empty facts.
    public init() {}

    /// The page: `$screen_name`, else `current_url`.
    public var page: String? { screenName ?? currentURL }

    /// `{$element_path}-{$element_type}({position})_[{content}]` (wire format §3).
    public var elementIdentifier: String {
        let position = elementPosition ?? elementIndex ?? ""
        return "\(elementPath ?? "")-\(elementType ?? "")(\(position))_[\(content ?? "null")]"
    }

    /// The click's action identifiers with the table each belongs to (wire format §3).
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

/// Rules compiled for matching (wire format §3 and §4). Every exact field of a rule is part of a hash key, so
/// an event finds its candidates with a few look-ups whatever the number of rules; all `identifier_regex`
/// rules are one Hyperscan database, scanned once per click. See `RuleIndex`.
public final class RuleMatcher: Sendable {
    /// Pages ignored by default (wire format §3).
    public static let defaultIgnoredPages: [String] = ["UINavigationController", "UITabBarController", "UICompatibilityInputViewController"]

    /// The rules as loaded.
    public let rules: RulesFile
    /// Defaults plus the file's `ignore_pages`.
    public let ignoredPages: Set<String>
    /// The compiled rules.
    let index: RuleIndex
    /// Entries of the `MatchCache` a user of the matcher keeps (0: none).
    public let matchCacheSlots: Int
    /// What each hit writes into an event (ids, metrics, grouping keys, action parameters), pre-serialized.
    public let outputs: HitOutputs

    /// Compiles `rules`. Each regex was checked when the file was loaded; compiling them together can still
    /// fail on Hyperscan's size limits (a `PipelineError` at the rule). `regexCache` bounds the cache of regex
    /// results by element identifier (entries; 0: scan every click); `matchCache` the size of the `MatchCache`s
    /// users of the matcher keep (entries; 0: none).
    public init(rules: RulesFile, regexCache: Int = 4096, matchCache: Int = 4096) throws {
        self.rules = rules
        matchCacheSlots = matchCache
        let ignored = RuleMatcher.defaultIgnoredPages + rules.ignorePages
        ignoredPages = Set(ignored)
        index = try RuleIndex(rules: rules, ignoredPages: ignored, regexCache: regexCache)
        outputs = HitOutputs(rules: rules)
    }

    /// Whether the matcher has no rules at all.
    public var isEmpty: Bool { rules.pages.isEmpty && rules.elements.isEmpty && rules.actions.isEmpty }

    /// Whether `page` is ignored (the same bytes as an ignored page).
    public func isIgnored(page: String?) -> Bool {
        guard var page else { return false }
        return page.withUTF8 { isIgnoredRaw(ByteView($0.baseAddress ?? emptyBytes, $0.count)) }
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
    /// The facts are laid out as bytes and matched by `matchRaw`: one implementation of the semantics.
    /// `conditions`: check `where:` conditions on `facts.properties` (false: the caller checks them itself).
    public func match(role: EventRole, facts: EventFacts, into hits: inout [Int], conditions: Bool = true) {
        guard role != .other else { return }
        let first = hits.count
        defer {
            if conditions && hasConditions {
                var props = FactsProperties(facts)
                var scratch = ConditionScratch()
                applyConditions(&hits, from: first, properties: &props, lib: .absent, scratch: &scratch)
            }
        }
        var storage: [UInt8] = []
        var spans: [Range<Int>?] = []
        func put(_ s: String?) {
            guard let s else { spans.append(nil); return }
            let start = storage.count
            storage.append(contentsOf: s.utf8)
            spans.append(start..<storage.count)
        }
        for s in [facts.screenName, facts.currentURL, facts.pagePath, facts.appVersion, facts.elementPath, facts.elementType,
                  facts.elementPosition, facts.elementIndex, facts.content, facts.elementKind, facts.target, facts.action,
                  facts.container, facts.tag] { put(s) }
        if facts.contentItems.isEmpty {
            spans.append(nil)
        } else {
            let start = storage.count
            storage.append(0x7B)
            for (n, (k, v)) in facts.contentItems.enumerated() {
                if n > 0 { storage.append(0x2C) }
                JSONOut.appendString(k, to: &storage)
                storage.append(0x3A)
                JSONOut.appendString(v, to: &storage)
            }
            storage.append(0x7D)
            spans.append(start..<storage.count)
        }
        storage.withUnsafeBufferPointer { b in
            func raw(_ n: Int) -> ByteView {
                guard let r = spans[n] else { return .absent }
                return ByteView(b.baseAddress.map { $0 + r.lowerBound } ?? emptyBytes, r.count)
            }
            var f = RawFacts()
            f.screenName = raw(0); f.currentURL = raw(1); f.pagePath = raw(2); f.appVersion = raw(3)
            f.elementPath = raw(4); f.elementType = raw(5); f.elementPosition = raw(6); f.elementIndex = raw(7)
            f.content = raw(8); f.elementKind = raw(9); f.target = raw(10); f.action = raw(11)
            f.container = raw(12); f.tag = raw(13); f.contentObject = raw(14)
            var buffer: [UInt8] = []
            matchRaw(role: role, facts: f, into: &hits, buffer: &buffer)
        }
    }
}
