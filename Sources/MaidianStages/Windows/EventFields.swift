import MaidianEvents

/// Finds several properties of an event in one pass over its properties (names compared by length first).
struct PropertyFinder {
    let names: [[UInt8]]
    /// Indexes of `names` by name length (lengths up to 255).
    private let byLength: [[Int]]

    init(_ names: [String]) {
        self.names = names.map { Array($0.utf8) }
        var m = [[Int]](repeating: [], count: 256)
        for (i, n) in self.names.enumerated() where n.count < 256 { m[n.count].append(i) }
        byLength = m
    }

    /// `found[n]` becomes the property index of `names[n]` in event `ev`, or -1.
    func find(_ batch: borrowing EventBatch, _ ev: Event, into found: inout [Int]) {
        for k in found.indices { found[k] = -1 }
        let lo = Int(ev.firstProperty), hi = lo + Int(ev.propertyCount)
        if lo == hi { return }
        batch.json.withUnsafeBufferPointer { j in
            for k in lo..<hi {
                let p = batch.properties[k]
                guard p.fix != .drop, p.name.count < 256 else { continue }
                let candidates = byLength[p.name.count]
                if candidates.isEmpty { continue }
                let name = j.baseAddress! + Int(p.name.start)
                // No break on a match: a name may be wanted twice (`by: [app_version]` reads `$app_version` again).
                for n in candidates where found[n] < 0 {
                    let want = names[n]
                    var equal = true
                    for i in 0..<want.count where name[i] != want[i] { equal = false; break }
                    if equal { found[n] = k }
                }
            }
        }
    }
}

extension EventBatch {
    /// A kept property's value as text: a string's decoded bytes, a number's or boolean's JSON text; nil
    /// for other kinds. Appends to `out`; returns false when there is nothing.
    func appendText(ofProperty k: Int, to out: inout [UInt8]) -> Bool {
        guard k >= 0 else { return false }
        let p = properties[k]
        switch p.kind {
        case .string:
            let span = p.fix == .replace ? p.replacement : p.value
            let arena = p.fix == .replace ? scratch : json
            appendStringText(arena, span, escaped: p.fix == .replace || p.valueEscaped, to: &out)
            return true
        case .number, .bool:
            out.append(contentsOf: json[Int(p.value.start)..<Int(p.value.end)])
            return true
        default:
            return false
        }
    }

    /// A JSON string (quotes included) at `span` of `arena`, decoded.
    func appendStringText(_ arena: [UInt8], _ span: Span, escaped: Bool, to out: inout [UInt8]) {
        let lo = Int(span.start) + 1, hi = Int(span.end) - 1
        guard hi >= lo else { return }
        if escaped || arena[lo..<hi].contains(0x5C) {
            arena.withUnsafeBytes { out.append(contentsOf: unescapeJSONString(UnsafeRawBufferPointer(rebasing: $0[lo..<hi]))) }
        } else {
            out.append(contentsOf: arena[lo..<hi])
        }
    }

    /// `$app_version` inside the event's `lib` object, decoded, appended to `out`.
    func appendLibAppVersion(_ ev: Event, to out: inout [UInt8]) -> Bool {
        guard ev.lib.isPresent, ev.lib.count > 2 else { return false }
        let key: [UInt8] = Array("\"$app_version\"".utf8)
        let lo = Int(ev.lib.start), hi = Int(ev.lib.end)
        // Shallow scan for the key, then the string after the colon.
        var i = lo
        while i + key.count < hi {
            if json[i] == 0x22 && json[i..<(i + key.count)].elementsEqual(key) {
                var k = i + key.count
                while k < hi && (json[k] == 0x20 || json[k] == 0x3A || json[k] == 0x0A || json[k] == 0x09 || json[k] == 0x0D) { k += 1 }
                guard k < hi, json[k] == 0x22 else { return false }
                var e = k + 1
                while e < hi && json[e] != 0x22 { e += json[e] == 0x5C ? 2 : 1 }
                appendStringText(json, Span(k, e + 1), escaped: false, to: &out)
                return true
            }
            i += 1
        }
        return false
    }

    /// The event's `distinct_id` text.
    func appendDistinctID(_ ev: Event, to out: inout [UInt8]) {
        let lo = Int(ev.distinctID.start), hi = Int(ev.distinctID.end)
        if ev.distinctIDEscaped {
            json.withUnsafeBytes { out.append(contentsOf: unescapeJSONString(UnsafeRawBufferPointer(rebasing: $0[lo..<hi]))) }
        } else {
            out.append(contentsOf: json[lo..<hi])
        }
    }
}

/// Strings stored once and referred to by number (pages, element identifiers, rule lists, dims): one
/// Hash64 and one open-addressing probe per lookup, bytes compared only on a hash hit.
struct Interner {
    private var storage: [UInt8] = []
    private var spans: [(start: Int, count: Int)] = []
    private var table = HashTable64(capacity: 256)

    var count: Int { spans.count }

    mutating func intern(_ bytes: [UInt8]) -> Int32 {
        bytes.withUnsafeBufferPointer { intern($0) }
    }

    mutating func intern(_ bytes: UnsafeBufferPointer<UInt8>) -> Int32 {
        var hasher = Hash64()
        if let base = bytes.baseAddress { hasher.add(base, bytes.count) }
        var h = hasher.value
        while let v = table.get(h) {
            if equal(Int(v), bytes) { return Int32(v) }
            h = h &* 0x9E37_79B9_7F4A_7C15 &+ 1  // a 64-bit collision: probe on
        }
        let i = spans.count
        spans.append((storage.count, bytes.count))
        storage.append(contentsOf: bytes)
        table.set(h, Int64(i))
        return Int32(i)
    }

    private func equal(_ i: Int, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let s = spans[i]
        guard s.count == bytes.count else { return false }
        return storage.withUnsafeBufferPointer { st in
            for k in 0..<s.count where st[s.start + k] != bytes[k] { return false }
            return true
        }
    }

    subscript(_ i: Int32) -> ArraySlice<UInt8> {
        let s = spans[Int(i)]
        return storage[s.start..<(s.start + s.count)]
    }
}

/// FNV-1a: a stable hash for choosing internal partitions (every worker must agree).
func stableHash(_ bytes: [UInt8]) -> UInt64 {
    var h: UInt64 = 0xCBF2_9CE4_8422_2325
    for b in bytes {
        h ^= UInt64(b)
        h = h &* 0x100_0000_01B3
    }
    return h
}
