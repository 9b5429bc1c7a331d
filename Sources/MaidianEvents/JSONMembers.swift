/// The members of one JSON object (a property's value, an event's `lib`), read with `JSONScanner`.
///
/// The scanner reads whole words past a value and so needs 32 readable bytes after its input; callers here
/// hold slices of arenas, scratch buffers or arrays that may end right after the object. So the object is
/// scanned in a padded copy on the stack (objects are small; no heap allocation), and ranges are reported
/// relative to the caller's bytes.
public enum JSONMembers {
    /// Calls `body` with each member's key bytes as written (between the quotes, escapes undecoded), whether
    /// the key holds escapes, and the value's byte range in `object` (quotes included), in order, while `body`
    /// returns true. Leading whitespace is skipped; anything but an object reports nothing; scanning stops at
    /// the first malformed byte.
    public static func forEach(in object: UnsafeRawBufferPointer,
                               _ body: (_ key: UnsafeRawBufferPointer, _ keyEscaped: Bool, _ value: Range<Int>) -> Bool) {
        let n = object.count
        guard n >= 2, let src = object.baseAddress else { return }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: n + 32) { buf in
            let p = buf.baseAddress!
            p.initialize(from: src.assumingMemoryBound(to: UInt8.self), count: n)
            (p + n).initialize(repeating: 0, count: 32)
            var s = JSONScanner(base: p, start: 0, end: n)
            guard s.nextByte() == 0x7B else { return }
            s.pos += 1
            while !s.failed {
                guard s.nextByte() == 0x22 else { return }
                let k = s.scanString()
                guard !s.failed, s.nextByte() == 0x3A else { return }
                s.pos += 1
                s.skipWhitespace()
                let start = s.pos
                s.skipValue(depth: 1)
                if s.failed { return }
                let key = UnsafeRawBufferPointer(start: src + k.start, count: k.end - k.start)
                if !body(key, k.escaped, start..<s.pos) { return }
                guard s.nextByte() == 0x2C else { return }
                s.pos += 1
            }
        }
    }

    /// The value range (in `object`) of the first member whose decoded key is `key` (UTF-8), or nil.
    public static func member(_ key: UnsafeRawBufferPointer, in object: UnsafeRawBufferPointer) -> Range<Int>? {
        var found: Range<Int>?
        forEach(in: object) { k, escaped, value in
            let equal: Bool
            if escaped {
                equal = unescapeJSONString(k).withUnsafeBytes { $0.elementsEqual(key) }
            } else {
                equal = k.count == key.count
                    && (k.count == 0 || Bytes.equal(k.baseAddress!.assumingMemoryBound(to: UInt8.self), key.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count))
            }
            if equal { found = value }
            return !equal
        }
        return found
    }

    /// The decoded text of a JSON string literal (quotes included), or nil when `literal` is not a string.
    public static func string(_ literal: UnsafeRawBufferPointer) -> String? {
        guard literal.count >= 2, literal[0] == 0x22, literal[literal.count - 1] == 0x22 else { return nil }
        return String(decoding: unescapeJSONString(UnsafeRawBufferPointer(rebasing: literal[1..<(literal.count - 1)])), as: UTF8.self)
    }
}

extension JSONOut {
    /// `s` as a JSON string literal, quotes included (also a YAML double-quoted scalar).
    public static func quoted(_ s: String) -> String {
        var out: [UInt8] = []
        appendString(s, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
