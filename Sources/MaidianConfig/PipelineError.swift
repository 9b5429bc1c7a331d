import Foundation

/// A position in a pipeline file. `line` and `column` are 1-based; columns count Unicode scalars
/// (as libyaml does).
public struct SourceLocation: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The file name as given to the loader (for example `pipelines/x.yaml`).
    public var file: String
    /// 1-based line.
    public var line: Int
    /// 1-based column.
    public var column: Int

    /// Creates a location.
    public init(file: String, line: Int, column: Int) {
        self.file = file
        self.line = line
        self.column = column
    }

    /// `file:line:column`.
    public var description: String { "\(file):\(line):\(column)" }

    /// Orders by file, then line, then column.
    public static func < (lhs: SourceLocation, rhs: SourceLocation) -> Bool {
        (lhs.file, lhs.line, lhs.column) < (rhs.file, rhs.line, rhs.column)
    }
}

/// The one error type of the MaidianPipeline module.
///
/// Renders as `pipelines/x.yaml:12:5: unknown key 'windw' (did you mean 'window'?)`: the location (when
/// known), the message, then the hint in parentheses (when there is one). Several errors found at once are
/// thrown together as ``PipelineErrors``.
public struct PipelineError: Error, CustomStringConvertible {
    /// What kind of problem this is (for tests and for tools; people read `message`).
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// A mapping key no one asked for (usually a typo).
        case unknownKey
        /// A required key is absent.
        case missingKey
        /// The value has the right shape but is not acceptable (out of range, bad duration, unknown case).
        case badValue
        /// The value has the wrong shape (a list where a number was expected, `eight` for an integer).
        case badType
        /// The file is not valid YAML.
        case yamlSyntax
        /// The file is nested too deep or its aliases expand too far (``YAMLLimits``).
        case tooLarge
        /// A key appears twice in the same mapping.
        case duplicateKey
        /// The file could not be read.
        case io
        /// A `kind:` that no registered stage has.
        case unknownKind
        /// A `${VAR}` reference to an unset environment variable, or a malformed reference.
        case environment
        /// Anything else that makes a configuration unusable.
        case invalid
    }

    /// What kind of problem this is.
    public var code: Code
    /// The problem, in words, without location or hint.
    public var message: String
    /// Where in which file, when known.
    public var location: SourceLocation?
    /// A suggestion (`did you mean 'window'?`, `use e.g. 60s, 10m, 500ms`).
    public var hint: String?
    /// The lower-level error this one wraps, if any.
    public var underlying: (any Error)?

    /// Creates an error.
    public init(
        code: Code, message: String, location: SourceLocation? = nil, hint: String? = nil,
        underlying: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.location = location
        self.hint = hint
        self.underlying = underlying
    }

    /// `file:line:column: message (hint)`; parts that are unknown are left out.
    public var description: String {
        var text = ""
        if let location { text += "\(location): " }
        text += message
        if let hint, !hint.isEmpty { text += " (\(hint))" }
        return text
    }
}

extension PipelineError: LocalizedError {
    /// Same as ``description``.
    public var errorDescription: String? { description }
}

/// Several ``PipelineError``s reported together (for example every unknown key of a pipeline file).
public struct PipelineErrors: Error, CustomStringConvertible {
    /// The errors, in the order they were given.
    public var errors: [PipelineError]

    /// Groups errors.
    public init(_ errors: [PipelineError]) {
        self.errors = errors
    }

    /// One error per line.
    public var description: String {
        errors.map(\.description).joined(separator: "\n")
    }

    /// The errors inside any error: a ``PipelineError`` gives itself, ``PipelineErrors`` its members, and
    /// any other error is wrapped as a `.invalid` ``PipelineError`` without location.
    public static func flatten(_ error: any Error) -> [PipelineError] {
        switch error {
        case let e as PipelineError: return [e]
        case let e as PipelineErrors: return e.errors
        default: return [PipelineError(code: .invalid, message: "\(error)", underlying: error)]
        }
    }

    /// The error to throw for a list of problems: `nil` when the list is empty, the ``PipelineError``
    /// itself when there is one, otherwise ``PipelineErrors`` sorted by location with exact repeats removed
    /// (errors without a location go last).
    public static func combined(_ errors: [PipelineError]) -> (any Error)? {
        let unique = sortedUnique(errors)
        switch unique.count {
        case 0: return nil
        case 1: return unique[0]
        default: return PipelineErrors(unique)
        }
    }

