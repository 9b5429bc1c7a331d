/// A validating, in-place JSON scanner over bytes that are followed by at least 32 readable padding bytes.
///
/// It never builds a tree: callers walk the structure and keep offsets. Every byte is validated
/// (strict RFC 8259: UTF-8, escapes, number syntax, nesting), so a value that scans cleanly can be copied
/// verbatim into the output.
@usableFromInline
struct JSONScanner {
    @usableFromInline let p: UnsafePointer<UInt8>
    @usableFromInline let end: Int
    @usableFromInline var pos: Int
    /// Set on the first error; scanning functions then return early.
    @usableFromInline var failed = false
    @usableFromInline var errorPos = 0
    @usableFromInline var errorWhat: StaticString = ""

    /// Nesting limit: deeper documents are rejected as malformed rather than risking the stack.
    static let maxDepth = 256

    init(base: UnsafePointer<UInt8>, start: Int, end: Int) {
        self.p = base
        self.pos = start
        self.end = end
    }

    @inline(__always) mutating func fail(_ what: StaticString) {
        if !failed { failed = true; errorPos = pos; errorWhat = what }
    }

    @inline(__always) mutating func skipWhitespace() {
        // Compact JSON (the common case) has none: one compare and out.
        while pos < end {
            let c = p[pos]
            if c > 0x20 { return }
            if c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { pos &+= 1 } else { return }
        }
    }

    @inline(__always) func peek() -> UInt8 { pos < end ? p[pos] : 0 }

    /// `skipWhitespace()` then `peek()`: compact JSON has no whitespace, so this is one load and one compare.
    @inline(__always) mutating func nextByte() -> UInt8 {
        if pos < end {
            let c = p[pos]
            if c > 0x20 { return c }
        }
        skipWhitespace()
        return peek()
    }

    /// Result of scanning a string.
    struct StringInfo {
        var start: Int
        var end: Int
        var escaped: Bool
        var decodedLength: Int
    }

    /// Bit 7 of each byte of `w` that is a quote, a backslash, a control character or non-ASCII. The lowest
    /// flagged byte is exact; bytes above it may be flagged falsely (borrows), which callers never look at.
    @inline(__always) static func specialBytes(_ w: UInt64) -> UInt64 {
        let q = w ^ 0x2222_2222_2222_2222
        let b = w ^ 0x5C5C_5C5C_5C5C_5C5C
        return (((q &- 0x0101_0101_0101_0101) & ~q)
            | ((b &- 0x0101_0101_0101_0101) & ~b)
            | ((w &- 0x2020_2020_2020_2020) & ~w)
            | w) & 0x8080_8080_8080_8080
    }

    /// The bit-7 flags of `m` (as from `specialBytes`) packed into the low 8 bits, byte `i` → bit `i`.
    @inline(__always) static func packFlags(_ m: UInt64) -> UInt64 {
        ((m >> 7) &* 0x0102_0408_1020_4080) >> 56
    }

