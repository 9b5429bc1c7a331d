import Foundation

/// Decodes `Decodable` types from ``ConfigNode`` trees with errors that point into the pipeline file.
///
/// - Unknown keys are rejected. A key counts as known when the type asked for it (`decode`,
///   `decodeIfPresent`, `contains`, `nestedContainer(forKey:)`, ...). After decoding, every key of every
///   mapping the types opened that no one asked for is reported at its line:column, with a
///   `did you mean 'window'?` or `valid keys: a, b` hint. All unknown keys of the document are reported
///   together; if decoding fails, the unknown keys of the parts that did decode are reported with it.
/// - Missing required key: `missing key 'topic'` at the mapping. Wrong shape or unparsable scalar:
///   `expected an integer for 'partitions', got 'eight'` at the value.
/// - A ``PipelineError`` without location thrown by a type's `init(from:)` gets the location of the node
///   that type was decoding (see ``Swift/Decoder/fail(_:hint:code:)``). `DecodingError`s and other errors
///   are wrapped the same way.
/// - Scalars are decoded by parsing their text: integers (`8`, `-3`, `1_000`, `0x1F`), floating point
///   (`1.5`, `1e6`, `.inf`), booleans (`true/false/yes/no/on/off`), strings (any non-null scalar,
///   numbers included, as written). Quoted scalars parse the same way (`"8"` decodes as an integer) but
///   are never null. `Optional` is `nil` for an absent key, an empty value, `~` or `null`.
/// - An empty value where a non-optional mapping or list is expected counts as an empty one.
/// - A field of type ``ConfigNode`` captures its node unchecked, for decoding later.
public struct ConfigDecoder: Sendable {
    /// Passed to the types being decoded as `Decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable]

    /// A decoder.
    public init(userInfo: [CodingUserInfoKey: any Sendable] = [:]) {
        self.userInfo = userInfo
    }

    /// Decodes `type` from `node`.
    ///
    /// `ignoringKeys` count as known in `node`'s own mapping (not below it), e.g. `["kind"]`.
    ///
    /// - Throws: ``PipelineError`` for one problem, ``PipelineErrors`` (sorted by location) for several.
    public func decode<T: Decodable>(_ type: T.Type, from node: ConfigNode, ignoringKeys: Set<String> = []) throws -> T {
        let session = DecodingSession(ignoringRootKeys: ignoringKeys, userInfo: userInfo)
        return try session.run(type, root: node)
    }

    /// Decodes `type` from `node` as far as possible, for a linter: the value (`nil` when a required part
    /// could not be decoded) and every problem found, sorted by location. A value returned together with
    /// errors holds defaults where the errors are.
    public func decodeCollecting<T: Decodable>(
        _ type: T.Type, from node: ConfigNode, ignoringKeys: Set<String> = []
    ) -> (value: T?, errors: [PipelineError]) {
        let session = DecodingSession(ignoringRootKeys: ignoringKeys, userInfo: userInfo)
        do {
            let value = try session.run(type, root: node, throwingReported: false)
            return (value, PipelineErrors.sortedUnique(session.finalErrors(thrown: [])))
        } catch {
            return (nil, PipelineErrors.sortedUnique(PipelineErrors.flatten(error)))
        }
    }

