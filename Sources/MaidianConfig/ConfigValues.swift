/// A duration written in a pipeline file: `60s`, `500ms`, `10m`, `1h`, `1h30m`, `2d`, `1.5s`, or a bare
/// integer meaning milliseconds. Units: `ms`, `s`, `m`, `h`, `d`; components may repeat in any order and
/// be separated by spaces (`1h 30m`). Stored as whole milliseconds (fractions are rounded).
public struct ConfigDuration: Sendable, Hashable, Comparable, Decodable, CustomStringConvertible {
    /// The length in milliseconds (never negative).
    public var milliseconds: Int64

    /// The hint given with a duration that does not parse.
    public static let formatHint = "use e.g. 60s, 10m, 500ms"

    /// A duration of `milliseconds`.
    public init(milliseconds: Int64) {
        self.milliseconds = milliseconds
    }

    /// No time.
    public static let zero = ConfigDuration(milliseconds: 0)
    /// `n` milliseconds.
    public static func milliseconds(_ n: Int64) -> ConfigDuration { ConfigDuration(milliseconds: n) }
    /// `n` seconds.
    public static func seconds(_ n: Int64) -> ConfigDuration { ConfigDuration(milliseconds: n * 1000) }
    /// `n` minutes.
    public static func minutes(_ n: Int64) -> ConfigDuration { ConfigDuration(milliseconds: n * 60_000) }
    /// `n` hours.
    public static func hours(_ n: Int64) -> ConfigDuration { ConfigDuration(milliseconds: n * 3_600_000) }

    /// Parses the text forms above.
    ///
    /// - Throws: ``PipelineError`` (`.badValue`, no location) for anything else.
    public init(parsing text: String) throws {
        guard let value = Self.parse(text) else {
            throw PipelineError(code: .badValue, message: "invalid duration '\(text)'", hint: Self.formatHint)
        }
        self = value
    }

    /// Decodes from a string or integer scalar; errors carry the value's location.
    public init(from decoder: any Decoder) throws {
        self = try decoder.decodeConfigScalar(expected: "a duration", hint: Self.formatHint, parse: Self.parse)
    }

    /// The length in seconds.
    public var seconds: Double { Double(milliseconds) / 1000 }

    /// As a Swift `Duration`.
    public var duration: Duration { .milliseconds(milliseconds) }

    /// Canonical text: `1h30m`, `500ms`, `2d`, `0s`.
    public var description: String {
        if milliseconds == 0 { return "0s" }
        var rest = milliseconds
        var out = ""
        for (unit, size) in Self.units.reversed() where rest >= size {
            out += "\(rest / size)\(unit)"
            rest %= size
        }
        return out
    }

    /// Orders by length.
    public static func < (lhs: ConfigDuration, rhs: ConfigDuration) -> Bool { lhs.milliseconds < rhs.milliseconds }

    static let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]

    static func parse(_ text: String) -> ConfigDuration? {
        if let n = bareInteger(text) { return ConfigDuration(milliseconds: n) }
        var scanner = NumberScanner(text)
        var total: Int64 = 0
        var components = 0
        scanner.skipSpaces()
        while !scanner.isAtEnd {
            guard let number = scanner.number() else { return nil }
            scanner.skipSpaces()
            let unit = scanner.letters()
            guard let size = units.first(where: { $0.0 == unit })?.1,
                  let ms = number.times(size)
            else { return nil }
            let (sum, overflow) = total.addingReportingOverflow(ms)
            if overflow { return nil }
            total = sum
            components += 1
            scanner.skipSpaces()
        }
        return components > 0 ? ConfigDuration(milliseconds: total) : nil
    }
}

/// A size in bytes written in a pipeline file: `512KiB`, `16MiB`, `1GiB` (powers of 1024), `1KB`, `1MB`,
/// `1GB` (powers of 1000), `100B`, `1.5MiB`, or a bare integer meaning bytes. Units are case-insensitive
/// and may follow a space (`16 MiB`). `TB` and `TiB` also work.
public struct ByteSize: Sendable, Hashable, Comparable, Decodable, CustomStringConvertible {
    /// The size in bytes (never negative).
    public var bytes: Int

    /// The hint given with a size that does not parse.
    public static let formatHint = "use e.g. 512KiB, 16MiB, 1GiB, 1MB (10^6 bytes) or a number of bytes"

    /// A size of `bytes`.
    public init(bytes: Int) {
        self.bytes = bytes
    }

    /// `n` bytes.
    public static func bytes(_ n: Int) -> ByteSize { ByteSize(bytes: n) }
    /// `n` KiB (1024 bytes).
    public static func kibibytes(_ n: Int) -> ByteSize { ByteSize(bytes: n << 10) }
    /// `n` MiB.
    public static func mebibytes(_ n: Int) -> ByteSize { ByteSize(bytes: n << 20) }
    /// `n` GiB.
    public static func gibibytes(_ n: Int) -> ByteSize { ByteSize(bytes: n << 30) }

    /// Parses the text forms above.
    ///
    /// - Throws: ``PipelineError`` (`.badValue`, no location) for anything else.
    public init(parsing text: String) throws {
        guard let value = Self.parse(text) else {
            throw PipelineError(code: .badValue, message: "invalid size '\(text)'", hint: Self.formatHint)
        }
        self = value
    }

