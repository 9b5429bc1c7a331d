/// `${VAR}` substitution in scalar values of pipeline files.
///
/// - `${VAR}`: the variable's value; an error if it is not set (an empty value is used as is).
/// - `${VAR:-default}`: the default when `VAR` is unset *or empty* (as in the shell).
/// - `${VAR-default}`: the default only when `VAR` is unset.
/// - `$${`: a literal `${`. A `$` not followed by `{` is kept as is.
///
/// Defaults may themselves contain references (`${A:-${B:-x}}`); they are only resolved when used.
/// Names are ASCII letters, digits and `_`, not starting with a digit.
///
/// ``ConfigDocument`` applies this to every scalar *value* (not to keys) after YAML parsing, so positions
/// stay right and the result is typed by parsing its text (`${PORT:-9090}` decodes as an integer).
/// A substituted value is never re-parsed as YAML structure: `${LIST}` stays one scalar.
public enum EnvironmentSubstitution {
    struct Failure: Error {
        var message: String
        var hint: String?
        /// Offset of the offending `${` in the text, in Unicode scalars.
        var offset: Int
    }

    /// Substitutes every reference in `text`.
    ///
    /// - Throws: ``PipelineError`` with code `.environment` and no location.
    public static func apply(to text: String, environment: [String: String]) throws -> String {
        do {
            return try substitute(text, environment: environment)
        } catch let f as Failure {
            throw PipelineError(code: .environment, message: f.message, hint: f.hint)
        }
    }

    /// Whether `text` contains anything this substitution would change.
    static func needsWork(_ text: String) -> Bool {
        text.contains("${")
    }

    static func substitute(_ text: String, environment: [String: String]) throws -> String {
        guard needsWork(text) else { return text }
        let scanner = Scanner(chars: Array(text.unicodeScalars), environment: environment)
        return try scanner.run(from: 0, inDefault: false, evaluate: true).text
    }

    private struct Scanner {
        let chars: [Unicode.Scalar]
        let environment: [String: String]

        /// Substitutes from `start` to the end of the text, or (in a default) to the matching `}`.
        /// Returns the result, the index after the consumed text, and whether a closing `}` was found.
        func run(from start: Int, inDefault: Bool, evaluate: Bool) throws -> (text: String, next: Int, closed: Bool) {
            var out = String.UnicodeScalarView()
            var i = start
            while i < chars.count {
                let c = chars[i]
                if c == "$" {
                    if i + 2 < chars.count, chars[i + 1] == "$", chars[i + 2] == "{" {
                        out.append(contentsOf: "${".unicodeScalars)
                        i += 3
                        continue
                    }
                    if i + 1 < chars.count, chars[i + 1] == "{" {
                        let (value, next) = try reference(at: i, evaluate: evaluate)
                        out.append(contentsOf: value.unicodeScalars)
                        i = next
                        continue
                    }
                } else if c == "}", inDefault {
                    return (String(out), i + 1, true)
                }
                out.append(c)
                i += 1
            }
            return (String(out), i, false)
        }

        /// Resolves the reference whose `$` is at `dollar`. Returns its value and the index after its `}`.
        func reference(at dollar: Int, evaluate: Bool) throws -> (String, Int) {
            var i = dollar + 2
            let nameStart = i
            while i < chars.count, isNameChar(chars[i], first: i == nameStart) { i += 1 }
            let name = String(String.UnicodeScalarView(chars[nameStart..<i]))
            guard i < chars.count else { throw unterminated(dollar) }
            guard !name.isEmpty else {
                throw Failure(
                    message: "invalid environment variable reference '\(snippet(from: dollar))'",
                    hint: "names are letters, digits and _; write $${ for a literal ${", offset: dollar)
            }
            enum Mode { case plain, colonDash, dash }
            let mode: Mode
            switch chars[i] {
            case "}":
                mode = .plain
                i += 1
            case ":" where i + 1 < chars.count && chars[i + 1] == "-":
                mode = .colonDash
                i += 2
            case "-":
                mode = .dash
                i += 1
            default:
                throw Failure(
                    message: "invalid environment variable reference '\(snippet(from: dollar))'",
                    hint: "use ${\(name)} or ${\(name):-default}", offset: dollar)
            }
            let value = evaluate ? environment[name] : ""
            switch mode {
            case .plain:
                guard let value else {
                    throw Failure(
                        message: "environment variable '\(name)' is not set",
                        hint: "use ${\(name):-default}", offset: dollar)
                }
                return (value, i)
            case .colonDash, .dash:
                let useDefault = evaluate && (value == nil || (mode == .colonDash && value!.isEmpty))
                let (fallback, next, closed) = try run(from: i, inDefault: true, evaluate: useDefault)
                guard closed else { throw unterminated(dollar) }
                return (useDefault ? fallback : (value ?? ""), next)
            }
        }

        func isNameChar(_ c: Unicode.Scalar, first: Bool) -> Bool {
            switch c {
            case "a"..."z", "A"..."Z", "_": return true
            case "0"..."9": return !first
            default: return false
            }
        }

        func unterminated(_ dollar: Int) -> Failure {
            Failure(
                message: "unterminated environment variable reference '\(snippet(from: dollar))'",
                hint: "close it with }, or write $${ for a literal ${", offset: dollar)
        }

        func snippet(from dollar: Int) -> String {
            var end = dollar
            while end < chars.count, chars[end] != "}", end - dollar < 30 { end += 1 }
            if end < chars.count, chars[end] == "}" { end += 1 }
            return String(String.UnicodeScalarView(chars[dollar..<end]))
        }
    }
}
