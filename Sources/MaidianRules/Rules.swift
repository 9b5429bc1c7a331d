import MaidianConfig

/// A parsed rules file (wire format §4): what operators circle-selected.
public struct RulesFile: Sendable, Decodable {
    /// The format version (1).
    public var version: Int
    /// Pages never counted, paired or matched, on top of the defaults.
    public var ignorePages: [String]
    /// Page rules.
    public var pages: [PageRule]
    /// Element rules.
    public var elements: [ElementRule]
    /// Action rules (the config-table format), in file order.
    public var actions: [ActionRule]

    enum CodingKeys: String, CodingKey {
        case version, ignorePages = "ignore_pages", pages, elements, actions
    }

    /// An empty rules file.
    public init(version: Int = 1, ignorePages: [String] = [], pages: [PageRule] = [], elements: [ElementRule] = [], actions: [ActionRule] = []) {
        self.version = version
        self.ignorePages = ignorePages
        self.pages = pages
        self.elements = elements
        self.actions = actions
    }

    /// Decodes and checks a rules file (duplicate ids are reported at the second id).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decodeIfPresent(Int.self, forKey: .version) ?? 1
        if version != 1 { throw decoder.fail("unsupported rules version \(version)", forKey: CodingKeys.version, hint: "expected 1", code: .badValue) }
        ignorePages = try c.decodeIfPresent([String].self, forKey: .ignorePages) ?? []
        pages = try c.decodeIfPresent([PageRule].self, forKey: .pages) ?? []
        elements = try c.decodeIfPresent([ElementRule].self, forKey: .elements) ?? []
        actions = try c.decodeIfPresent(ActionTable.self, forKey: .actions)?.rules ?? []
        var seen: [String: SourceLocation?] = [:]
        var errors = PipelineErrors.Collector()
        let all: [(String, SourceLocation?)] = pages.map { ($0.id, $0.idLocation) } + elements.map { ($0.id, $0.idLocation) }
            + actions.map { ($0.id, $0.idLocation) }
        for (id, loc) in all {
            if let first = seen[id] {
                errors.record(PipelineError(
                    code: .badValue, message: "duplicate rule id '\(id)'", location: loc,
                    hint: first.map { "first defined at \($0)" }))
            } else {
                seen[id] = loc
            }
        }
        try errors.check()
    }

    /// Loads and checks the rules file at `path` (YAML or JSON). Errors carry file:line:column.
    public static func load(path: String) throws -> RulesFile {
        try ConfigDecoder().decode(RulesFile.self, from: ConfigDocument.load(path: path, environment: [:]))
    }

    /// Parses rules from text (`file` names it in errors).
    public static func parse(_ text: String, file: String = "rules.yaml") throws -> RulesFile {
        try ConfigDecoder().decode(RulesFile.self, from: ConfigDocument.parse(yaml: text, file: file, environment: [:]))
    }
}

/// One `app_versions` condition: an operator and a dotted number.
public struct VersionCondition: Sendable, Equatable {
    /// The comparison.
    public enum Op: String, Sendable { case eq = "=", ge = ">=", gt = ">", le = "<=", lt = "<" }
    /// The comparison.
    public var op: Op
    /// The dotted number's parts.
    public var parts: [Int]

    /// Parses `>=3.2.0`, `<4`, `3.2.1` (bare means `=`); nil when malformed.
    public init?(_ text: String) {
        var s = Substring(text.trimmingCharacters(in: " "))
        var op = Op.eq
        for candidate in [Op.ge, .le, .gt, .lt, .eq] where s.hasPrefix(candidate.rawValue) {
            op = candidate
            s = s.dropFirst(candidate.rawValue.count)
            break
        }
        s = Substring(String(s).trimmingCharacters(in: " "))
        guard let parts = VersionCondition.parse(s) else { return nil }
        self.op = op
        self.parts = parts
    }

    /// Dotted decimal parts; nil unless every part is digits.
    public static func parse(_ s: Substring) -> [Int]? {
        guard !s.isEmpty else { return nil }
        var out: [Int] = []
        for part in s.split(separator: ".", omittingEmptySubsequences: false) {
            guard !part.isEmpty, part.count <= 9, part.allSatisfy({ $0.isASCII && $0.isNumber }), let v = Int(part) else { return nil }
            out.append(v)
        }
        return out
    }

    /// Compares dotted numbers, missing parts counting as 0.
    public static func compare(_ a: [Int], _ b: [Int]) -> Int {
        for i in 0..<max(a.count, b.count) {
            let x = i < a.count ? a[i] : 0, y = i < b.count ? b[i] : 0
            if x != y { return x < y ? -1 : 1 }
        }
        return 0
    }