    package static func sortedUnique(_ errors: [PipelineError]) -> [PipelineError] {
        var seen = Set<String>()
        var out: [PipelineError] = []
        for e in errors where seen.insert(e.description).inserted { out.append(e) }
        // Stable sort: located errors by location, unlocated ones after, in their original order.
        return out.enumerated().sorted { a, b in
            switch (a.element.location, b.element.location) {
            case let (la?, lb?): return la != lb ? la < lb : a.offset < b.offset
            case (.some, .none): return true
            case (.none, .some): return false
            case (.none, .none): return a.offset < b.offset
            }
        }.map(\.element)
    }

    /// Gathers errors from several independent steps (for example decoding each stage of a pipeline) so
    /// that `maidian check` can report all of them at once.
    ///
    /// ```swift
    /// var errors = PipelineErrors.Collector()
    /// let configs = stages.map { s in errors.attempt { try s.node.decode(Dedup.Config.self, ignoringKeys: ["kind"]) } }
    /// try errors.check()
    /// ```
    public struct Collector: Sendable {
        /// Everything recorded so far.
        public private(set) var errors: [PipelineError] = []

        /// An empty collector.
        public init() {}

        /// Whether nothing was recorded.
        public var isEmpty: Bool { errors.isEmpty }

        /// Records an error (flattened, see ``PipelineErrors/flatten(_:)``).
        public mutating func record(_ error: any Error) {
            errors.append(contentsOf: PipelineErrors.flatten(error))
        }

        /// Runs `body`; on error records it and returns `nil`.
        public mutating func attempt<T>(_ body: () throws -> T) -> T? {
            do { return try body() } catch {
                record(error)
                return nil
            }
        }

        /// Throws everything recorded (see ``PipelineErrors/combined(_:)``), or returns if nothing was.
        public func check() throws {
            if let error = PipelineErrors.combined(errors) { throw error }
        }
    }
}

extension PipelineErrors: LocalizedError {
    /// Same as ``description``.
    public var errorDescription: String? { description }
}

extension PipelineError {
    /// A hint for a misspelled word: `did you mean 'dedup'?` when one candidate is within edit distance 2
    /// (or shares a prefix of at least 3 characters), otherwise `expected one of: a, b, c`; `nil` when
    /// there are no candidates.
    public static func suggestion(for word: String, among candidates: [String]) -> String? {
        if let match = Spelling.closest(to: word, among: candidates) { return "did you mean '\(match)'?" }
        if candidates.isEmpty { return nil }
        return "expected one of: " + candidates.joined(separator: ", ")
    }
}

/// Edit-distance helpers for "did you mean" hints.
enum Spelling {
    /// Optimal-string-alignment distance (insertions, deletions, substitutions, adjacent transpositions),
    /// ignoring case.
    static func distance(_ a: String, _ b: String) -> Int {
        let s = Array(a.lowercased().unicodeScalars)
        let t = Array(b.lowercased().unicodeScalars)
        if s.isEmpty { return t.count }
        if t.isEmpty { return s.count }
        var d = Array(repeating: Array(repeating: 0, count: t.count + 1), count: s.count + 1)
        for i in 0...s.count { d[i][0] = i }
        for j in 0...t.count { d[0][j] = j }
        for i in 1...s.count {
            for j in 1...t.count {
                let cost = s[i - 1] == t[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, s[i - 1] == t[j - 2], s[i - 2] == t[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[s.count][t.count]
    }

    /// The candidate closest to `word`: edit distance at most 2 (and less than the longer word's length),
    /// else a prefix relation of at least 3 characters. Ties go to the earlier candidate.
    static func closest(to word: String, among candidates: [String]) -> String? {
        var best: (candidate: String, score: Int)?
        for c in candidates where c != word {
            let d = distance(word, c)
            var score = Int.max
            if d <= 2 && d < max(word.count, c.count) {
                score = d
            } else {
                let w = word.lowercased(), l = c.lowercased()
                if (w.count >= 3 && l.hasPrefix(w)) || (l.count >= 3 && w.hasPrefix(l)) { score = 3 }
            }
            if score != Int.max, best == nil || score < best!.score { best = (c, score) }
        }
        return best?.candidate
    }
}