    /// Decodes from a string or integer scalar; errors carry the value's location.
    public init(from decoder: any Decoder) throws {
        self = try decoder.decodeConfigScalar(expected: "a size", hint: Self.formatHint, parse: Self.parse)
    }

    /// Canonical text: the largest unit that divides exactly (`16MiB`, `1MB`, `1500B`).
    public var description: String {
        if bytes == 0 { return "0B" }
        for (unit, size) in Self.units.reversed() where size > 1 && bytes % size == 0 {
            return "\(bytes / size)\(Self.spelling[unit] ?? unit)"
        }
        return "\(bytes)B"
    }

    /// Orders by size.
    public static func < (lhs: ByteSize, rhs: ByteSize) -> Bool { lhs.bytes < rhs.bytes }

    /// Sorted by size; binary units come before decimal ones of similar size so `description` prefers them.
    static let units: [(String, Int)] = [
        ("b", 1), ("kb", 1000), ("kib", 1 << 10), ("mb", 1_000_000), ("mib", 1 << 20),
        ("gb", 1_000_000_000), ("gib", 1 << 30), ("tb", 1_000_000_000_000), ("tib", 1 << 40),
    ]
    static let spelling = [
        "b": "B", "kb": "KB", "mb": "MB", "gb": "GB", "tb": "TB", "kib": "KiB", "mib": "MiB", "gib": "GiB", "tib": "TiB",
    ]

    static func parse(_ text: String) -> ByteSize? {
        if let n = bareInteger(text) { return n <= Int64(Int.max) ? ByteSize(bytes: Int(n)) : nil }
        var scanner = NumberScanner(text)
        scanner.skipSpaces()
        guard let number = scanner.number() else { return nil }
        scanner.skipSpaces()
        let unit = scanner.letters().lowercased()
        scanner.skipSpaces()
        guard scanner.isAtEnd else { return nil }
        let size: Int64
        if unit.isEmpty {
            guard number.fraction.isEmpty else { return nil }
            size = 1
        } else {
            guard let s = units.first(where: { $0.0 == unit })?.1 else { return nil }
            size = Int64(s)
        }
        guard let total = number.times(size), total <= Int64(Int.max) else { return nil }
        return ByteSize(bytes: Int(total))
    }
}

/// A plain non-negative decimal integer, `_` separators allowed (`1500`, `1_048_576`).
func bareInteger(_ text: String) -> Int64? {
    guard let first = text.utf8.first, first != 95, text.utf8.last != 95,
          text.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || $0 == 95 })
    else { return nil }
    return Int64(text.filter { $0 != "_" })
}

/// A tiny scanner for `<digits>[.<digits>]<letters>` components.
struct NumberScanner {
    struct Number {
        var whole: Int64
        var fraction: String

        /// `whole.fraction * unit`, rounded to an integer; `nil` on overflow.
        func times(_ unit: Int64) -> Int64? {
            let (product, overflow) = whole.multipliedReportingOverflow(by: unit)
            if overflow { return nil }
            guard !fraction.isEmpty, let f = Double("0." + fraction) else { return product }
            let (sum, overflow2) = product.addingReportingOverflow(Int64((f * Double(unit)).rounded()))
            return overflow2 ? nil : sum
        }
    }

    let chars: [UInt8]
    var i = 0

    init(_ text: String) { chars = Array(text.utf8) }

    var isAtEnd: Bool { i >= chars.count }

    mutating func skipSpaces() {
        while i < chars.count, chars[i] == 32 { i += 1 }
    }

    mutating func digits() -> String {
        let start = i
        while i < chars.count, chars[i] >= 48, chars[i] <= 57 { i += 1 }
        return String(decoding: chars[start..<i], as: UTF8.self)
    }

    /// `12`, `1.5`, `0.25`; not `.5`, `1.`, or signs.
    mutating func number() -> Number? {
        let whole = digits()
        guard !whole.isEmpty, let w = Int64(whole) else { return nil }
        var fraction = ""
        if i < chars.count, chars[i] == 46 {
            i += 1
            fraction = digits()
            guard !fraction.isEmpty else { return nil }
        }
        return Number(whole: w, fraction: fraction)
    }

    mutating func letters() -> String {
        let start = i
        while i < chars.count, (chars[i] >= 65 && chars[i] <= 90) || (chars[i] >= 97 && chars[i] <= 122) { i += 1 }
        return String(decoding: chars[start..<i], as: UTF8.self)
    }
}

extension Decoder {
    /// Reads a scalar's text and parses it; errors say `expected <expected> for 'key', got '<text>'`.
    func decodeConfigScalar<V>(expected: String, hint: String, parse: (String) -> V?) throws -> V {
        if let decoder = self as? NodeDecoder {
            guard let text = decoder.node.string else {
                throw decoder.session.mismatch(
                    expected: expected, node: decoder.node, codingPath: codingPath, hint: hint)
            }
            guard let value = parse(text) else {
                var error = decoder.session.mismatch(
                    expected: expected, node: decoder.node, codingPath: codingPath, hint: hint)
                error.code = .badValue
                throw error
            }
            return value
        }
        let container = try singleValueContainer()
        let text: String
        if let string = try? container.decode(String.self) {
            text = string
        } else {
            text = String(try container.decode(Int64.self))
        }
        guard let value = parse(text) else {
            throw PipelineError(code: .badValue, message: "expected \(expected), got '\(text)'", hint: hint)
        }
        return value
    }
}