    /// Whether `version` (dotted parts) satisfies this condition.
    public func holds(_ version: [Int]) -> Bool {
        holds(order: VersionCondition.compare(version, parts))
    }

    /// Whether a version that compares `order` (-1, 0, 1) with `parts` satisfies this condition.
    func holds(order c: Int) -> Bool {
        switch op {
        case .eq: return c == 0
        case .ge: return c >= 0
        case .gt: return c > 0
        case .le: return c <= 0
        case .lt: return c < 0
        }
    }
}

extension String {
    fileprivate func trimmingCharacters(in c: Character) -> String {
        var s = Substring(self)
        while s.first == c { s = s.dropFirst() }
        while s.last == c { s = s.dropLast() }
        return String(s)
    }
}

private func decodeVersions<K: CodingKey>(_ c: KeyedDecodingContainer<K>, _ key: K, _ decoder: any Decoder) throws -> [VersionCondition] {
    guard let texts = try c.decodeIfPresent([String].self, forKey: key) else { return [] }
    var out: [VersionCondition] = []
    for (i, t) in texts.enumerated() {
        guard let v = VersionCondition(t) else {
            let loc = decoder.configNode?[key.stringValue]?.elements?[i].location ?? decoder.configLocation(forKey: key)
            throw PipelineError(code: .badValue, message: "bad version range '\(t)' in 'app_versions'", location: loc,
                                hint: "use =, >=, >, <=, < and a dotted number, e.g. >=3.2.0")
        }
        out.append(v)
    }
    return out
}

/// The exact string of a key that may hold `{regex: ...}` instead (`regex`: what `Condition.regexValue` read).
private func decodeExact<K: CodingKey>(_ c: KeyedDecodingContainer<K>, _ key: K, regex: String?) throws -> String? {
    if regex != nil {
        _ = try c.decodeIfPresent(ConfigNode.self, forKey: key)  // the key is known: read as a regex
        return nil
    }
    return try c.decodeIfPresent(String.self, forKey: key)
}

private func decodeConditions<K: CodingKey>(_ c: KeyedDecodingContainer<K>, _ key: K) throws -> [Condition] {
    guard let node = try c.decodeIfPresent(ConfigNode.self, forKey: key) else { return [] }
    return try Condition.parseWhere(node)
}

/// A page rule: page-enter events of a page (`screen`) or page path (`page_path`).
public struct PageRule: Sendable, Decodable {
    /// The rule id.
    public var id: String
    /// Exact page (`$screen_name`, else `current_url`).
    public var screen: String?
    /// Exact `$page_path`.
    public var pagePath: String?
    /// A regex over `$page_path` (`page_path: {regex: ...}`).
    public var pagePathRegex: String?
    /// All must hold.
    public var appVersions: [VersionCondition]
    /// `where:` conditions on properties; all must hold.
    public var conditions: [Condition]
    /// `any_of`: the rule's drawings, each merged with the rule's other keys (empty without `any_of`). An event
    /// that matches any of them matches the rule once.
    public var drawings: [PageRule] = []
    /// Where the id is written.
    public var idLocation: SourceLocation?

    enum CodingKeys: String, CodingKey {
        case id, screen, pagePath = "page_path", appVersions = "app_versions", conditions = "where", anyOf = "any_of"
    }

    /// What the index looks up: the drawings, or the rule itself.
    var definitions: [PageRule] { drawings.isEmpty ? [self] : drawings }

    /// A page rule.
    public init(id: String, screen: String? = nil, pagePath: String? = nil, pagePathRegex: String? = nil,
                appVersions: [VersionCondition] = [], conditions: [Condition] = []) {
        self.id = id; self.screen = screen; self.pagePath = pagePath; self.pagePathRegex = pagePathRegex
        self.appVersions = appVersions; self.conditions = conditions
    }

    /// The conditions checked after the index found the rule: `where:`, and the page path regex of a rule
    /// keyed by `screen` (a rule with only a page path regex is found by scanning the page path).
    var postConditions: [Condition] {
        guard let pagePathRegex, screen != nil else { return conditions }
        return [Condition(.property("$page_path"), [.regex(pagePathRegex)])] + conditions
    }

