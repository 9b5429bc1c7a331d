/// Reading YAML scalar text as null, booleans and numbers. Decoding is by parsing the text, so a value
/// that came from `${PORT:-9090}` reads as an integer just like a literal `9090` would.
enum ScalarText {
    enum IntegerResult<T> {
        case value(T)
        case outOfRange
        case invalid
    }

    static func isNull(_ text: String) -> Bool {
        text.isEmpty || text == "~" || text == "null" || text == "Null" || text == "NULL"
    }

    /// `true/yes/on` and `false/no/off`, any case.
    static func bool(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: return nil
        }
    }

    /// Decimal (`8`, `-3`, `1_000_000`), hex `0x1F`, octal `0o17`, binary `0b101`.
    static func integer<T: FixedWidthInteger>(_ text: String, as type: T.Type = T.self) -> IntegerResult<T> {
        var body = Substring(text)
        var sign = ""
        if let first = body.first, first == "-" || first == "+" {
            sign = first == "-" ? "-" : ""
            body = body.dropFirst()
        }
        var radix = 10
        let lower = body.lowercased()
        if lower.hasPrefix("0x") { radix = 16 } else if lower.hasPrefix("0o") { radix = 8 } else if lower.hasPrefix("0b") { radix = 2 }
        if radix != 10 { body = body.dropFirst(2) }
        guard let firstDigit = body.first, firstDigit != "_", body.last != "_" else { return .invalid }
        var digits = ""
        for ch in body where ch != "_" {
            guard ch.isASCII, let v = ch.hexDigitValue, v < radix else { return .invalid }
            digits.append(ch)
        }
        guard !digits.isEmpty else { return .invalid }
        if let v = T(sign + digits, radix: radix) { return .value(v) }
        return .outOfRange
    }

    /// `1.5`, `-2`, `1e6`, `1_000.25`, `.inf`, `-.inf`, `.nan`.
    static func double(_ text: String) -> Double? {
        switch text {
        case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF": return .infinity
        case "-.inf", "-.Inf", "-.INF": return -.infinity
        case ".nan", ".NaN", ".NAN": return .nan
        default: break
        }
        let cleaned = text.filter { $0 != "_" }
        guard !text.hasPrefix("_"), !text.hasSuffix("_"), isDecimalNumber(cleaned) else { return nil }
        return Double(cleaned)
    }

    /// `[-+]?(digits(.digits?)?|.digits)([eE][-+]?digits)?`
    private static func isDecimalNumber(_ text: String) -> Bool {
        let s = Array(text.utf8)
        var i = 0
        func digits() -> Int {
            let start = i
            while i < s.count, s[i] >= 48, s[i] <= 57 { i += 1 }
            return i - start
        }
        if i < s.count, s[i] == 43 || s[i] == 45 { i += 1 }
        var mantissa = digits()
        if i < s.count, s[i] == 46 {
            i += 1
            mantissa += digits()
        }
        guard mantissa > 0 else { return false }
        if i < s.count, s[i] == 101 || s[i] == 69 {
            i += 1
            if i < s.count, s[i] == 43 || s[i] == 45 { i += 1 }
            guard digits() > 0 else { return false }
        }
        return i == s.count
    }
}