    /// Parses `yaml` (see ``ConfigDocument/parse(yaml:file:environment:)``) and decodes `type` from it.
    public func decode<T: Decodable>(
        _ type: T.Type, yaml: String, file: String,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> T {
        try decode(type, from: ConfigDocument.parse(yaml: yaml, file: file, environment: environment))
    }

    /// Loads the file at `path` (see ``ConfigDocument/load(path:environment:)``) and decodes `type` from it.
    public func decode<T: Decodable>(
        _ type: T.Type, path: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> T {
        try decode(type, from: ConfigDocument.load(path: path, environment: environment))
    }
}

extension Decoder {
    /// Where the value being decoded starts in the pipeline file (`nil` outside ``ConfigDecoder``).
    public var configLocation: SourceLocation? {
        (self as? NodeDecoder)?.node.location
    }

    /// The node being decoded (`nil` outside ``ConfigDecoder``).
    public var configNode: ConfigNode? {
        (self as? NodeDecoder)?.node
    }

    /// Where the value of `key` starts in the mapping being decoded; the mapping's own location when the
    /// key is absent; `nil` outside ``ConfigDecoder``.
    public func configLocation(forKey key: some CodingKey) -> SourceLocation? {
        guard let node = configNode else { return nil }
        return node[key.stringValue]?.location ?? node.location
    }

    /// An error located at the value being decoded, to throw from `init(from:)`:
    /// `throw decoder.fail("window must be longer than 0", hint: "e.g. 10m")`.
    public func fail(_ message: String, hint: String? = nil, code: PipelineError.Code = .invalid) -> PipelineError {
        PipelineError(code: code, message: message, location: configLocation, hint: hint)
    }

    /// Records a problem and lets decoding go on, so that one pass finds every problem of a file: with
    /// ``ConfigDecoder`` the error is thrown, together with all others, when the whole decode ends;
    /// elsewhere it is thrown at once. For checks whose failure leaves a usable value behind
    /// (`max_batch: 0`): `try decoder.report(decoder.fail("...", forKey: CodingKeys.maxBatch))`.
    public func report(_ error: PipelineError) throws {
        guard let decoder = self as? NodeDecoder else { throw error }
        var error = error
        if error.location == nil { error.location = decoder.node.location }
        decoder.session.reported.append(error)
    }

    /// An error located at the value of `key` in the mapping being decoded (at the mapping if absent).
    public func fail(
        _ message: String, forKey key: some CodingKey, hint: String? = nil, code: PipelineError.Code = .invalid
    ) -> PipelineError {
        PipelineError(code: code, message: message, location: configLocation(forKey: key), hint: hint)
    }
}

// MARK: - Session

/// The state of one `ConfigDecoder.decode` call: which keys each opened mapping was asked for.
final class DecodingSession {
    /// A node's position below the root: child indices (mapping entry index or list index).
    typealias Path = [Int]

    struct Record {
        var node: ConfigNode
        var requested: [String] = []
        var requestedSet: Set<String> = []
        /// The `init(from:)` that opened it returned normally (its key set is final).
        var complete = false
        /// It was opened by an `init(from:)` that threw (its key set may be partial even if an enclosing
        /// `init(from:)` went on and completed).
        var failed = false
    }

    let ignoringRootKeys: Set<String>
    let userInfo: [CodingUserInfoKey: Any]
    var records: [Path: Record] = [:]
    var order: [Path] = []
    /// Nodes captured as `ConfigNode` (checked when they are decoded themselves).
    var deferred: Set<Path> = []
    /// For each `init(from:)` in progress, the mappings opened during it.
    var frames: [[Path]] = [[]]
    /// Problems recorded without stopping (``Swift/Decoder/report(_:)``, failed optional keys, list
    /// elements and dictionary values), thrown when the decode ends.
    var reported: [PipelineError] = []

    init(ignoringRootKeys: Set<String>, userInfo: [CodingUserInfoKey: any Sendable]) {
        self.ignoringRootKeys = ignoringRootKeys
        self.userInfo = userInfo
    }

    func run<T: Decodable>(_ type: T.Type, root: ConfigNode, throwingReported: Bool = true) throws -> T {
        let value: T
        do {
            value = try unbox(type, node: root, path: [], codingPath: [])
        } catch {
            throw PipelineErrors.combined(finalErrors(thrown: PipelineErrors.flatten(error)))!
        }
        if throwingReported, let error = PipelineErrors.combined(finalErrors(thrown: [])) { throw error }
        return value
    }

    /// Everything wrong with the document: `thrown` and the reported problems, plus the unknown keys.
    func finalErrors(thrown: [PipelineError]) -> [PipelineError] {
        let unknown = unknownKeys()
        // A mapping with a misspelled key fails for the key it lacks ("needs 'screen' or 'page_path'"
        // next to 'scren'): the misspelling is the problem to report, not its consequence.
        let misspelt = Set(unknown.filter(\.nearAbsent).map(\.owner))
        let kept = (thrown + reported).filter { !($0.code == .missingKey && $0.location.map(misspelt.contains) == true) }
        return kept + unknown.map(\.error)
    }

    // MARK: Key tracking

    func open(_ path: Path, node: ConfigNode) {
        guard records[path] == nil else { return }
        records[path] = Record(node: node)
        order.append(path)
        frames[frames.count - 1].append(path)
    }

    func request(_ key: String, at path: Path) {
        guard var record = records[path], !record.requestedSet.contains(key) else { return }
        record.requested.append(key)
        record.requestedSet.insert(key)
        records[path] = record
    }

    struct UnknownKey {
        var error: PipelineError
        /// The mapping's location.
        var owner: SourceLocation
        /// The key is near a key that was asked for and is absent.
        var nearAbsent: Bool
    }

    /// The unknown keys of every mapping the types opened. A mapping whose `init(from:)` did not finish
    /// may not have asked for all its keys yet: of its keys only those near a key that was asked for and
    /// is absent (`scren` for `screen`) are reported, as typos whatever the rest of the type would ask.
    func unknownKeys() -> [UnknownKey] {
        var errors: [UnknownKey] = []
        for path in order {
            guard let record = records[path], !deferred.contains(path), let entries = record.node.entries
            else { continue }
            let finished = record.complete && !record.failed
            let ignored = path.isEmpty ? ignoringRootKeys.sorted() : []
            let present = Set(entries.map(\.key))
            let valid = ignored + record.requested
            for entry in entries where !record.requestedSet.contains(entry.key) && !ignored.contains(entry.key) {
                let absent = valid.filter { !present.contains($0) }
                let hint: String
                let nearAbsent = Spelling.closest(to: entry.key, among: absent)
                if let match = nearAbsent ?? Spelling.closest(to: entry.key, among: valid) {
                    hint = "did you mean '\(match)'?"
                } else if valid.isEmpty {
                    hint = "no keys are expected here"
                } else {
                    hint = "valid keys: " + valid.joined(separator: ", ")
                }
                if !finished && nearAbsent == nil { continue }
                errors.append(UnknownKey(
                    error: PipelineError(
                        code: .unknownKey, message: "unknown key '\(entry.key)'", location: entry.keyLocation, hint: hint),
                    owner: record.node.location, nearAbsent: nearAbsent != nil))
            }
        }
        return errors
    }

    // MARK: Decoding values

    func unbox<T: Decodable>(_ type: T.Type, node: ConfigNode, path: Path, codingPath: [any CodingKey]) throws -> T {
        if T.self == ConfigNode.self {
            deferred.insert(path)
            return node as! T
        }
        if let value = try primitive(type, node: node, codingPath: codingPath) { return value }
        if let collecting = T.self as? any CollectingDecodable.Type {
            return try collecting.decodeCollecting(self, node: node, path: path, codingPath: codingPath) as! T
        }
        frames.append([])
        do {
            let value = try T(from: NodeDecoder(session: self, node: node, path: path, codingPath: codingPath))
            for p in frames.removeLast() { records[p]?.complete = true }
            return value
        } catch {
            let opened = frames.removeLast()
            for p in opened { records[p]?.failed = true }
            frames[frames.count - 1].append(contentsOf: opened)
            throw localize(error, type: T.self, node: node, codingPath: codingPath)
        }
    }

    /// Built-in scalar types, decoded without going through `init(from:)` (for precise messages).
    func primitive<T>(_ type: T.Type, node: ConfigNode, codingPath: [any CodingKey]) throws -> T? {
        switch type {
        case is String.Type: return try string(node, codingPath) as? T
        case is Bool.Type: return try bool(node, codingPath) as? T
        case is Int.Type: return try integer(Int.self, node, codingPath) as? T
        case is Int64.Type: return try integer(Int64.self, node, codingPath) as? T
        case is Int32.Type: return try integer(Int32.self, node, codingPath) as? T
        case is Int16.Type: return try integer(Int16.self, node, codingPath) as? T
        case is Int8.Type: return try integer(Int8.self, node, codingPath) as? T
        case is UInt.Type: return try integer(UInt.self, node, codingPath) as? T
        case is UInt64.Type: return try integer(UInt64.self, node, codingPath) as? T
        case is UInt32.Type: return try integer(UInt32.self, node, codingPath) as? T
        case is UInt16.Type: return try integer(UInt16.self, node, codingPath) as? T
        case is UInt8.Type: return try integer(UInt8.self, node, codingPath) as? T
        case is Double.Type: return try double(node, codingPath) as? T
        case is Float.Type: return Float(try double(node, codingPath)) as? T
        case is URL.Type: return try url(node, codingPath) as? T
        default: return nil
        }
    }

    func scalarText(_ node: ConfigNode, expected: String, _ codingPath: [any CodingKey]) throws -> String {
        guard case let .scalar(text, _, _) = node.content, !node.isNull else {
            throw mismatch(expected: expected, node: node, codingPath: codingPath)
        }
        return text
    }

    func string(_ node: ConfigNode, _ codingPath: [any CodingKey]) throws -> String {
        try scalarText(node, expected: "a string", codingPath)
    }

    func bool(_ node: ConfigNode, _ codingPath: [any CodingKey]) throws -> Bool {
        let text = try scalarText(node, expected: "true or false", codingPath)
        guard let value = ScalarText.bool(text) else {
            throw mismatch(expected: "true or false", node: node, codingPath: codingPath)
        }
        return value
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type, _ node: ConfigNode, _ codingPath: [any CodingKey]) throws -> I {
        let expected = I.isSigned ? "an integer" : "a non-negative integer"
        let text = try scalarText(node, expected: expected, codingPath)
        switch ScalarText.integer(text, as: I.self) {
        case let .value(v): return v
        case .invalid: throw mismatch(expected: expected, node: node, codingPath: codingPath)
        case .outOfRange:
            let forKey = Self.keyDescription(codingPath).map { " for '\($0)'" } ?? ""
            throw PipelineError(
                code: .badValue, message: "'\(text)' is out of range\(forKey)",
                location: node.location, hint: "must be between \(I.min) and \(I.max)")
        }
    }

    func double(_ node: ConfigNode, _ codingPath: [any CodingKey]) throws -> Double {
        let text = try scalarText(node, expected: "a number", codingPath)
        guard let value = ScalarText.double(text) else {
            throw mismatch(expected: "a number", node: node, codingPath: codingPath)
        }
        return value
    }

    func url(_ node: ConfigNode, _ codingPath: [any CodingKey]) throws -> URL {
        let text = try scalarText(node, expected: "a URL", codingPath)
        guard !text.isEmpty, let value = URL(string: text) else {
            throw mismatch(expected: "a URL", node: node, codingPath: codingPath)
        }
        return value
    }

    func mismatch(
        expected: String, node: ConfigNode, codingPath: [any CodingKey], hint: String? = nil
    ) -> PipelineError {
        let key = Self.keyDescription(codingPath)
        let forKey = key.map { " for '\($0)'" } ?? ""
        return PipelineError(
            code: .badType, message: "expected \(expected)\(forKey), got \(node.shapeDescription)",
            location: node.location, hint: hint)
    }

    /// The last key of a coding path with the list indices after it: `partitions`, `brokers[1]`, `[0]`.
    static func keyDescription(_ codingPath: [any CodingKey]) -> String? {
        var parts: [String] = []
        for key in codingPath.reversed() {
            if let index = key as? IndexKey {
                parts.insert("[\(index.index)]", at: 0)
            } else {
                parts.insert(key.stringValue, at: 0)
                break
            }
        }
        return parts.isEmpty ? nil : parts.joined()
    }

    /// Gives an error thrown while decoding `node` a location and a config-level message.
    func localize<T>(_ error: any Error, type: T.Type, node: ConfigNode, codingPath: [any CodingKey]) -> any Error {
        switch error {
        case var e as PipelineError:
            if e.location == nil { e.location = Self.valueLocation(mentionedBy: e.message, in: node) ?? node.location }
            return e
        case let e as PipelineErrors:
            return e
        case let e as DecodingError:
            let forKey = Self.keyDescription(codingPath).map { " for '\($0)'" } ?? ""
            switch e {
            case let .dataCorrupted(context):
                if T.self is any RawRepresentable.Type, let text = node.string {
                    var hint: String?
                    if let cases = T.self as? any (CaseIterable & RawRepresentable).Type {
                        hint = PipelineError.suggestion(for: text, among: Self.caseNames(cases))
                    }
                    return PipelineError(
                        code: .badValue, message: "invalid value '\(text)'\(forKey)", location: node.location,
                        hint: hint, underlying: e)
                }
                return PipelineError(
                    code: .badValue, message: "invalid value\(forKey): \(context.debugDescription)",
                    location: node.location, underlying: e)
            case let .keyNotFound(key, _):
                return PipelineError(
                    code: .missingKey, message: "missing key '\(key.stringValue)'", location: node.location, underlying: e)
            case let .typeMismatch(_, context), let .valueNotFound(_, context):
                return PipelineError(
                    code: .badType, message: "invalid value\(forKey): \(context.debugDescription)",
                    location: node.location, underlying: e)
            @unknown default:
                return PipelineError(code: .invalid, message: "\(e)", location: node.location, underlying: e)
            }
        default:
            let forKey = Self.keyDescription(codingPath).map { " for '\($0)'" } ?? ""
            return PipelineError(
                code: .invalid, message: "invalid value\(forKey): \(error)", location: node.location, underlying: error)
        }
    }

    /// A check in `init(from:)` that throws without a location usually names the key it is about first
    /// (`max_string_bytes must be at least 1`): the error belongs at that key's value, not at the mapping.
    static func valueLocation(mentionedBy message: String, in node: ConfigNode) -> SourceLocation? {
        guard let entries = node.entries else { return nil }
        let first = message.prefix { $0 != " " && $0 != ":" }.trimmingCharacters(in: CharacterSet(charactersIn: "'`"))
        let key = first.split(separator: ".").last.map(String.init) ?? first
        return entries.first { $0.key == key }?.value.location
    }

    static func caseNames<E: CaseIterable & RawRepresentable>(_ type: E.Type) -> [String] {
        E.allCases.map { "\($0.rawValue)" }
    }

    func missingKey(_ key: String, record path: DecodingSession.Path, node: ConfigNode) -> PipelineError {
        var hint: String?
        if let entries = node.entries, let record = records[path] {
            let unasked = entries.filter { !record.requestedSet.contains($0.key) && $0.key != key }
            if let match = Spelling.closest(to: key, among: unasked.map(\.key)),
               let entry = unasked.first(where: { $0.key == match }) {
                hint = "is '\(match)' at \(entry.keyLocation.line):\(entry.keyLocation.column) a misspelling?"
            }
        }
        return PipelineError(code: .missingKey, message: "missing key '\(key)'", location: node.location, hint: hint)
    }
}

/// A list position in a coding path.
struct IndexKey: CodingKey {
    let index: Int
    init(_ index: Int) { self.index = index }
    init?(intValue: Int) { self.index = intValue }
    init?(stringValue: String) { return nil }
    var intValue: Int? { index }
    var stringValue: String { "\(index)" }
}

/// A plain string key in a coding path (`super`).
struct NameKey: CodingKey {
    let stringValue: String
    init(_ name: String) { self.stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
    var intValue: Int? { nil }
}

// MARK: - Decoder

/// The `Decoder` handed to `init(from:)`: one node of the tree.
final class NodeDecoder: Decoder {
    let session: DecodingSession
    let node: ConfigNode
    let path: DecodingSession.Path
    let codingPath: [any CodingKey]

    init(session: DecodingSession, node: ConfigNode, path: DecodingSession.Path, codingPath: [any CodingKey]) {
        self.session = session
        self.node = node
        self.path = path
        self.codingPath = codingPath
    }

    var userInfo: [CodingUserInfoKey: Any] { session.userInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        switch node.content {
        case let .mapping(entries, index):
            session.open(path, node: node)
            return KeyedDecodingContainer(KeyedContainer<Key>(decoder: self, entries: entries, index: index))
        case .scalar where node.isNull:
            return KeyedDecodingContainer(KeyedContainer<Key>(decoder: self, entries: [], index: [:]))
        default:
            throw session.mismatch(expected: "a mapping", node: node, codingPath: codingPath)
        }
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        switch node.content {
        case let .sequence(elements):
            return UnkeyedContainer(decoder: self, elements: elements)
        case .scalar where node.isNull:
            return UnkeyedContainer(decoder: self, elements: [])
        default:
            throw session.mismatch(expected: "a list", node: node, codingPath: codingPath)
        }
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueContainer(decoder: self)
    }

    func child(_ node: ConfigNode, index: Int, key: any CodingKey) -> NodeDecoder {
        NodeDecoder(session: session, node: node, path: path + [index], codingPath: codingPath + [key])
    }
}

struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: NodeDecoder
    let entries: [ConfigNode.Entry]
    let index: [String: Int]

    var codingPath: [any CodingKey] { decoder.codingPath }
    var session: DecodingSession { decoder.session }

    var allKeys: [Key] { entries.compactMap { Key(stringValue: $0.key) } }

    func contains(_ key: Key) -> Bool {
        session.request(key.stringValue, at: decoder.path)
        return index[key.stringValue] != nil
    }

    private func entry(_ key: Key) throws -> (Int, ConfigNode) {
        session.request(key.stringValue, at: decoder.path)
        guard let i = index[key.stringValue] else {
            throw session.missingKey(key.stringValue, record: decoder.path, node: decoder.node)
        }
        return (i, entries[i].value)
    }

    private func value<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T {
        let (i, node) = try entry(key)
        return try session.unbox(type, node: node, path: decoder.path + [i], codingPath: codingPath + [key])
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        session.request(key.stringValue, at: decoder.path)
        guard let i = index[key.stringValue] else { return true }
        return entries[i].value.isNull
    }

    /// An optional key whose value is wrong is reported (``DecodingSession/reported``) and reads as absent,
    /// so that decoding goes on and finds the file's other problems in the same pass.
    private func optional<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        session.request(key.stringValue, at: decoder.path)
        guard let i = index[key.stringValue], !entries[i].value.isNull else { return nil }
        do {
            return try value(type, key)
        } catch {
            session.reported.append(contentsOf: PipelineErrors.flatten(error))
            return nil
        }
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try optional(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try optional(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try optional(type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try optional(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try optional(type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try optional(type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try optional(type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try optional(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try optional(type, key) }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try optional(type, key) }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try value(type, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try value(type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try value(type, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try value(type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try value(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try value(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try value(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try value(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try value(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try value(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try value(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try value(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try value(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try value(type, key) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try value(type, key) }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        let (i, node) = try entry(key)
        return try decoder.child(node, index: i, key: key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let (i, node) = try entry(key)
        return try decoder.child(node, index: i, key: key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        try superDecoder(named: NameKey("super"))
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        try superDecoder(named: key)
    }

    private func superDecoder(named key: any CodingKey) throws -> any Decoder {
        session.request(key.stringValue, at: decoder.path)
        if let i = index[key.stringValue] {
            return decoder.child(entries[i].value, index: i, key: key)
        }
        return decoder.child(.null(at: decoder.node.location), index: -1, key: key)
    }
}

struct UnkeyedContainer: UnkeyedDecodingContainer {
    let decoder: NodeDecoder
    let elements: [ConfigNode]
    private(set) var currentIndex = 0

    init(decoder: NodeDecoder, elements: [ConfigNode]) {
        self.decoder = decoder
        self.elements = elements
    }

    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private func checkNotAtEnd() throws {
        guard isAtEnd else { return }
        let what = DecodingSession.keyDescription(codingPath).map { "'\($0)'" } ?? "the list"
        throw PipelineError(
            code: .badValue, message: "\(what) has too few elements (\(elements.count))",
            location: decoder.node.location)
    }

    private mutating func next<T: Decodable>(_ type: T.Type) throws -> T {
        try checkNotAtEnd()
        let value = try decoder.session.unbox(
            type, node: elements[currentIndex], path: decoder.path + [currentIndex],
            codingPath: codingPath + [IndexKey(currentIndex)])
        currentIndex += 1
        return value
    }

    private mutating func nextDecoder() throws -> NodeDecoder {
        try checkNotAtEnd()
        let child = decoder.child(elements[currentIndex], index: currentIndex, key: IndexKey(currentIndex))
        currentIndex += 1
        return child
    }

    mutating func decodeNil() throws -> Bool {
        try checkNotAtEnd()
        if elements[currentIndex].isNull {
            currentIndex += 1
            return true
        }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type) }
    mutating func decode(_ type: String.Type) throws -> String { try next(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try nextDecoder().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try nextDecoder().unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        try nextDecoder()
    }
}

struct SingleValueContainer: SingleValueDecodingContainer {
    let decoder: NodeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    private func value<T: Decodable>(_ type: T.Type) throws -> T {
        try decoder.session.unbox(type, node: decoder.node, path: decoder.path, codingPath: codingPath)
    }

    func decodeNil() -> Bool { decoder.node.isNull }
    func decode(_ type: Bool.Type) throws -> Bool { try value(type) }
    func decode(_ type: String.Type) throws -> String { try value(type) }
    func decode(_ type: Double.Type) throws -> Double { try value(type) }
    func decode(_ type: Float.Type) throws -> Float { try value(type) }
    func decode(_ type: Int.Type) throws -> Int { try value(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try value(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try value(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try value(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try value(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try value(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try value(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try value(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try value(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try value(type) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try value(type) }
}

// MARK: - Collecting containers

/// Lists and string-keyed dictionaries decode every element even when some fail, and throw all the
/// elements' problems together: `maidian check` reports every bad stage rule or property in one pass.
protocol CollectingDecodable {
    static func decodeCollecting(
        _ session: DecodingSession, node: ConfigNode, path: DecodingSession.Path, codingPath: [any CodingKey]
    ) throws -> Any
}

extension Array: CollectingDecodable where Element: Decodable {
    static func decodeCollecting(
        _ session: DecodingSession, node: ConfigNode, path: DecodingSession.Path, codingPath: [any CodingKey]
    ) throws -> Any {
        let elements: [ConfigNode]
        switch node.content {
        case let .sequence(nodes): elements = nodes
        case .scalar where node.isNull: elements = []
        default: throw session.mismatch(expected: "a list", node: node, codingPath: codingPath)
        }
        var values: [Element] = []
        var errors: [PipelineError] = []
        for (i, element) in elements.enumerated() {
            do {
                values.append(try session.unbox(
                    Element.self, node: element, path: path + [i], codingPath: codingPath + [IndexKey(i)]))
            } catch {
                errors.append(contentsOf: PipelineErrors.flatten(error))
            }
        }
        if let error = PipelineErrors.combined(errors) { throw error }
        return values
    }
}

extension Dictionary: CollectingDecodable where Key == String, Value: Decodable {
    static func decodeCollecting(
        _ session: DecodingSession, node: ConfigNode, path: DecodingSession.Path, codingPath: [any CodingKey]
    ) throws -> Any {
        let entries: [ConfigNode.Entry]
        switch node.content {
        case let .mapping(e, _): entries = e
        case .scalar where node.isNull: entries = []
        default: throw session.mismatch(expected: "a mapping", node: node, codingPath: codingPath)
        }
        // Every key of a dictionary is known: the mapping is not tracked for unknown keys.
        var values: [String: Value] = [:]
        var errors: [PipelineError] = []
        for (i, entry) in entries.enumerated() {
            do {
                values[entry.key] = try session.unbox(
                    Value.self, node: entry.value, path: path + [i], codingPath: codingPath + [NameKey(entry.key)])
            } catch {
                errors.append(contentsOf: PipelineErrors.flatten(error))
            }
        }
        if let error = PipelineErrors.combined(errors) { throw error }
        return values
    }
}