    /// Decodes and checks a page rule.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        idLocation = decoder.configLocation(forKey: CodingKeys.id)
        screen = try c.decodeIfPresent(String.self, forKey: .screen)
        pagePathRegex = try Condition.regexValue(decoder, CodingKeys.pagePath)
        pagePath = try decodeExact(c, .pagePath, regex: pagePathRegex)
        appVersions = try decodeVersions(c, .appVersions, decoder)
        conditions = try decodeConditions(c, .conditions)
        if c.contains(.anyOf) {
            if screen != nil || pagePath != nil || pagePathRegex != nil {
                throw decoder.fail("with 'any_of', 'screen' and 'page_path' go in each drawing", forKey: CodingKeys.anyOf)
            }
            let list = try c.decode([PageDrawing].self, forKey: .anyOf)
            if list.isEmpty { throw decoder.fail("'any_of' needs at least one drawing", forKey: CodingKeys.anyOf, code: .badValue) }
            drawings = list.map { d in
                var r = self
                r.screen = d.screen; r.pagePath = d.pagePath; r.pagePathRegex = d.pagePathRegex
                r.appVersions += d.appVersions
                return r
            }
        } else if screen == nil && pagePath == nil && pagePathRegex == nil {
            throw decoder.fail("page rule '\(id)' needs 'screen' or 'page_path'", code: .missingKey)
        }
    }
}

/// An element rule: click events on an element (or whose element identifier matches a regex).
public struct ElementRule: Sendable, Decodable {
    /// The rule id.
    public var id: String
    /// Optional page scope: exact page.
    public var screen: String?
    /// Optional page scope: exact `$page_path`.
    public var pagePath: String?
    /// Exact `$element_path`.
    public var path: String?
    /// Exact `$element_type`.
    public var type: String?
    /// Exact `$element_index`.
    public var index: Int?
    /// Exact section of `$element_position`.
    public var section: Int?
    /// Exact row of `$element_position`.
    public var row: Int?
    /// Exact content (or content item with `contentKey`).
    public var content: String?
    /// Which item of a composite content `content` / grouping refers to.
    public var contentKey: String?
    /// One count per distinct content value; matches only events with the content item.
    public var groupByContent: Bool
    /// A regex over the element identifier (Hyperscan's PCRE dialect, see `RegexSet`).
    public var identifierRegex: String?
    /// A regex over `$page_path` (`page_path: {regex: ...}`).
    public var pagePathRegex: String?
    /// A regex over the content, or the content item `contentKey` (`content: {regex: ...}`).
    public var contentRegex: String?
    /// All must hold.
    public var appVersions: [VersionCondition]
    /// `where:` conditions on properties; all must hold.
    public var conditions: [Condition]
    /// `any_of`: the rule's drawings, each merged with the rule's other keys (empty without `any_of`). An event
    /// that matches any of them matches the rule once.
    public var drawings: [ElementRule] = []
    /// Where the id is written.
    public var idLocation: SourceLocation?

    enum CodingKeys: String, CodingKey {
        case id, screen, pagePath = "page_path", path, type, index, section, row, content
        case contentKey = "content_key", groupByContent = "group_by_content", identifierRegex = "identifier_regex"
        case appVersions = "app_versions", conditions = "where", anyOf = "any_of"
    }

    /// What the index looks up: the drawings, or the rule itself.
    var definitions: [ElementRule] { drawings.isEmpty ? [self] : drawings }

    /// The conditions checked after the index found the rule: regexes on the page path and content, then `where:`.
    var postConditions: [Condition] {
        var out: [Condition] = []
        if let pagePathRegex { out.append(Condition(.property("$page_path"), [.regex(pagePathRegex)])) }
        if let contentRegex {
            out.append(Condition(contentKey.map { .contentItem($0) } ?? .property("$element_content"), [.regex(contentRegex)]))
        }
        return out + conditions
    }

    /// An element rule.
    public init(id: String, screen: String? = nil, pagePath: String? = nil, path: String? = nil, type: String? = nil,
                index: Int? = nil, section: Int? = nil, row: Int? = nil, content: String? = nil, contentKey: String? = nil,
                groupByContent: Bool = false, identifierRegex: String? = nil, appVersions: [VersionCondition] = []) {
        self.id = id; self.screen = screen; self.pagePath = pagePath; self.path = path; self.type = type
        self.index = index; self.section = section; self.row = row; self.content = content; self.contentKey = contentKey
        self.groupByContent = groupByContent; self.identifierRegex = identifierRegex; self.appVersions = appVersions
        conditions = []
    }

