/// Standard base64 (RFC 4648, with padding): the one encoder and decoder of the project (dead letters of
/// undecodable records, recordings of binary values).
public enum Base64 {
    static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// 0...63 for alphabet characters (also accepts the URL-safe `-` and `_`), 0xFE for `=`,
    /// 0xFD for skippable whitespace, 0xFF for anything else.
    static let decodeTable: [UInt8] = {
        var t = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = UInt8(i) }
        t[Int(UInt8(ascii: "-"))] = 62
        t[Int(UInt8(ascii: "_"))] = 63
        t[Int(UInt8(ascii: "="))] = 0xFE
        for c in [0x20, 0x0A, 0x0D, 0x09] { t[c] = 0xFD }
        return t
    }()

    /// Appends the base64 encoding of `bytes` to `out`.
    public static func encode(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        let n = bytes.count
        let outLen = ((n + 2) / 3) * 4
        guard outLen > 0 else { return }
        alphabet.withUnsafeBufferPointer { a in
            withAppendedRegion(&out, outLen) { region -> (used: Int, result: Void) in
                let o = region.baseAddress!.assumingMemoryBound(to: UInt8.self)
                var i = 0
                var j = 0
                while i + 3 <= n {
                    let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                    o[j] = a[Int(v >> 18)]
                    o[j + 1] = a[Int((v >> 12) & 63)]
                    o[j + 2] = a[Int((v >> 6) & 63)]
                    o[j + 3] = a[Int(v & 63)]
                    i += 3
                    j += 4
                }
                let rest = n - i
                if rest == 1 {
                    let v = UInt32(bytes[i]) << 16
                    o[j] = a[Int(v >> 18)]
                    o[j + 1] = a[Int((v >> 12) & 63)]
                    o[j + 2] = 0x3D
                    o[j + 3] = 0x3D
                } else if rest == 2 {
                    let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
                    o[j] = a[Int(v >> 18)]
                    o[j + 1] = a[Int((v >> 12) & 63)]
                    o[j + 2] = a[Int((v >> 6) & 63)]
                    o[j + 3] = 0x3D
                }
                return (outLen, ())
            }
        }
    }

    /// Decodes base64 text (padding optional; whitespace ignored). Returns nil on an invalid character
    /// or an impossible length.
    public static func decode(_ text: UnsafeRawBufferPointer) -> [UInt8]? {
        let n = text.count
        if n == 0 { return [] }
        return decodeTable.withUnsafeBufferPointer { t -> [UInt8]? in
            var failed = false
            let out = [UInt8](unsafeUninitializedCapacity: (n / 4 + 1) * 3) { o, count in
                var i = 0
                var j = 0
                // Fast path: whole quads of alphabet characters.
                while i + 4 <= n {
                    let a = t[Int(text[i])], b = t[Int(text[i + 1])], c = t[Int(text[i + 2])], d = t[Int(text[i + 3])]
                    if (a | b | c | d) & 0xC0 != 0 { break }
                    let v = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    o[j] = UInt8(truncatingIfNeeded: v >> 16)
                    o[j + 1] = UInt8(truncatingIfNeeded: v >> 8)
                    o[j + 2] = UInt8(truncatingIfNeeded: v)
                    i += 4
                    j += 3
                }
                // Slow path: the tail, padding, whitespace.
                var acc: UInt32 = 0
                var k = 0
                var padding = 0
                while i < n {
                    let v = t[Int(text[i])]
                    i += 1
                    if v == 0xFD { continue }
                    if v == 0xFE { padding += 1; continue }
                    if v == 0xFF || padding > 0 { failed = true; break }
                    acc = acc << 6 | UInt32(v)
                    k += 1
                    if k == 4 {
                        o[j] = UInt8(truncatingIfNeeded: acc >> 16)
                        o[j + 1] = UInt8(truncatingIfNeeded: acc >> 8)
                        o[j + 2] = UInt8(truncatingIfNeeded: acc)
                        j += 3
                        acc = 0
                        k = 0
                    }
                }
                if !failed {
                    switch k {
                    case 0: if padding > 2 { failed = true }
                    case 2:
                        o[j] = UInt8(truncatingIfNeeded: acc >> 4)
                        j += 1
                    case 3:
                        o[j] = UInt8(truncatingIfNeeded: acc >> 10)
                        o[j + 1] = UInt8(truncatingIfNeeded: acc >> 2)
                        j += 2
                    default: failed = true
                    }
                }
                count = failed ? 0 : j
            }
            return failed ? nil : out
        }
    }
}
