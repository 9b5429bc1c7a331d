import MaidianPipeline

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

/// A page rule: page-enter events of a page (`screen`) or page path (`page_path`).
public struct PageRule: Sendable, Decodable {
    /// The rule id.
    public var id: String
    /// Exact page (`$screen_name`, else `current_url`).
    public var screen: String?
    /// Exact `$page_path`.
    public var pagePath: String?
    /// All must hold.
    public var appVersions: [VersionCondition]
    /// Where the id is written.
    public var idLocation: SourceLocation?

    enum CodingKeys: String, CodingKey { case id, screen, pagePath = "page_path", appVersions = "app_versions" }

    /// A page rule.
    public init(id: String, screen: String? = nil, pagePath: String? = nil, appVersions: [VersionCondition] = []) {
        self.id = id; self.screen = screen; self.pagePath = pagePath; self.appVersions = appVersions
    }

    /// Decodes and checks a page rule.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        idLocation = decoder.configLocation(forKey: CodingKeys.id)
        screen = try c.decodeIfPresent(String.self, forKey: .screen)
        pagePath = try c.decodeIfPresent(String.self, forKey: .pagePath)
        appVersions = try decodeVersions(c, .appVersions, decoder)
        if screen == nil && pagePath == nil {
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
    /// All must hold.
    public var appVersions: [VersionCondition]
    /// Where the id is written.
    public var idLocation: SourceLocation?

    enum CodingKeys: String, CodingKey {
        case id, screen, pagePath = "page_path", path, type, index, section, row, content
        case contentKey = "content_key", groupByContent = "group_by_content", identifierRegex = "identifier_regex"
        case appVersions = "app_versions"
    }

    /// An element rule.
    public init(id: String, screen: String? = nil, pagePath: String? = nil, path: String? = nil, type: String? = nil,
                index: Int? = nil, section: Int? = nil, row: Int? = nil, content: String? = nil, contentKey: String? = nil,
                groupByContent: Bool = false, identifierRegex: String? = nil, appVersions: [VersionCondition] = []) {
        self.id = id; self.screen = screen; self.pagePath = pagePath; self.path = path; self.type = type
        self.index = index; self.section = section; self.row = row; self.content = content; self.contentKey = contentKey
        self.groupByContent = groupByContent; self.identifierRegex = identifierRegex; self.appVersions = appVersions
    }

    /// Decodes and checks an element rule (contradictions, regex syntax).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        idLocation = decoder.configLocation(forKey: CodingKeys.id)
        screen = try c.decodeIfPresent(String.self, forKey: .screen)
        pagePath = try c.decodeIfPresent(String.self, forKey: .pagePath)
        path = try c.decodeIfPresent(String.self, forKey: .path)
        type = try c.decodeIfPresent(String.self, forKey: .type)
        index = try c.decodeIfPresent(Int.self, forKey: .index)
        section = try c.decodeIfPresent(Int.self, forKey: .section)
        row = try c.decodeIfPresent(Int.self, forKey: .row)
        content = try c.decodeIfPresent(String.self, forKey: .content)
        contentKey = try c.decodeIfPresent(String.self, forKey: .contentKey)
        groupByContent = try c.decodeIfPresent(Bool.self, forKey: .groupByContent) ?? false
        identifierRegex = try c.decodeIfPresent(String.self, forKey: .identifierRegex)
        appVersions = try decodeVersions(c, .appVersions, decoder)
        if row != nil && section == nil {
            throw decoder.fail("'row' needs 'section'", forKey: CodingKeys.row, hint: "a row is counted within a section")
        }
        if index != nil && section != nil {
            throw decoder.fail("'index' and 'section' contradict each other", forKey: CodingKeys.index,
                               hint: "'index' is for independent elements, 'section'/'row' for list cells")
        }
        if contentKey != nil && content == nil && !groupByContent {
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
        } else if path == nil || type == nil {
            throw decoder.fail("element rule '\(id)' needs 'path' and 'type', or 'identifier_regex'", code: .missingKey)
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
    /// Where the identifier is written.
    public var idLocation: SourceLocation?

    /// An action rule.
    public init(kind: ActionKind, id: String, userDefined: [(String, String)] = [], pagePara: [PageParameter] = []) {
        self.kind = kind; self.id = id; self.userDefined = userDefined; self.pagePara = pagePara
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
        enum CodingKeys: String, CodingKey { case userDefined, pagePara }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
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
                var rule = ActionRule(kind: kind, id: k.stringValue, userDefined: e.userDefined, pagePara: e.pagePara)
                rule.idLocation = tableNode?.location(ofKey: k.stringValue)
                rules.append(rule)
            }
        }
    }
}