    /// Decodes and checks an element rule (contradictions, regex syntax).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        idLocation = decoder.configLocation(forKey: CodingKeys.id)
        screen = try c.decodeIfPresent(String.self, forKey: .screen)
        pagePathRegex = try Condition.regexValue(decoder, CodingKeys.pagePath)
        pagePath = try decodeExact(c, .pagePath, regex: pagePathRegex)
        path = try c.decodeIfPresent(String.self, forKey: .path)
        type = try c.decodeIfPresent(String.self, forKey: .type)
        index = try c.decodeIfPresent(Int.self, forKey: .index)
        section = try c.decodeIfPresent(Int.self, forKey: .section)
        row = try c.decodeIfPresent(Int.self, forKey: .row)
        contentRegex = try Condition.regexValue(decoder, CodingKeys.content)
        content = try decodeExact(c, .content, regex: contentRegex)
        contentKey = try c.decodeIfPresent(String.self, forKey: .contentKey)
        groupByContent = try c.decodeIfPresent(Bool.self, forKey: .groupByContent) ?? false
        identifierRegex = try c.decodeIfPresent(String.self, forKey: .identifierRegex)
        appVersions = try decodeVersions(c, .appVersions, decoder)
        conditions = try decodeConditions(c, .conditions)
        if row != nil && section == nil {
            throw decoder.fail("'row' needs 'section'", forKey: CodingKeys.row, hint: "a row is counted within a section")
        }
        if index != nil && section != nil {
            throw decoder.fail("'index' and 'section' contradict each other", forKey: CodingKeys.index,
                               hint: "'index' is for independent elements, 'section'/'row' for list cells")
        }
        if contentKey != nil && content == nil && contentRegex == nil && !groupByContent && !c.contains(.anyOf) {
            throw decoder.fail("'content_key' needs 'content' or 'group_by_content'", forKey: CodingKeys.contentKey)
        }
        if groupByContent && contentKey == nil && content != nil {
            throw decoder.fail("'group_by_content' and 'content' contradict each other", forKey: CodingKeys.groupByContent)
        }
        if let identifierRegex {
            // The engine and flags of the matcher's multi-pattern scan, so a rule that loads also matches.
            do { try RegexSet.check(identifierRegex) } catch let e as RegexSet.CompileError {
                throw decoder.fail("bad regex in 'identifier_regex': \(e.message)", forKey: CodingKeys.identifierRegex, code: .badValue)
            }
        }
        if c.contains(.anyOf) {
            let list = try c.decode([ElementDrawing].self, forKey: .anyOf)
            if list.isEmpty { throw decoder.fail("'any_of' needs at least one drawing", forKey: CodingKeys.anyOf, code: .badValue) }
            let base = self
            drawings = try list.map { try base.merged(with: $0) }
        } else if identifierRegex == nil && (path == nil || type == nil) {
            throw decoder.fail("element rule '\(id)' needs 'path' and 'type', or 'identifier_regex'", code: .missingKey)
        }
    }
}

/// One drawing of an element rule's `any_of`: the keys that say which element it is.
struct ElementDrawing: Decodable {
    var screen, pagePath, path, type, content, contentKey, identifierRegex: String?
    var index, section, row: Int?
    var appVersions: [VersionCondition]
    var location: SourceLocation?
    var node: ConfigNode?

    enum CodingKeys: String, CodingKey {
        case screen, pagePath = "page_path", path, type, index, section, row, content
        case contentKey = "content_key", identifierRegex = "identifier_regex", appVersions = "app_versions"
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        location = decoder.configLocation
        node = decoder.configNode
        for key in [CodingKeys.pagePath, .content] where decoder.configNode?[key.stringValue]?.isMapping == true {
            throw decoder.fail("a regex on '\(key.stringValue)' goes on the rule, not in 'any_of'", forKey: key,
                               hint: "it then applies to every drawing")
        }
        screen = try c.decodeIfPresent(String.self, forKey: .screen)
        pagePath = try c.decodeIfPresent(String.self, forKey: .pagePath)
        path = try c.decodeIfPresent(String.self, forKey: .path)
        type = try c.decodeIfPresent(String.self, forKey: .type)
        index = try c.decodeIfPresent(Int.self, forKey: .index)
        section = try c.decodeIfPresent(Int.self, forKey: .section)
        row = try c.decodeIfPresent(Int.self, forKey: .row)
        content = try c.decodeIfPresent(String.self, forKey: .content)
        contentKey = try c.decodeIfPresent(String.self, forKey: .contentKey)
        identifierRegex = try c.decodeIfPresent(String.self, forKey: .identifierRegex)
        appVersions = try decodeVersions(c, .appVersions, decoder)
        if let identifierRegex {
            do { try RegexSet.check(identifierRegex) } catch let e as RegexSet.CompileError {
                throw decoder.fail("bad regex in 'identifier_regex': \(e.message)", forKey: CodingKeys.identifierRegex, code: .badValue)
            }
        }
    }

