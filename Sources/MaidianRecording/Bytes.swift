import MaidianEvents
// Byte-level helpers shared by the recording reader, the writer and the traffic generator:
// appending into [UInt8], decimal integers, JSON string escaping (base64 is MaidianEvents.Base64).

/// Appends `count` bytes to `array` and lets `body` fill them through a pointer; `body` returns how many
/// it used (the rest are removed). No allocation once the array's capacity suffices.
@inline(__always)
package func appendRegion(_ array: inout [UInt8], _ count: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
    withAppendedRegion(&array, count) { region in
        let used = body(region.baseAddress!.assumingMemoryBound(to: UInt8.self))
        return (used, ())
    }
}

extension Array where Element == UInt8 {
    /// Appends the UTF-8 bytes of a static string (a memcpy).
    @inline(__always)
    package mutating func append(static s: StaticString) {
        s.withUTF8Buffer { append(contentsOf: $0) }
    }

    /// Appends the UTF-8 bytes of a string.
    @inline(__always)
    package mutating func append(utf8 s: String) {
        var s = s
        s.withUTF8 { append(contentsOf: $0) }
    }

    /// Appends a decimal integer.
    @inline(__always)
    package mutating func append(decimal v: Int64) {
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
    package mutating func append(decimal v: Int) { append(decimal: Int64(v)) }
}

/// JSON text output helpers of the recording writer and the traffic generator.
package enum JSONText {
    /// Appends `bytes` as a quoted JSON string, escaped by MaidianEvents' one escaper
    /// (`JSONOut.appendEscaped`). Keys and header values of recorded records are untrusted bytes, and that
    /// escaper passes invalid UTF-8 through: here they are repaired first (each invalid sequence becomes
    /// U+FFFD, as `String(decoding:as:)` does), so a recording line is always valid JSON.
    package static func appendQuoted(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(0x22)
        if isValidUTF8(bytes) {
            JSONOut.appendEscaped(bytes, to: &out)
        } else {
            var repaired = String(decoding: bytes, as: UTF8.self)
            repaired.withUTF8 { JSONOut.appendEscaped(UnsafeRawBufferPointer($0), to: &out) }
        }
        out.append(0x22)
    }

    /// Appends a string as a quoted JSON string.
    package static func appendQuoted(_ s: String, to out: inout [UInt8]) {
        JSONOut.appendString(s, to: &out)
    }

    /// Appends `bytes` as a quoted JSON string.
    package static func appendQuoted(_ bytes: [UInt8], to out: inout [UInt8]) {
        bytes.withUnsafeBytes { appendQuoted($0, to: &out) }
    }
}