    /// For the string whose opening quote is at `at`: how many plain ASCII bytes start it (up to 24), and
    /// whether the byte after them is its closing quote (within `end`). Three words are checked at once,
    /// without a loop or a branch per word; most strings end there.
    @inline(__always) func shortPlainString(_ at: Int) -> (length: Int, closed: Bool) {
        let raw = UnsafeRawPointer(p + (at &+ 1))
        let m0 = JSONScanner.packFlags(JSONScanner.specialBytes(raw.loadUnaligned(as: UInt64.self)))
        let m1 = JSONScanner.packFlags(JSONScanner.specialBytes(raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        let m2 = JSONScanner.packFlags(JSONScanner.specialBytes(raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self)))
        let k = (m0 | m1 << 8 | m2 << 16 | 1 << 24).trailingZeroBitCount
        let i = at &+ 1 &+ k
        return (k, k < 24 && i < end && p[i] == 0x22)
    }

    /// Scans a string starting at the opening quote. Returns content bounds (without quotes).
    ///
    /// Short plain strings end in `shortPlainString`; everything else (longer strings, escapes, non-ASCII,
    /// errors) continues in `scanStringRest`.
    @inline(__always) mutating func scanString() -> StringInfo {
        let contentStart = pos &+ 1
        let (k, closed) = shortPlainString(pos)
        let i = contentStart &+ k
        if closed {
            pos = i &+ 1
            return StringInfo(start: contentStart, end: i, escaped: false, decodedLength: k)
        }
        return scanStringRest(contentStart, Swift.min(i, end))
    }

    /// The general string scan from `i` on (everything from `contentStart` to `i` is plain ASCII).
    @inline(never) mutating func scanStringRest(_ contentStart: Int, _ from: Int) -> StringInfo {
        var i = from
        var savings = 0
        var escaped = false
        let end = self.end
        let p = self.p
        while true {
            // 16, then 8 bytes at a time while no quote, backslash, control or non-ASCII byte is among them.
            while i &+ 16 <= end {
                let m0 = JSONScanner.specialBytes(UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self))
                let m1 = JSONScanner.specialBytes(UnsafeRawPointer(p + i).loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                if m0 | m1 == 0 { i &+= 16; continue }
                break
            }
            while i &+ 8 <= end {
                let m = JSONScanner.specialBytes(UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self))
                if m == 0 { i &+= 8; continue }
                i &+= m.trailingZeroBitCount >> 3
                break
            }
            if i >= end { pos = i; fail("unterminated string"); return StringInfo(start: contentStart, end: i, escaped: escaped, decodedLength: 0) }
            let c = p[i]
            if c == 0x22 {
                pos = i &+ 1
                return StringInfo(start: contentStart, end: i, escaped: escaped, decodedLength: i &- contentStart &- savings)
            } else if c == 0x5C {
                escaped = true
                if i &+ 1 >= end { pos = i; fail("unterminated escape"); return StringInfo(start: contentStart, end: i, escaped: true, decodedLength: 0) }
                let e = p[i &+ 1]
                switch e {
                case 0x22, 0x5C, 0x2F, 0x62, 0x66, 0x6E, 0x72, 0x74:
                    savings &+= 1
                    i &+= 2
                case 0x75:
                    guard let cp = hex4(i &+ 2) else { pos = i; fail("bad \\u escape"); return StringInfo(start: contentStart, end: i, escaped: true, decodedLength: 0) }
                    if cp >= 0xD800 && cp <= 0xDBFF {
                        // A high surrogate must be followed by an escaped low surrogate.
                        if i &+ 11 < end && p[i &+ 6] == 0x5C && p[i &+ 7] == 0x75, let lo = hex4(i &+ 8), lo >= 0xDC00 && lo <= 0xDFFF {
                            savings &+= 12 &- 4
                            i &+= 12
                        } else {
                            pos = i; fail("lone surrogate in \\u escape"); return StringInfo(start: contentStart, end: i, escaped: true, decodedLength: 0)
                        }
                    } else if cp >= 0xDC00 && cp <= 0xDFFF {
                        pos = i; fail("lone surrogate in \\u escape"); return StringInfo(start: contentStart, end: i, escaped: true, decodedLength: 0)
                    } else {
                        savings &+= 6 &- (cp < 0x80 ? 1 : (cp < 0x800 ? 2 : 3))
                        i &+= 6
                    }
                default:
                    pos = i; fail("bad escape"); return StringInfo(start: contentStart, end: i, escaped: true, decodedLength: 0)
                }
            } else if c < 0x20 {
                pos = i; fail("control character in string"); return StringInfo(start: contentStart, end: i, escaped: escaped, decodedLength: 0)
            } else if c >= 0x80 {
                // A run of non-ASCII text (most scripts but Latin) is validated here, sequence after sequence,
                // rather than each character going back through the word tests above.
                repeat {
                    let n = utf8SequenceLength(at: i)
                    if n == 0 { pos = i; fail("invalid UTF-8"); return StringInfo(start: contentStart, end: i, escaped: escaped, decodedLength: 0) }
                    i &+= n
                } while i < end && p[i] >= 0x80
            } else {
                i &+= 1  // a false positive of the word test
            }
        }
    }