    func at(_ key: String) -> SourceLocation? { node?.location(ofKey: key) ?? location }
}

extension ElementRule {
    /// The rule with drawing `d`'s keys: a key may be on the rule or in the drawing, not both.
    fileprivate func merged(with d: ElementDrawing) throws -> ElementRule {
        var r = self
        r.drawings = []
        func take<T>(_ field: inout T?, _ value: T?, _ key: String) throws {
            guard let value else { return }
            if field != nil {
                throw PipelineError(code: .badValue, message: "'\(key)' is both on the rule and in 'any_of'", location: d.at(key),
                                    hint: "the rule's keys apply to every drawing")
            }
            field = value
        }
        try take(&r.screen, d.screen, "screen")
        try take(&r.pagePath, d.pagePath, "page_path")
        try take(&r.path, d.path, "path")
        try take(&r.type, d.type, "type")
        try take(&r.index, d.index, "index")
        try take(&r.section, d.section, "section")
        try take(&r.row, d.row, "row")
        try take(&r.content, d.content, "content")
        try take(&r.contentKey, d.contentKey, "content_key")
        try take(&r.identifierRegex, d.identifierRegex, "identifier_regex")
        if r.pagePath != nil && r.pagePathRegex != nil {
            throw PipelineError(code: .badValue, message: "'page_path' is both on the rule and in 'any_of'", location: d.at("page_path"))
        }
        if r.content != nil && r.contentRegex != nil {
            throw PipelineError(code: .badValue, message: "'content' is both on the rule and in 'any_of'", location: d.at("content"))
        }
        r.appVersions += d.appVersions
        func fail(_ message: String, _ key: String?, hint: String? = nil) -> PipelineError {
            PipelineError(code: .badValue, message: message, location: key.map { d.at($0) } ?? d.location, hint: hint)
        }
        if r.identifierRegex == nil && (r.path == nil || r.type == nil) {
            throw fail("a drawing of '\(id)' needs 'path' and 'type', or 'identifier_regex'", nil)
        }
        if r.row != nil && r.section == nil { throw fail("'row' needs 'section'", "row", hint: "a row is counted within a section") }
        if r.index != nil && r.section != nil { throw fail("'index' and 'section' contradict each other", d.index != nil ? "index" : "section") }
        if d.contentKey != nil && groupByContent {
            throw fail("with 'group_by_content', 'content_key' goes on the rule", "content_key", hint: "a rule counts by one content")
        }
        if r.contentKey != nil && r.content == nil && r.contentRegex == nil && !r.groupByContent {
            throw fail("'content_key' needs 'content' or 'group_by_content'", "content_key")
        }
        if r.groupByContent && r.contentKey == nil && r.content != nil {
            throw fail("'group_by_content' and 'content' contradict each other", "content")
        }
        return r
    }
}

/// One drawing of a page rule's `any_of`.
struct PageDrawing: Decodable {
    var screen, pagePath, pagePathRegex: String?
    var appVersions: [VersionCondition]

    enum CodingKeys: String, CodingKey { case screen, pagePath = "page_path", appVersions = "app_versions" }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        screen = try c.decodeIfPresent(String.self, forKey: .screen)
        pagePathRegex = try Condition.regexValue(decoder, CodingKeys.pagePath)
        pagePath = try decodeExact(c, .pagePath, regex: pagePathRegex)
        appVersions = try decodeVersions(c, .appVersions, decoder)
        if screen == nil && pagePath == nil && pagePathRegex == nil {
            throw decoder.fail("a drawing needs 'screen' or 'page_path'", code: .missingKey)
        }
        if screen != nil && pagePathRegex != nil {
            throw decoder.fail("in 'any_of', a 'page_path' regex goes without 'screen'", forKey: CodingKeys.pagePath,
                               hint: "the drawing is found by scanning the page path")
        }
    }
}

/// The kind of an action table.
public enum ActionKind: String, Sendable, CaseIterable {
    /// `ACTION`: control clicks, `target/action/tag` or `target/action`.
    case action = "ACTION"
    /// `PAGEPV`: page-enter events, keys are pages.
    case pagePV = "PAGEPV"
    /// `TABLEVIEW`: table and collection clicks, `target/container/tag`.
    case tableView = "TABLEVIEW"
    /// `GESTURE`: gesture clicks, `target/action`.
    case gesture = "GESTURE"
}

