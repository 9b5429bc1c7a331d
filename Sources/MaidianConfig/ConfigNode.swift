/// One node of a parsed pipeline file: a scalar, a mapping or a list, with its file and position.
///
/// Built by ``ConfigDocument`` from the YAML that Yams parsed: aliases are expanded, `<<` merge keys are
/// applied, duplicate keys were rejected, and `${VAR}` references in scalar values were substituted.
///
/// A `ConfigNode` is itself `Decodable` when decoded by ``ConfigDecoder``: a field of type `ConfigNode`
/// captures that part of the document as is, unchecked, to decode it later with
/// ``decode(_:ignoringKeys:userInfo:)`` (for example once a stage's `kind:` says which `Config` type applies).
public struct ConfigNode: Sendable {
    /// How a scalar was written in the file.
    public enum ScalarStyle: Sendable, Hashable {
        /// `value`
        case plain
        /// `'value'`
        case singleQuoted
        /// `"value"`
        case doubleQuoted
        /// `|` block
        case literal
        /// `>` block
        case folded
    }

    /// One `key: value` pair of a mapping.
    public struct Entry: Sendable {
        /// The key's text.
        public let key: String
        /// Where the key is written.
        public let keyLocation: SourceLocation
        /// The value.
        public let value: ConfigNode
    }

    enum Content: Sendable {
        /// `tag` is the explicit YAML tag (quoted scalars have `tag:yaml.org,2002:str`), `nil` if none.
        case scalar(String, ScalarStyle, tag: String?)
        case mapping([Entry], index: [String: Int])
        case sequence([ConfigNode])
    }

    /// Where the node starts.
    public let location: SourceLocation
    let content: Content

    init(location: SourceLocation, content: Content) {
        self.location = location
        self.content = content
    }

    static func null(at location: SourceLocation) -> ConfigNode {
        ConfigNode(location: location, content: .scalar("", .plain, tag: nil))
    }

    static func mapping(_ entries: [Entry], at location: SourceLocation) -> ConfigNode {
        var index: [String: Int] = [:]
        for (i, e) in entries.enumerated() where index[e.key] == nil { index[e.key] = i }
        return ConfigNode(location: location, content: .mapping(entries, index: index))
    }

    /// The file the node comes from.
    public var file: String { location.file }

    /// Whether this is a scalar (including null).
    public var isScalar: Bool {
        if case .scalar = content { return true }
        return false
    }

    /// Whether this is a mapping.
    public var isMapping: Bool {
        if case .mapping = content { return true }
        return false
    }

    /// Whether this is a list.
    public var isSequence: Bool {
        if case .sequence = content { return true }
        return false
    }

    /// Whether this is YAML null: an unquoted empty value, `~`, `null`, or a `!!null` tag.
    public var isNull: Bool {
        guard case let .scalar(text, style, tag) = content else { return false }
        if tag == "tag:yaml.org,2002:null" { return true }
        return tag == nil && style == .plain && ScalarText.isNull(text)
    }

    /// The text of a scalar that is not null (numbers and booleans included, as written); `nil` otherwise.
    public var string: String? {
        guard case let .scalar(text, _, _) = content, !isNull else { return nil }
        return text
    }

    /// How a scalar was written; `nil` for mappings and lists.
    public var scalarStyle: ScalarStyle? {
        guard case let .scalar(_, style, _) = content else { return nil }
        return style
    }

    /// The pairs of a mapping in file order (merged `<<` pairs last); `nil` if this is not a mapping.
    public var entries: [Entry]? {
        guard case let .mapping(entries, _) = content else { return nil }
        return entries
    }

    /// The keys of a mapping in file order; empty if this is not a mapping.
    public var keys: [String] { entries?.map(\.key) ?? [] }

    /// The elements of a list; `nil` if this is not a list.
    public var elements: [ConfigNode]? {
        guard case let .sequence(nodes) = content else { return nil }
        return nodes
    }

    /// The value for `key` in a mapping; `nil` if absent or if this is not a mapping.
    public subscript(key: String) -> ConfigNode? {
        guard case let .mapping(entries, index) = content, let i = index[key] else { return nil }
        return entries[i].value
    }

    /// Where `key` itself is written in this mapping; `nil` if absent.
    public func location(ofKey key: String) -> SourceLocation? {
        guard case let .mapping(entries, index) = content, let i = index[key] else { return nil }
        return entries[i].keyLocation
    }

    /// Decodes this node as `type` with ``ConfigDecoder``, rejecting unknown keys anywhere below it.
    ///
    /// `ignoringKeys` are keys of this node's own mapping that count as known without `type` asking for
    /// them, typically `["kind"]` when the same mapping holds a stage's `kind:` and its options.
    ///
    /// - Throws: ``PipelineError`` for one problem, ``PipelineErrors`` for several.
    public func decode<T: Decodable>(
        _ type: T.Type = T.self, ignoringKeys: Set<String> = [], userInfo: [CodingUserInfoKey: any Sendable] = [:]
    ) throws -> T {
        try ConfigDecoder(userInfo: userInfo).decode(type, from: self, ignoringKeys: ignoringKeys)
    }

    /// How the node reads in an error message: `'eight'`, `an empty value`, `null`, `a mapping`, `a list`.
    var shapeDescription: String {
        switch content {
        case let .scalar(text, _, _):
            if isNull { return text.isEmpty ? "an empty value" : "null" }
            let shown = text.count > 40 ? String(text.prefix(40)) + "..." : text
            return "'\(shown)'"
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        }
    }
}

extension ConfigNode: Decodable {
    /// Captures the node being decoded (only with ``ConfigDecoder``). Its keys are not checked by the
    /// decode that captured it; they are checked when the captured node is itself decoded.
    public init(from decoder: any Decoder) throws {
        guard let decoder = decoder as? NodeDecoder else {
            throw PipelineError(code: .invalid, message: "a ConfigNode can only be decoded by ConfigDecoder")
        }
        decoder.session.deferred.insert(decoder.path)
        self = decoder.node
    }
}

extension ConfigNode: CustomStringConvertible {
    /// A compact, YAML-like rendering (for debugging and test failures).
    public var description: String {
        switch content {
        case let .scalar(text, style, _):
            switch style {
            case .plain: return text
            default: return "\"\(text)\""
            }
        case let .mapping(entries, _):
            return "{" + entries.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case let .sequence(nodes):
            return "[" + nodes.map(\.description).joined(separator: ", ") + "]"
        }
    }
}