    @inline(__always) func hex4(_ at: Int) -> UInt32? {
        if at &+ 4 > end { return nil }
        var v: UInt32 = 0
        for k in 0..<4 {
            let c = p[at &+ k]
            var d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c &- 0x30)
            case 0x41...0x46: d = UInt32(c &- 0x41 &+ 10)
            case 0x61...0x66: d = UInt32(c &- 0x61 &+ 10)
            default: return nil
            }
            v = v << 4 | d
        }
        return v
    }

    /// Length of a valid UTF-8 multi-byte sequence at `i`, or 0 when invalid.
    @inline(__always) func utf8SequenceLength(at i: Int) -> Int {
        let c = p[i]
        @inline(__always) func cont(_ k: Int, _ lo: UInt8 = 0x80, _ hi: UInt8 = 0xBF) -> Bool {
            i &+ k < end && p[i &+ k] >= lo && p[i &+ k] <= hi
        }
        switch c {
        case 0xC2...0xDF: return cont(1) ? 2 : 0
        case 0xE0: return cont(1, 0xA0) && cont(2) ? 3 : 0
        case 0xE1...0xEC, 0xEE, 0xEF: return cont(1) && cont(2) ? 3 : 0
        case 0xED: return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0
        case 0xF0: return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0
        case 0xF1...0xF3: return cont(1) && cont(2) && cont(3) ? 4 : 0
        case 0xF4: return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0
        default: return 0
        }
    }

    /// How many ASCII digits start at `i` (at most 8), from one word: the lowest byte that is below `0` or
    /// above `9` (the borrow and carry of the two tests only reach bytes above it).
    @inline(__always) func digitRun8(_ i: Int) -> Int {
        let w = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)
        let other = ((w &+ 0x4646_4646_4646_4646) | (w &- 0x3030_3030_3030_3030)) & 0x8080_8080_8080_8080
        return other == 0 ? 8 : other.trailingZeroBitCount >> 3
    }

    /// The value of the `n` (1...8) ASCII digits at `i`: the word is shifted so that they are its top bytes,
    /// the bottom bytes become `0`s, then the usual three multiply-add steps.
    @inline(__always) func digitsValue(_ i: Int, _ n: Int) -> UInt64 {
        let w = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)
        // Masking shifts (no over-shift branches): `shift` is 0...56 for n in 1...8; the fill is shifted
        // from the fill already shifted by one (0x30... >> 1), so that n = 8 (shift 0) gives no fill.
        let shift = UInt64(truncatingIfNeeded: 64 &- n &* 8)
        var v = ((w &<< shift) | (0x1818_1818_1818_1818 &>> (63 &- shift))) &- 0x3030_3030_3030_3030
        v = (v &* 10) &+ (v >> 8)
        v = (((v & 0x0000_00FF_0000_00FF) &* 0x000F_4240_0000_0064)
            &+ (((v >> 16) & 0x0000_00FF_0000_00FF) &* 0x0000_2710_0000_0001)) >> 32
        return v
    }

    /// Where a plain integer at `at` ends (an optional `-`, then 1 to 15 digits without a leading zero, not
    /// followed by `.`, `e` or `E`), or -1 for anything else (`scanNumber` decides).
    @inline(__always) func plainIntegerEnd(_ at: Int) -> Int {
        let d = p[at] == 0x2D ? at &+ 1 : at
        var run = digitRun8(d)
        if run == 8 { run &+= digitRun8(d &+ 8) }
        let j = d &+ run
        let next = p[j]
        return run > 0 && run < 16 && p[d] != 0x30 && next != 0x2E && next | 0x20 != 0x65 && j <= end ? j : -1
    }

    /// The value of the plain integer `p[at..<to]` that `plainIntegerEnd` found.
    @inline(__always) func plainIntegerValue(_ at: Int, _ to: Int) -> Int64 {
        let neg = p[at] == 0x2D
        let d = neg ? at &+ 1 : at
        let run = to &- d
        let v = run <= 8 ? digitsValue(d, run) : digitsValue(d, 8) &* powerOf10(run &- 8) &+ digitsValue(d &+ 8, run &- 8)
        return neg ? 0 &- Int64(v) : Int64(v)
    }

    /// Scans a number. Returns whether it is an integer that fits Int64, and its value then.
    @inline(__always) mutating func scanNumber() -> (isInteger: Bool, value: Int64) {
        var i = pos
        var neg = false
        if i < end && p[i] == 0x2D { neg = true; i &+= 1 }
        guard i < end, p[i] >= 0x30 && p[i] <= 0x39 else { pos = i; fail("bad number"); return (false, 0) }
        var value: Int64 = 0
        var overflow = false
        if p[i] == 0x30 {
            i &+= 1
        } else {
            // The integer digits a word at a time; up to 16 of them (every time stamp and id) without a loop
            // per digit, and no overflow is possible below 19.
            var run = digitRun8(i)
            if run == 8 { run &+= digitRun8(i &+ 8) }
            if run == 16 { run &+= digitRun8(i &+ 16) }
            run = Swift.min(run, end &- i)
            if run <= 8 {
                value = Int64(digitsValue(i, run))
                i &+= run
            } else if run <= 16 {
                value = Int64(digitsValue(i, 8) &* powerOf10(run &- 8) &+ digitsValue(i &+ 8, run &- 8))
                i &+= run
            } else {
                // The magnitude in 64 unsigned bits: -9223372036854775808 (Int64.min) fits, its positive does not.
                // Its bit pattern negated with wrapping below gives Int64.min exactly.
                var magnitude: UInt64 = 0
                while i < end, p[i] >= 0x30 && p[i] <= 0x39 {
                    let (m, o1) = magnitude.multipliedReportingOverflow(by: 10)
                    let (a, o2) = m.addingReportingOverflow(UInt64(p[i] &- 0x30))
                    overflow = overflow || o1 || o2
                    magnitude = a
                    i &+= 1
                }
                if magnitude > (neg ? UInt64(1) << 63 : UInt64(Int64.max)) { overflow = true }
                value = Int64(bitPattern: magnitude)
            }
        }
        var isInteger = !overflow
        var fractionStart = -1
        if i < end && p[i] == 0x2E {
            isInteger = false
            i &+= 1
            fractionStart = i
            guard i < end, p[i] >= 0x30 && p[i] <= 0x39 else { pos = i; fail("bad fraction"); return (false, 0) }
            while i < end, p[i] >= 0x30 && p[i] <= 0x39 { i &+= 1 }
        }
        var exponentStart = -1
        if i < end && (p[i] == 0x65 || p[i] == 0x45) {
            isInteger = false
            i &+= 1
            exponentStart = i
            if i < end && (p[i] == 0x2B || p[i] == 0x2D) { i &+= 1 }
            guard i < end, p[i] >= 0x30 && p[i] <= 0x39 else { pos = i; fail("bad exponent"); return (false, 0) }
            while i < end, p[i] >= 0x30 && p[i] <= 0x39 { i &+= 1 }
        }
        if overflow && fractionStart < 0 && exponentStart < 0 {
            // An integer literal must fit 64 bits (wire format §2): a 30-digit id would lose its digits as a
            // double, so it is bad JSON, not silently rounded.
            pos = neg ? pos &+ 1 : pos
            fail("integer beyond 64 bits")
            return (false, 0)
        }
        if overflow || exponentStart >= 0 {
            // Not a 64-bit integer: it must at least be a finite double (wire format §2: else bad JSON).
            let digitsStart = neg ? pos &+ 1 : pos
            let intEnd = fractionStart >= 0 ? fractionStart &- 1 : (exponentStart >= 0 ? exponentStart &- 1 : i)
            if !fitsDouble(digitsStart, intEnd, exponentStart, i) {
                pos = digitsStart
                fail("number beyond the range of a double")
                return (false, 0)
            }
        }
        pos = i
        return (isInteger, neg ? 0 &- value : value)
    }

    /// Whether the number whose integer digits are `p[digits..<intEnd]` and whose exponent (sign and digits) is
    /// `p[exponent..<to]` (`exponent < 0`: none) is a finite double. Decides by the decimal magnitude; only
    /// numbers right at the edge (about 1.8e308) are parsed.
    @inline(never)
    func fitsDouble(_ digits: Int, _ intEnd: Int, _ exponent: Int, _ to: Int) -> Bool {
        var e = 0
        if exponent >= 0 {
            var k = exponent
            var negative = false
            if p[k] == 0x2B || p[k] == 0x2D { negative = p[k] == 0x2D; k &+= 1 }
            while k < to {
                e = Swift.min(e &* 10 &+ Int(p[k] &- 0x30), 1 << 40)  // saturates: far beyond any double
                k &+= 1
            }
            if negative { e = 0 &- e }
        }
        // Integer digits after leading zeros: the value is below 10^(count + e).
        var first = digits
        while first < intEnd && p[first] == 0x30 { first &+= 1 }
        let magnitude = (intEnd &- first) &+ e
        if intEnd == first {
            if e <= 308 { return true }  // below 1e308
        } else {
            if magnitude <= 308 { return true }
            if magnitude > 309 { return false }
        }
        let text = String(decoding: UnsafeBufferPointer(start: p + digits, count: to &- digits), as: UTF8.self)
        return Double(text)?.isFinite ?? false
    }

    /// 10^n for n in 1...8.
    @inline(__always) func powerOf10(_ n: Int) -> UInt64 {
        switch n {
        case 1: return 10
        case 2: return 100
        case 3: return 1000
        case 4: return 10_000
        case 5: return 100_000
        case 6: return 1_000_000
        case 7: return 10_000_000
        default: return 100_000_000
        }
    }

    @inline(__always) mutating func scanLiteral(_ first: UInt8) -> ValueKind {
        // true / false / null
        let lit: (UInt32, Int, ValueKind)
        switch first {
        case 0x74: lit = (0x6575_7274, 4, .bool)  // "true"
        case 0x6E: lit = (0x6C6C_756E, 4, .null)  // "null"
        default:
            // "false": 'f' then "alse"
            if pos &+ 5 <= end, UnsafeRawPointer(p + (pos &+ 1)).loadUnaligned(as: UInt32.self) == 0x6573_6C61 {
                pos &+= 5
                return .bool
            }
            fail("bad literal")
            return .null
        }
        if pos &+ lit.1 <= end, UnsafeRawPointer(p + pos).loadUnaligned(as: UInt32.self) == lit.0 {
            pos &+= lit.1
            return lit.2
        }
        fail("bad literal")
        return .null
    }

    /// Scans any value, validating it. Returns its kind.
    @discardableResult
    mutating func skipValue(depth: Int = 0) -> ValueKind {
        skipWhitespace()
        guard pos < end else { fail("unexpected end"); return .null }
        let c = p[pos]
        switch c {
        case 0x22:
            _ = scanString()
            return .string
        case 0x7B:
            skipObject(depth: depth &+ 1)
            return .object
        case 0x5B:
            skipArray(depth: depth &+ 1)
            return .array
        case 0x74, 0x66, 0x6E:
            return scanLiteral(c)
        case 0x2D, 0x30...0x39:
            _ = scanNumber()
            return .number
        default:
            fail("unexpected character")
            return .null
        }
    }

    mutating func skipObject(depth: Int) {
        if depth > JSONScanner.maxDepth { fail("nesting too deep"); return }
        pos &+= 1  // {
        skipWhitespace()
        if peek() == 0x7D { pos &+= 1; return }
        while !failed {
            skipWhitespace()
            guard peek() == 0x22 else { fail("expected a key"); return }
            _ = scanString()
            skipWhitespace()
            guard peek() == 0x3A else { fail("expected ':'"); return }
            pos &+= 1
            skipValue(depth: depth)
            skipWhitespace()
            let c = peek()
            if c == 0x2C { pos &+= 1; continue }
            if c == 0x7D { pos &+= 1; return }
            fail("expected ',' or '}'")
        }
    }

    mutating func skipArray(depth: Int) {
        if depth > JSONScanner.maxDepth { fail("nesting too deep"); return }
        pos &+= 1  // [
        skipWhitespace()
        if peek() == 0x5D { pos &+= 1; return }
        while !failed {
            skipValue(depth: depth)
            skipWhitespace()
            let c = peek()
            if c == 0x2C { pos &+= 1; continue }
            if c == 0x5D { pos &+= 1; return }
            fail("expected ',' or ']'")
        }
    }

    /// Scans an array, reporting whether every element is a string.
    mutating func scanArrayAllStrings() -> Bool {
        pos &+= 1
        skipWhitespace()
        if peek() == 0x5D { pos &+= 1; return true }
        var all = true
        while !failed {
            skipWhitespace()
            if peek() == 0x22 { _ = scanString() } else { all = false; skipValue(depth: 1) }
            skipWhitespace()
            let c = peek()
            if c == 0x2C { pos &+= 1; continue }
            if c == 0x5D { pos &+= 1; return all }
            fail("expected ',' or ']'")
        }
        return all
    }
}

