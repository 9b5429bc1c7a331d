#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import MaidianEvents

/// A small reader for the members of one JSON object (already validated JSON): enough for
/// `$element_content` items and `pagePara` look-ups.
public enum MiniJSON {
    /// `s` as a JSON string literal, quotes included (also a YAML double-quoted scalar).
    public static func quoted(_ s: String) -> String {
        var out: [UInt8] = []
        JSONOut.appendString(s, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// One member: key (decoded) and the value's byte range in the buffer (quotes included).
    public struct Member: Sendable {
        /// The decoded key.
        public var key: [UInt8]
        /// The value's bytes.
        public var value: Range<Int>
        /// The value's first byte (`"`, `{`, `[`, digit, `t`, `f`, `n`).
        public var first: UInt8
    }

    /// The members of the object starting at `b[0]` (`{`); empty if it is not an object.
    public static func members(_ b: UnsafeRawBufferPointer) -> [Member] {
        var out: [Member] = []
        var i = skipSpace(b, 0)
        guard i < b.count, b[i] == 0x7B else { return out }
        i += 1
        while true {
            i = skipSpace(b, i)
            guard i < b.count, b[i] == 0x22 else { return out }
            let keyEnd = skipString(b, i)
            let key = unescapeJSONString(UnsafeRawBufferPointer(rebasing: b[(i + 1)..<(keyEnd - 1)]))
            i = skipSpace(b, keyEnd)
            guard i < b.count, b[i] == 0x3A else { return out }
            i = skipSpace(b, i + 1)
            guard i < b.count else { return out }
            let start = i
            i = skipValue(b, i)
            out.append(Member(key: key, value: start..<i, first: b[start]))
            i = skipSpace(b, i)
            guard i < b.count, b[i] == 0x2C else { return out }
            i += 1
        }
    }

    /// Depth-first search for `key` in the object at `b` (and objects nested in its values).
    public static func findDepthFirst(_ key: [UInt8], in b: UnsafeRawBufferPointer) -> Range<Int>? {
        key.withUnsafeBytes { findDepthFirst($0, in: b) }
    }

    /// Depth-first search for `key` (decoded UTF-8) in the object at `b`: a member of the object itself first,
    /// else inside its object values in order. Allocates nothing unless a key holds escapes.
    public static func findDepthFirst(_ key: UnsafeRawBufferPointer, in b: UnsafeRawBufferPointer) -> Range<Int>? {
        if let r = member(key, in: b) { return r }
        var found: Range<Int>?
        forEachMember(b) { _, _, value in
            guard b[value.lowerBound] == 0x7B else { return true }
            if let r = findDepthFirst(key, in: UnsafeRawBufferPointer(rebasing: b[value])) {
                found = (r.lowerBound + value.lowerBound)..<(r.upperBound + value.lowerBound)
                return false
            }
            return true
        }
        return found
    }

    /// The value of the first member of the object at `b` whose decoded key is `key`, without allocating
    /// (unless a key holds escapes).
    public static func member(_ key: UnsafeRawBufferPointer, in b: UnsafeRawBufferPointer) -> Range<Int>? {
        var found: Range<Int>?
        forEachMember(b) { keyStart, keyEnd, value in
            if keyEquals(UnsafeRawBufferPointer(rebasing: b[keyStart..<keyEnd]), key) {
                found = value
                return false
            }
            return true
        }
        return found
    }

    /// Calls `body` with the raw key bytes (between the quotes) and the value's range of each member of the
    /// object at `b`, in order, while it returns true. The members `members` reports.
    @inline(__always)
    static func forEachMember(_ b: UnsafeRawBufferPointer, _ body: (Int, Int, Range<Int>) -> Bool) {
        var i = skipSpace(b, 0)
        guard i < b.count, b[i] == 0x7B else { return }
        i += 1
        while true {
            i = skipSpace(b, i)
            guard i < b.count, b[i] == 0x22 else { return }
            let keyEnd = skipString(b, i)
            let keyStart = i + 1
            i = skipSpace(b, keyEnd)
            guard i < b.count, b[i] == 0x3A else { return }
            i = skipSpace(b, i + 1)
            guard i < b.count else { return }
            let start = i
            i = skipValue(b, i)
            if !body(keyStart, keyEnd - 1, start..<i) { return }
            i = skipSpace(b, i)
            guard i < b.count, b[i] == 0x2C else { return }
            i += 1
        }
    }

    /// Whether a raw JSON key (escapes as written) decodes to `key`.
    static func keyEquals(_ raw: UnsafeRawBufferPointer, _ key: UnsafeRawBufferPointer) -> Bool {
        if raw.contains(0x5C) { return unescapeJSONString(raw).withUnsafeBytes { $0.elementsEqual(key) } }
        guard raw.count == key.count else { return false }
        return raw.count == 0 || memcmp(raw.baseAddress!, key.baseAddress!, raw.count) == 0
    }

    /// The decoded text of a JSON string value's bytes (with quotes); nil if not a string.
    public static func string(_ b: UnsafeRawBufferPointer) -> String? {
        guard b.count >= 2, b[0] == 0x22 else { return nil }
        return String(decoding: unescapeJSONString(UnsafeRawBufferPointer(rebasing: b[1..<(b.count - 1)])), as: UTF8.self)
    }

    static func skipSpace(_ b: UnsafeRawBufferPointer, _ i: Int) -> Int {
        var i = i
        while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
        return i
    }

    /// Index after the string starting at `i` (a quote).
    static func skipString(_ b: UnsafeRawBufferPointer, _ i: Int) -> Int {
        var i = i + 1
        while i < b.count {
            if b[i] == 0x5C { i += 2; continue }
            if b[i] == 0x22 { return i + 1 }
            i += 1
        }
        return b.count
    }

    /// Index after the value starting at `i`.
    static func skipValue(_ b: UnsafeRawBufferPointer, _ i: Int) -> Int {
        switch b[i] {
        case 0x22: return skipString(b, i)
        case 0x7B, 0x5B:
            var depth = 0
            var j = i
            while j < b.count {
                let c = b[j]
                if c == 0x22 { j = skipString(b, j); continue }
                if c == 0x7B || c == 0x5B { depth += 1 } else if c == 0x7D || c == 0x5D {
                    depth -= 1
                    if depth == 0 { return j + 1 }
                }
                j += 1
            }
            return b.count
        default:
            var j = i
            while j < b.count, b[j] != 0x2C, b[j] != 0x7D, b[j] != 0x5D, b[j] != 0x20, b[j] != 0x0A { j += 1 }
            return j
        }
    }
}
