import MaidianEvents
// Byte-level helpers shared by the recording reader, the writer and the traffic generator:
// appending into [UInt8], decimal integers, JSON string escaping (base64 is MaidianEvents.Base64).

/// Appends `count` bytes to `array` and lets `body` fill them through a pointer; `body` returns how many
/// it used (the rest are removed). No allocation once the array's capacity suffices.
@inline(__always)
func appendRegion(_ array: inout [UInt8], _ count: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
    withAppendedRegion(&array, count) { region in
        let used = body(region.baseAddress!.assumingMemoryBound(to: UInt8.self))
        return (used, ())
    }
}

extension Array where Element == UInt8 {
    /// Appends the UTF-8 bytes of a static string (a memcpy).
    @inline(__always)
    mutating func append(static s: StaticString) {
        s.withUTF8Buffer { append(contentsOf: $0) }
    }

    /// Appends the UTF-8 bytes of a string.
    @inline(__always)
    mutating func append(utf8 s: String) {
        var s = s
        s.withUTF8 { append(contentsOf: $0) }
    }

    /// Appends a decimal integer.
    @inline(__always)
    mutating func append(decimal v: Int64) {
        var tmp: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch: enough for 20 digits and a sign
        Swift.withUnsafeMutableBytes(of: &tmp) { raw in
            let p = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var i = 24
            var m = v.magnitude
            repeat {
                i -= 1
                p[i] = 0x30 &+ UInt8(truncatingIfNeeded: m % 10)
                m /= 10
            } while m != 0
            if v < 0 {
                i -= 1
                p[i] = 0x2D
            }
            append(contentsOf: UnsafeBufferPointer(start: p + i, count: 24 - i))
        }
    }

    /// Appends a decimal integer.
    @inline(__always)
    mutating func append(decimal v: Int) { append(decimal: Int64(v)) }
}

/// JSON text output helpers.
enum JSONText {
    /// 0 = copy as is; 1 = needs escaping (control, quote, backslash); 2 = non-ASCII (validate UTF-8).
    static let byteClass: [UInt8] = {
        var t = [UInt8](repeating: 0, count: 256)
        for i in 0..<0x20 { t[i] = 1 }
        t[0x22] = 1
        t[0x5C] = 1
        for i in 0x80..<0x100 { t[i] = 2 }
        return t
    }()

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `bytes` as a quoted JSON string. Valid UTF-8 is copied; control characters, `"` and `\`
    /// are escaped; bytes that are not valid UTF-8 become U+FFFD, so the output is always valid JSON.
    static func appendQuoted(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(0x22)
        appendEscaped(bytes, to: &out)
        out.append(0x22)
    }

    /// Appends a string as a quoted JSON string.
    static func appendQuoted(_ s: String, to out: inout [UInt8]) {
        var s = s
        s.withUTF8 { appendQuoted(UnsafeRawBufferPointer($0), to: &out) }
    }

    /// Appends `bytes` as a quoted JSON string.
    static func appendQuoted(_ bytes: [UInt8], to out: inout [UInt8]) {
        bytes.withUnsafeBytes { appendQuoted($0, to: &out) }
    }

    /// Appends the escaped content of a JSON string (without quotes).
    static func appendEscaped(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        let n = bytes.count
        guard n > 0 else { return }
        byteClass.withUnsafeBufferPointer { cls in
            var runStart = 0
            var i = 0
            while i < n {
                let b = bytes[i]
                let c = cls[Int(b)]
                if c == 0 { i += 1; continue }
                if c == 2 {
                    let len = validUTF8Length(bytes, i)
                    if len > 0 { i += len; continue }
                }
                // Flush the clean run, then write the escape.
                if runStart < i { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<i])) }
                if c == 2 {
                    out.append(0xEF); out.append(0xBF); out.append(0xBD)  // U+FFFD for an invalid byte
                } else {
                    switch b {
                    case 0x22: out.append(0x5C); out.append(0x22)
                    case 0x5C: out.append(0x5C); out.append(0x5C)
                    case 0x0A: out.append(0x5C); out.append(0x6E)
                    case 0x0D: out.append(0x5C); out.append(0x72)
                    case 0x09: out.append(0x5C); out.append(0x74)
                    case 0x08: out.append(0x5C); out.append(0x62)
                    case 0x0C: out.append(0x5C); out.append(0x66)
                    default:
                        out.append(0x5C); out.append(0x75); out.append(0x30); out.append(0x30)
                        out.append(hex[Int(b >> 4)]); out.append(hex[Int(b & 15)])
                    }
                }
                i += 1
                runStart = i
            }
            if runStart < n { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<n])) }
        }
    }

    /// Length of the valid UTF-8 sequence starting at `i` (a non-ASCII lead byte), or 0 if invalid.
    @inline(__always)
    static func validUTF8Length(_ p: UnsafeRawBufferPointer, _ i: Int) -> Int {
        let n = p.count
        let b0 = p[i]
        @inline(__always) func cont(_ k: Int) -> Bool { i + k < n && p[i + k] & 0xC0 == 0x80 }
        switch b0 {
        case 0xC2...0xDF:
            return cont(1) ? 2 : 0
        case 0xE0...0xEF:
            guard cont(1), cont(2) else { return 0 }
            let b1 = p[i + 1]
            if b0 == 0xE0 && b1 < 0xA0 { return 0 }  // overlong
            if b0 == 0xED && b1 >= 0xA0 { return 0 }  // UTF-16 surrogate
            return 3
        case 0xF0...0xF4:
            guard cont(1), cont(2), cont(3) else { return 0 }
            let b1 = p[i + 1]
            if b0 == 0xF0 && b1 < 0x90 { return 0 }  // overlong
            if b0 == 0xF4 && b1 >= 0x90 { return 0 }  // past U+10FFFF
            return 4
        default:
            return 0
        }
    }
}

