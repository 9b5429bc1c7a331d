import Foundation
import Yams

/// Loads pipeline files into ``ConfigNode`` trees.
///
/// Loading parses the YAML (one document; an empty file gives a null root), then walks it once to:
/// expand aliases, apply `<<` merge keys (explicit keys win over merged ones, earlier merge sources over
/// later ones), reject duplicate keys and non-scalar keys, and substitute `${VAR}` references in scalar
/// values (see ``EnvironmentSubstitution``). All problems found in that walk are reported together.
/// Documents nested too deep or whose aliases expand too far are refused first (``YAMLLimits``).
public enum ConfigDocument {
    /// Reads and parses the file at `path`. Locations in errors and nodes use `path` as written.
    ///
    /// - Throws: ``PipelineError`` (`.io`, `.yamlSyntax`, ...) or ``PipelineErrors`` for several problems.
    public static func load(
        path: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> ConfigNode {
        try parse(yaml: read(path: path), file: path, environment: environment)
    }

    /// Reads and parses the file at `path` as far as it can, for a linter: the tree and the problems that
    /// leave one behind (duplicate keys, unset variables: their values stay as written). Throws when there
    /// is no tree (unreadable file, YAML syntax error).
    public static func loadCollecting(
        path: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> (node: ConfigNode, errors: [PipelineError]) {
        try parseCollecting(yaml: read(path: path), file: path, environment: environment)
    }

    static func read(path: String) throws -> String {
        let text: String
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            guard let decoded = String(data: data, encoding: .utf8) else {
                throw PipelineError(code: .io, message: "cannot read '\(path)': not UTF-8 text")
            }
            text = decoded
        } catch let e as PipelineError {
            throw e
        } catch {
            let reason = (error as NSError).localizedFailureReason ?? error.localizedDescription
            throw PipelineError(code: .io, message: "cannot read '\(path)': \(reason)", underlying: error)
        }
        return text
    }

    /// Parses YAML text; `file` is the name used in locations.
    ///
    /// - Throws: ``PipelineError`` (`.yamlSyntax` with the position libyaml reported, `.tooLarge` past
    ///   ``YAMLLimits/default``) or
    ///   ``PipelineErrors`` when several duplicate keys or environment problems were found.
    public static func parse(
        yaml: String, file: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> ConfigNode {
        let (node, errors) = try parseCollecting(yaml: yaml, file: file, environment: environment)
        if let error = PipelineErrors.combined(errors) { throw error }
        return node
    }

    /// Parses YAML text as far as it can (see ``loadCollecting(path:environment:)``).
    public static func parseCollecting(
        yaml: String, file: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> (node: ConfigNode, errors: [PipelineError]) {
        // Before composing: Yams recurses once per nesting level and expands aliases into copies.
        try YAMLLimits.default.check(yaml, file: file)
        let root: Yams.Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let e as YamlError {
            throw explainTabs(syntaxError(e, file: file), source: yaml)
        } catch {
            throw PipelineError(code: .yamlSyntax, message: "YAML error: \(error)", underlying: error)
        }
        var builder = Builder(file: file, source: yaml, environment: environment)
        guard let root else { return (.null(at: SourceLocation(file: file, line: 1, column: 1)), []) }
        let node = builder.convert(root, isKey: false)
        return (node, builder.errors)
    }

    /// libyaml's messages ("found character that cannot start any token") do not say that the character
    /// is a tab, the usual cause: when a tab is on the error's line or just above it, the error says so
    /// and points at the tab.
    static func explainTabs(_ error: PipelineError, source: String) -> PipelineError {
        guard let location = error.location else { return error }
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
        for lineNumber in [location.line, location.line - 1] where lineNumber >= 1 && lineNumber <= lines.count {
            let line = lines[lineNumber - 1]
            guard let tab = line.unicodeScalars.firstIndex(of: "\t") else { continue }
            let column = line.unicodeScalars.distance(from: line.unicodeScalars.startIndex, to: tab) + 1
            var e = error
            e.message += ": a tab character"
            e.location = SourceLocation(file: location.file, line: lineNumber, column: column)
            e.hint = "YAML does not allow tabs for indentation; indent with spaces"
            return e
        }
        return error
    }

    /// Turns a Yams error into a located `.yamlSyntax` error.
    static func syntaxError(_ error: YamlError, file: String) -> PipelineError {
        func at(_ mark: Mark) -> SourceLocation { SourceLocation(file: file, line: mark.line, column: mark.column) }
        switch error {
        case let .scanner(context, problem, mark, _),
             let .parser(context, problem, mark, _),
             let .composer(context, problem, mark, _):
            var hint: String?
            if let context, problem.hasPrefix("but ") {
                // e.g. "expected a single document in the stream, but found another document"
                return PipelineError(
                    code: .yamlSyntax, message: "YAML syntax error: \(context.text), \(problem)", location: at(mark),
                    underlying: error)
            }
            if let context {
                let where_ = context.mark.line == mark.line && context.mark.column == mark.column
                    ? "" : " that starts at \(context.mark.line):\(context.mark.column)"
                hint = context.text + where_
            }
            return PipelineError(
                code: .yamlSyntax, message: "YAML syntax error: \(problem)", location: at(mark), hint: hint,
                underlying: error)
        case let .reader(problem, offset, _, yaml):
            var location: SourceLocation?
            if let offset {
                var line = 1, column = 1
                for ch in yaml.prefix(offset) {
                    if ch == "\n" || ch == "\r\n" { line += 1; column = 1 } else { column += ch.unicodeScalars.count }
                }
                location = SourceLocation(file: file, line: line, column: column)
            }
            return PipelineError(
                code: .yamlSyntax, message: "YAML syntax error: \(problem)", location: location, underlying: error)
        default:
            return PipelineError(code: .yamlSyntax, message: "YAML error: \(error)", underlying: error)
        }
    }

    /// Converts Yams nodes, collecting every problem instead of stopping at the first.
    struct Builder {
        let file: String
        let source: String
        let environment: [String: String]
        var errors: [PipelineError] = []
        private var lines: [[Unicode.Scalar]]?

        init(file: String, source: String, environment: [String: String]) {
            self.file = file
            self.source = source
            self.environment = environment
        }

        func location(_ mark: Mark?) -> SourceLocation {
            SourceLocation(file: file, line: mark?.line ?? 1, column: mark?.column ?? 1)
        }

        mutating func convert(_ node: Yams.Node, isKey: Bool) -> ConfigNode {
            switch node {
            case let .scalar(scalar):
                let location = location(scalar.mark)
                let style = Self.style(scalar.style)
                let tagName = scalar.tag.description
                let tag: String? = tagName.isEmpty || tagName == "!" ? nil : tagName
                var text = scalar.string
                if !isKey, EnvironmentSubstitution.needsWork(text) {
                    do {
                        text = try EnvironmentSubstitution.substitute(text, environment: environment)
                    } catch let f as EnvironmentSubstitution.Failure {
                        errors.append(PipelineError(
                            code: .environment, message: f.message,
                            location: referenceLocation(scalar: location, style: style, offset: f.offset),
                            hint: f.hint))
                    } catch {
                        errors.append(PipelineError(code: .environment, message: "\(error)", location: location))
                    }
                }
                return ConfigNode(location: location, content: .scalar(text, style, tag: tag))

            case let .sequence(sequence):
                return ConfigNode(
                    location: location(sequence.mark),
                    content: .sequence(sequence.map { convert($0, isKey: false) }))

            case let .mapping(mapping):
                var entries: [ConfigNode.Entry] = []
                var index: [String: Int] = [:]
                var merged: [ConfigNode.Entry] = []
                for (keyNode, valueNode) in mapping {
                    guard case let .scalar(keyScalar) = keyNode else {
                        errors.append(PipelineError(
                            code: .badType, message: "mapping keys must be plain text, not a mapping or a list",
                            location: location(keyNode.mark)))
                        continue
                    }
                    let keyLocation = location(keyScalar.mark)
                    if keyScalar.string == "<<", keyScalar.style == .plain, keyScalar.tag.description.isEmpty {
                        merged.append(contentsOf: mergeSources(valueNode, at: keyLocation))
                        continue
                    }
                    let key = keyScalar.string
                    if let first = index[key] {
                        let firstAt = entries[first].keyLocation
                        errors.append(PipelineError(
                            code: .duplicateKey, message: "duplicate key '\(key)'", location: keyLocation,
                            hint: "first defined at \(firstAt.line):\(firstAt.column)"))
                        continue
                    }
                    index[key] = entries.count
                    entries.append(ConfigNode.Entry(
                        key: key, keyLocation: keyLocation, value: convert(valueNode, isKey: false)))
                }
                for entry in merged where index[entry.key] == nil {
                    index[entry.key] = entries.count
                    entries.append(entry)
                }
                return ConfigNode(location: location(mapping.mark), content: .mapping(entries, index: index))
            }
        }

        /// The pairs a `<<` key brings in: from a mapping, or from a list of mappings (earlier ones win).
        mutating func mergeSources(_ value: Yams.Node, at keyLocation: SourceLocation) -> [ConfigNode.Entry] {
            let sources: [Yams.Node]
            switch value {
            case .mapping: sources = [value]
            case let .sequence(seq) where seq.allSatisfy({ if case .mapping = $0 { true } else { false } }):
                sources = Array(seq)
            default:
                errors.append(PipelineError(
                    code: .badType, message: "'<<' must be followed by a mapping or a list of mappings",
                    location: keyLocation, hint: "for example <<: *defaults"))
                return []
            }
            var out: [ConfigNode.Entry] = []
            var seen = Set<String>()
            for source in sources {
                for entry in convert(source, isKey: false).entries ?? [] where seen.insert(entry.key).inserted {
                    out.append(entry)
                }
            }
            return out
        }

        /// The position of the `${` at `offset` in a scalar, when it can be confirmed in the source text
        /// (single-line plain or quoted scalars); otherwise the scalar's own position.
        mutating func referenceLocation(scalar: SourceLocation, style: ConfigNode.ScalarStyle, offset: Int) -> SourceLocation {
            if lines == nil {
                lines = source.split(separator: "\n", omittingEmptySubsequences: false).map { Array($0.unicodeScalars) }
            }
            let candidates: [Int]
            switch style {
            case .plain: candidates = [scalar.column + offset]
            case .singleQuoted, .doubleQuoted: candidates = [scalar.column + 1 + offset]
            case .literal, .folded: return scalar
            }
            guard let lines, scalar.line - 1 < lines.count else { return scalar }
            let line = lines[scalar.line - 1]
            for column in candidates {
                let i = column - 1
                if i + 1 < line.count, line[i] == "$", line[i + 1] == "{" {
                    return SourceLocation(file: scalar.file, line: scalar.line, column: column)
                }
            }
            return scalar
        }

        static func style(_ style: Yams.Node.Scalar.Style) -> ConfigNode.ScalarStyle {
            switch style {
            case .singleQuoted: return .singleQuoted
            case .doubleQuoted: return .doubleQuoted
            case .literal: return .literal
            case .folded: return .folded
            default: return .plain
            }
        }
    }
}
