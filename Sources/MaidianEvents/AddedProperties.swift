extension EventBatch {
    /// The value of a property that a stage added to event `e` (a `"name":value` fragment linked with
    /// `linkAdded`; a fragment may hold several, comma-separated), as its JSON text in `scratch` and its
    /// kind; nil when no stage added `name`. For readers of presets (`$province`, `$brand`, ...) and rule
    /// parameters, which are not among the event's own `properties`.
    public func addedProperty(event e: Int, name: UnsafeBufferPointer<UInt8>) -> (value: Span, kind: ValueKind)? {
        let head = events[e].addedHead
        guard head >= 0 else { return nil }
        return added.withUnsafeBufferPointer { a in
            scratch.withUnsafeBufferPointer { s in Self.addedProperty(head: head, added: a, scratch: s, name: name) }
        }
    }

    /// `addedProperty(event:name:)` over buffer pointers of `added` and `scratch`, from an event's `addedHead`.
    public static func addedProperty(
        head: Int32, added: UnsafeBufferPointer<AddedProperty>, scratch: UnsafeBufferPointer<UInt8>, name: UnsafeBufferPointer<UInt8>
    ) -> (value: Span, kind: ValueKind)? {
        var a = head
        guard a >= 0, name.count > 0, let p = scratch.baseAddress else { return nil }
        while a >= 0 {
            let fragment = added[Int(a)]
            var i = Int(fragment.bytes.start)
            let end = Int(fragment.bytes.end)
            // Fragments are written by stages, not clients: plain `"name":value` pairs, no whitespace needed,
            // but any is tolerated. Bounded by the fragment: a malformed one is skipped, never read past.
            while i < end {
                guard p[i] == 0x22, let nameEnd = stringEnd(p, i, end) else { break }
                let nameStart = i + 1
                i = skipSpace(p, nameEnd + 1, end)
                guard i < end, p[i] == 0x3A else { break }
                let valueStart = skipSpace(p, i + 1, end)
                guard valueStart < end, let (valueEnd, kind) = valueEnd(p, valueStart, end) else { break }
                if nameEnd - nameStart == name.count && Bytes.equal(p + nameStart, name.baseAddress!, name.count) {
                    return (Span(valueStart, valueEnd), kind)
                }
                i = skipSpace(p, valueEnd, end)
                guard i < end, p[i] == 0x2C else { break }
                i = skipSpace(p, i + 1, end)
            }
            a = fragment.next
        }
        return nil
    }

    private static func skipSpace(_ p: UnsafePointer<UInt8>, _ from: Int, _ end: Int) -> Int {
        var i = from
        while i < end, p[i] == 0x20 || p[i] == 0x0A || p[i] == 0x0D || p[i] == 0x09 { i += 1 }
        return i
    }

    /// The position of the closing quote of the string opening at `at`, or nil.
    private static func stringEnd(_ p: UnsafePointer<UInt8>, _ at: Int, _ end: Int) -> Int? {
        var i = at + 1
        while i < end {
            if p[i] == 0x22 { return i }
            i += p[i] == 0x5C ? 2 : 1
        }
        return nil
    }

    /// The end of the JSON value starting at `at` and its kind (nested values are skipped by brackets and
    /// strings), or nil when it runs past `end`.
    private static func valueEnd(_ p: UnsafePointer<UInt8>, _ at: Int, _ end: Int) -> (Int, ValueKind)? {
        switch p[at] {
        case 0x22:
            return stringEnd(p, at, end).map { ($0 + 1, .string) }
        case 0x7B, 0x5B:
            var depth = 0
            var i = at
            while i < end {
                switch p[i] {
                case 0x22:
                    guard let close = stringEnd(p, i, end) else { return nil }
                    i = close
                case 0x7B, 0x5B:
                    depth += 1
                case 0x7D, 0x5D:
                    depth -= 1
                    if depth == 0 { return (i + 1, p[at] == 0x7B ? .object : .array) }
                default:
                    break
                }
                i += 1
            }
            return nil
        default:
            var i = at
            while i < end, p[i] != 0x2C, p[i] != 0x20, p[i] != 0x0A, p[i] != 0x0D, p[i] != 0x09 { i += 1 }
            let kind: ValueKind = switch p[at] {
            case 0x74, 0x66: .bool
            case 0x6E: .null
            default: .number
            }
            return (i, kind)
        }
    }
}
