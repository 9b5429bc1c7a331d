#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A compiled POSIX extended regular expression (`regcomp`/`regexec`). `\d`, `\w`, `\s` (and upper-case
/// negations) outside brackets are translated to POSIX classes first.
public final class PosixRegex: @unchecked Sendable {
    /// A pattern `regcomp` rejected.
    public struct CompileError: Error, Sendable {
        /// `regerror`'s text.
        public var message: String
    }

    private var compiled = regex_t()
    /// The pattern as written.
    public let pattern: String

    /// Compiles `pattern` (extended syntax, no sub-match reporting).
    public init(_ pattern: String) throws {
        self.pattern = pattern
        let translated = PosixRegex.translate(pattern)
        let rc = regcomp(&compiled, translated, REG_EXTENDED | REG_NOSUB)
        if rc != 0 {
            var buf = [CChar](repeating: 0, count: 256)
            regerror(rc, &compiled, &buf, buf.count)
            let message = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            regfree(&compiled)
            throw CompileError(message: message)
        }
    }

    deinit { regfree(&compiled) }

    /// Whether the NUL-terminated bytes at `cString` match.
    public func matches(cString: UnsafePointer<CChar>) -> Bool {
        regexec(&compiled, cString, 0, nil, 0) == 0
    }

    /// Whether `text` matches.
    public func matches(_ text: String) -> Bool {
        text.withCString { matches(cString: $0) }
    }

    /// `\d` → `[0-9]`, `\D` → `[^0-9]`, `\w`, `\W`, `\s`, `\S` likewise, outside bracket expressions.
    static func translate(_ p: String) -> String {
        var out = ""
        var inBracket = false
        var chars = Array(p)[...]
        while let c = chars.popFirst() {
            if inBracket {
                out.append(c)
                if c == "]" { inBracket = false }
                continue
            }
            if c == "[" {
                out.append(c)
                inBracket = true
                if chars.first == "^" { out.append(chars.removeFirst()) }
                if chars.first == "]" { out.append(chars.removeFirst()) }
                continue
            }
            if c == "\\", let n = chars.first {
                let classes: [Character: String] = [
                    "d": "[0-9]", "D": "[^0-9]", "w": "[A-Za-z0-9_]", "W": "[^A-Za-z0-9_]",
                    "s": "[[:space:]]", "S": "[^[:space:]]",
                ]
                if let r = classes[n] {
                    out += r
                    chars.removeFirst()
                    continue
                }
                out.append(c)
                out.append(chars.removeFirst())
                continue
            }
            out.append(c)
        }
        return out
    }
}