/// Byte classes for names.
enum NameClass {
    static let first: UInt8 = 1
    static let rest: UInt8 = 2
    /// `nonisolated(unsafe)` is safe: filled once in this initializer, only read afterwards.
    nonisolated(unsafe) static let table: UnsafePointer<UInt8> = {
        let t = UnsafeMutablePointer<UInt8>.allocate(capacity: 256)
        for c in 0..<256 {
            var k: UInt8 = 0
            let isAlpha = (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
            if isAlpha || c == 0x5F || c == 0x24 { k |= first | rest }
            if c >= 0x30 && c <= 0x39 { k |= rest }
            t[c] = k
        }
        return UnsafePointer(t)
    }()
}

/// Checks a property or event name against `^[A-Za-z_$][A-Za-z0-9_$]{0,99}$`.
@inline(__always)
func isValidName(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
    let n = end &- start
    if n < 1 || n > 100 { return false }
    let t = NameClass.table
    guard t[Int(p[start])] & NameClass.first != 0 else { return false }
    var valid = NameClass.rest
    var i = start &+ 1
    while i < end {
        valid &= t[Int(p[i])]
        i &+= 1
    }
    return valid != 0
}

/// Decodes JSON string content (between quotes, already validated) into UTF-8 bytes.
public func unescapeJSONString(_ raw: UnsafeRawBufferPointer) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(raw.count)
    var i = 0
    func hex(_ at: Int) -> UInt32 {
        var v: UInt32 = 0
        for k in 0..<4 {
            let c = raw[at + k]
            let d: UInt32 = c <= 0x39 ? UInt32(c - 0x30) : (c <= 0x46 ? UInt32(c - 0x41 + 10) : UInt32(c - 0x61 + 10))
            v = v << 4 | d
        }
        return v
    }
    while i < raw.count {
        let c = raw[i]
        if c != 0x5C { out.append(c); i += 1; continue }
        let e = raw[i + 1]
        switch e {
        case 0x62: out.append(0x08); i += 2
        case 0x66: out.append(0x0C); i += 2
        case 0x6E: out.append(0x0A); i += 2
        case 0x72: out.append(0x0D); i += 2
        case 0x74: out.append(0x09); i += 2
        case 0x75:
            var cp = hex(i + 2)
            i += 6
            if cp >= 0xD800 && cp <= 0xDBFF && i + 6 <= raw.count {
                let lo = hex(i + 2)
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                i += 6
            }
            let scalar = Unicode.Scalar(cp) ?? "\u{FFFD}"
            out.append(contentsOf: Array(String(Character(scalar)).utf8))
        default: out.append(e); i += 2
        }
    }
    return out
}

