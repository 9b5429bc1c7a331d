/// Event and property names (wire format §2): `^[A-Za-z_$][A-Za-z0-9_$]{0,99}$`.
public enum EventNames {
    /// Whether bytes `p[start..<end]` form a valid name.
    @inline(__always)
    public static func isValid(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        isValidName(p, start, end)
    }

    /// Whether a Swift string is a valid name (config checks).
    public static func isValid(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { b in b.count > 0 && isValidName(b.baseAddress!, 0, b.count) }
    }
}

/// Builds replacement values for the property fixes of wire format §2, into the batch's scratch arena.
public enum PropertyRepair {
    /// A string cut at a character boundary to at most `maxBytes` UTF-8 bytes, then `$` appended.
    public static func truncateString(_ p: Property, _ batch: inout EventBatch, maxBytes: Int) -> Span {
        let start = batch.scratch.count
        let content = Array(batch.json[Int(p.value.start) + 1..<Int(p.value.end) - 1])
        let decoded: [UInt8] = p.valueEscaped ? content.withUnsafeBytes { unescapeJSONString($0) } : content
        var cut = min(maxBytes, decoded.count)
        // Back off continuation bytes (10xxxxxx) so a character is never split.
        while cut > 0 && cut < decoded.count && decoded[cut] & 0xC0 == 0x80 { cut -= 1 }
        batch.scratch.append(0x22)
        decoded.withUnsafeBytes { b in
            JSONOut.appendEscaped(UnsafeRawBufferPointer(rebasing: b[0..<cut]), to: &batch.scratch)
        }
        batch.scratch.append(0x24)  // $
        batch.scratch.append(0x22)
        return Span(start, batch.scratch.count)
    }

    /// An array with only its string elements, in order.
    public static func stringsOnly(_ p: Property, _ batch: inout EventBatch) -> Span {
        let start = batch.scratch.count
        var kept: [Span] = []
        batch.json.withUnsafeBufferPointer { jb in
            var s = JSONScanner(base: jb.baseAddress!, start: Int(p.value.start), end: Int(p.value.end))
            s.pos += 1
            s.skipWhitespace()
            if s.peek() == 0x5D { return }
            while !s.failed {
                s.skipWhitespace()
                let vs = s.pos
                if s.peek() == 0x22 {
                    _ = s.scanString()
                    kept.append(Span(vs, s.pos))
                } else {
                    s.skipValue(depth: 1)
                }
                s.skipWhitespace()
                if s.peek() == 0x2C { s.pos += 1; continue }
                break
            }
        }
        batch.scratch.append(0x5B)
        for (i, k) in kept.enumerated() {
            if i > 0 { batch.scratch.append(0x2C) }
            batch.scratch.append(contentsOf: batch.json[Int(k.start)..<Int(k.end)])
        }
        batch.scratch.append(0x5D)
        return Span(start, batch.scratch.count)
    }
}
