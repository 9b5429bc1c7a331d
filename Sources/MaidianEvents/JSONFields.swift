/// Reads single top-level fields of a JSON object in place (tools and tests; not the event hot path).
public enum JSONFields {
    /// The decoded value of top-level string field `key`, or nil when absent, not a string or not an object.
    public static func string(_ json: [UInt8], _ key: String) -> String? {
        var result: String?
        var padded = json
        padded.append(contentsOf: [UInt8](repeating: 0, count: 32))
        let keyBytes = Array(key.utf8)
        padded.withUnsafeBufferPointer { b in
            var s = JSONScanner(base: b.baseAddress!, start: 0, end: json.count)
            s.skipWhitespace()
            guard s.peek() == 0x7B else { return }
            s.pos += 1
            while !s.failed {
                s.skipWhitespace()
                if s.peek() == 0x7D { return }
                guard s.peek() == 0x22 else { return }
                let k = s.scanString()
                s.skipWhitespace()
                guard s.peek() == 0x3A else { return }
                s.pos += 1
                s.skipWhitespace()
                let isKey = !k.escaped && k.end - k.start == keyBytes.count && keyBytes.withUnsafeBufferPointer { Bytes.equal(b.baseAddress! + k.start, $0.baseAddress!, $0.count) }
                if isKey && s.peek() == 0x22 {
                    let v = s.scanString()
                    let raw = UnsafeRawBufferPointer(start: b.baseAddress! + v.start, count: v.end - v.start)
                    result = String(decoding: v.escaped ? unescapeJSONString(raw) : Array(raw), as: UTF8.self)
                    return
                }
                s.skipValue(depth: 1)
                s.skipWhitespace()
                if s.peek() == 0x2C { s.pos += 1 } else { return }
            }
        }
        return result
    }
}