/// JSON output helpers.
public enum JSONOut {
    @usableFromInline static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends bytes as JSON string content (no quotes): the project's one JSON string escaper. Quote and
    /// backslash are escaped, `\n` `\r` `\t` in short form, other control characters as `\u00XX`.
    ///
    /// Invalid-UTF-8 policy: bytes are passed through unchanged, never replaced, so what the outputs write
    /// is byte for byte what was received (the output digests depend on it). Callers hand it valid UTF-8:
    /// header values are checked where records enter (`EventBatch.appendRecord`), JSON strings by the
    /// scanner, Swift `String`s are valid by construction. A caller with untrusted bytes repairs them first
    /// (the recording writer: `String(decoding:as:)`, U+FFFD per invalid sequence).
    public static func appendEscaped(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        var runStart = 0
        var i = 0
        // Whole words while none of their bytes needs an escape (header values almost never do).
        if let base = bytes.baseAddress {
            while i &+ 8 <= bytes.count {
                let w = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                let q = w ^ 0x2222_2222_2222_2222
                let b = w ^ 0x5C5C_5C5C_5C5C_5C5C
                let m = (((q &- 0x0101_0101_0101_0101) & ~q) | ((b &- 0x0101_0101_0101_0101) & ~b)
                    | ((w &- 0x2020_2020_2020_2020) & ~w)) & 0x8080_8080_8080_8080
                if m != 0 { break }
                i &+= 8
            }
        }
        while i < bytes.count {
            let c = bytes[i]
            if c == 0x22 || c == 0x5C || c < 0x20 {
                if i > runStart { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<i])) }
                out.append(0x5C)
                switch c {
                case 0x22: out.append(0x22)
                case 0x5C: out.append(0x5C)
                case 0x0A: out.append(0x6E)
                case 0x0D: out.append(0x72)
                case 0x09: out.append(0x74)
                default:
                    out.append(0x75); out.append(0x30); out.append(0x30)
                    out.append(hexDigits[Int(c >> 4)]); out.append(hexDigits[Int(c & 15)])
                }
                runStart = i + 1
            }
            i += 1
        }
        if runStart < bytes.count { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<bytes.count])) }
    }

    /// Appends a Swift string as a quoted JSON string.
    public static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(0x22)
        var s = s
        s.withUTF8 { appendEscaped(UnsafeRawBufferPointer($0), to: &out) }
        out.append(0x22)
    }

    /// Appends a decimal integer.
    @inline(__always)
    public static func appendInt(_ v: Int64, to out: inout [UInt8]) {
        if v == 0 { out.append(0x30); return }
        var x = v.magnitude
        if v < 0 { out.append(0x2D) }
        var buf: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: enough for 20 digits
        let n = withUnsafeMutableBytes(of: &buf) { b -> Int in
            var i = 24
            while x > 0 {
                i -= 1
                b[i] = UInt8(truncatingIfNeeded: x % 10) + 0x30
                x /= 10
            }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: b[i..<24]))
            return 24 - i
        }
        _ = n
    }

    /// Appends a StaticString verbatim.
    @inline(__always)
    public static func appendRaw(_ s: StaticString, to out: inout [UInt8]) {
        s.withUTF8Buffer { out.append(contentsOf: $0) }
    }
}