/// One `pagePara` entry: where to read an output value from.
public struct PageParameter: Sendable, Decodable, Equatable {
    /// The output key.
    public var output: String = ""
    /// The property to look up.
    public var propertyName: String
    /// `a/b`: key `b` of the object in property `a` (wins when non-empty).
    public var propertyPath: String
    /// `"0"`: properties then depth-first in object values; `"1"`: inside `$element_content` only.
    public var containIn: String

    enum CodingKeys: String, CodingKey { case propertyName, propertyPath, containIn }

    /// A parameter.
    public init(output: String, propertyName: String, propertyPath: String = "", containIn: String = "0") {
        self.output = output; self.propertyName = propertyName; self.propertyPath = propertyPath; self.containIn = containIn
    }

    /// Decodes a parameter.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        propertyName = try c.decodeIfPresent(String.self, forKey: .propertyName) ?? ""
        propertyPath = try c.decodeIfPresent(String.self, forKey: .propertyPath) ?? ""
        containIn = try c.decodeIfPresent(String.self, forKey: .containIn) ?? "0"
        if containIn != "0" && containIn != "1" {
            throw decoder.fail("'containIn' must be \"0\" or \"1\"", forKey: CodingKeys.containIn, code: .badValue)
        }
        if propertyName.isEmpty && propertyPath.isEmpty {
            throw decoder.fail("needs 'propertyName' or 'propertyPath'", code: .missingKey)
        }
    }
}

/// An action rule: an action identifier (or, for `PAGEPV`, a page) and what a match adds.
public struct ActionRule: Sendable {
    /// Which table it is in.
    public var kind: ActionKind
    /// The action identifier (the rule's id).
    public var id: String
    /// Properties copied into the event, in file order.
    public var userDefined: [(String, String)]
    /// Output keys filled from the event, in file order.
    public var pagePara: [PageParameter]
    /// All must hold.
    public var appVersions: [VersionCondition]
    /// `where:` conditions on properties; all must hold.
    public var conditions: [Condition]
    /// Where the identifier is written.
    public var idLocation: SourceLocation?

    /// An action rule.
    public init(kind: ActionKind, id: String, userDefined: [(String, String)] = [], pagePara: [PageParameter] = [],
                appVersions: [VersionCondition] = [], conditions: [Condition] = []) {
        self.kind = kind; self.id = id; self.userDefined = userDefined; self.pagePara = pagePara
        self.appVersions = appVersions; self.conditions = conditions
    }
}

struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ s: String) { stringValue = s }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// The `actions:` mapping.
struct ActionTable: Decodable {
    var rules: [ActionRule] = []

    struct Entry: Decodable {
        var userDefined: [(String, String)] = []
        var pagePara: [PageParameter] = []
        var appVersions: [VersionCondition] = []
        var conditions: [Condition] = []
        enum CodingKeys: String, CodingKey { case userDefined, pagePara, appVersions = "app_versions", conditions = "where" }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            appVersions = try decodeVersions(c, .appVersions, decoder)
            conditions = try decodeConditions(c, .conditions)
            if c.contains(.userDefined) {
                let u = try c.nestedContainer(keyedBy: AnyKey.self, forKey: .userDefined)
                for k in u.allKeys { userDefined.append((k.stringValue, try u.decode(String.self, forKey: k))) }
            }
            if c.contains(.pagePara) {
                let p = try c.nestedContainer(keyedBy: AnyKey.self, forKey: .pagePara)
                for k in p.allKeys {
                    var param = try p.decode(PageParameter.self, forKey: k)
                    param.output = k.stringValue
                    pagePara.append(param)
                }
            }
        }
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        for kindKey in c.allKeys {
            guard let kind = ActionKind(rawValue: kindKey.stringValue) else { continue }
            let table = try c.nestedContainer(keyedBy: AnyKey.self, forKey: kindKey)
            let tableNode = decoder.configNode?[kindKey.stringValue]
            for k in table.allKeys {
                let e = try table.decode(Entry.self, forKey: k)
                var rule = ActionRule(kind: kind, id: k.stringValue, userDefined: e.userDefined, pagePara: e.pagePara,
                                      appVersions: e.appVersions, conditions: e.conditions)
                rule.idLocation = tableNode?.location(ofKey: k.stringValue)
                rules.append(rule)
            }
        }
    }
}
