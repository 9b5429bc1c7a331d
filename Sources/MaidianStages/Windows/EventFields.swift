#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import MaidianEvents

/// Whether `n` bytes at `a` and `b` are equal: inline words for the short names and texts compared per event
/// (a `memcmp` call costs more than the comparison).
@inline(__always) func bytesEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ n: Int) -> Bool {
    let ra = UnsafeRawPointer(a), rb = UnsafeRawPointer(b)
    var i = 0
    while i &+ 8 <= n {
        if ra.loadUnaligned(fromByteOffset: i, as: UInt64.self) != rb.loadUnaligned(fromByteOffset: i, as: UInt64.self) { return false }
        i &+= 8
    }
    while i < n {
        if a[i] != b[i] { return false }
        i &+= 1
    }
    return true
}

/// Whether `n` bytes at `p` hold a backslash.
@inline(__always) func hasBackslash(_ p: UnsafePointer<UInt8>, _ n: Int) -> Bool {
    let raw = UnsafeRawPointer(p)
    var i = 0
    while i &+ 8 <= n {
        let x = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) ^ 0x5C5C_5C5C_5C5C_5C5C
        if (x &- 0x0101_0101_0101_0101) & ~x & 0x8080_8080_8080_8080 != 0 { return true }
        i &+= 8
    }
    while i < n {
        if p[i] == 0x5C { return true }
        i &+= 1
    }
    return false
}

/// The arenas of a batch the windows stage reads, as buffer pointers: the per-event path then costs no
/// array access checks, retains or uniqueness checks. Valid only inside `EventBatch.withWindowsView`.
struct BatchView {
    let json: UnsafeBufferPointer<UInt8>
    let scratch: UnsafeBufferPointer<UInt8>
    let properties: UnsafeBufferPointer<Property>
    let hits: UnsafeBufferPointer<MatchHit>
    let events: UnsafeBufferPointer<Event>
    let records: UnsafeBufferPointer<InputRecord>
    let added: UnsafeBufferPointer<AddedProperty>
    /// Record keys and headers as received.
    let input: UnsafeBufferPointer<UInt8>

    /// Bytes of a text value as they sit in an arena; `escaped`: they hold a backslash and must be decoded.
    struct Text {
        var base: UnsafePointer<UInt8>?
        var count: Int
        var escaped: Bool

        /// Appends the decoded text.
        @inline(__always) func append(to out: inout [UInt8]) {
            guard let base, count > 0 else { return }
            let raw = UnsafeRawBufferPointer(start: base, count: count)
            if escaped { out.append(contentsOf: unescapeJSONString(raw)) } else { out.append(contentsOf: raw) }
        }

        /// Calls `body` with the decoded text (decoding into a temporary only when escaped).
        @inline(__always) func withDecoded<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
            if escaped, let base {
                let decoded = unescapeJSONString(UnsafeRawBufferPointer(start: base, count: count))
                return decoded.withUnsafeBufferPointer(body)
            }
            return body(UnsafeBufferPointer(start: base, count: count))
        }
    }

    /// A JSON string's content (between the quotes at `span`) in `arena`.
    @inline(__always) static func stringText(_ arena: UnsafeBufferPointer<UInt8>, _ span: Span) -> Text {
        let lo = Int(span.start) &+ 1, hi = Int(span.end) &- 1
        guard hi > lo else { return Text(base: nil, count: 0, escaped: false) }
        let base = arena.baseAddress! + lo
        return Text(base: base, count: hi &- lo, escaped: hasBackslash(base, hi &- lo))
    }

    /// A kept property's value as text: a string's content, a number's or boolean's JSON text; nil for other
    /// kinds or `k < 0`. (A string without backslashes decodes to itself, so only those with one are decoded.)
    @inline(__always) func text(ofProperty k: Int) -> Text? {
        guard k >= 0 else { return nil }
        let p = properties[k]
        switch p.kind {
        case .string:
            return p.fix == .replace ? Self.stringText(scratch, p.replacement) : Self.stringText(json, p.value)
        case .number, .bool:
            return Text(base: json.baseAddress! + Int(p.value.start), count: p.value.count, escaped: false)
        default:
            return nil
        }
    }

    /// The text of a property an earlier stage added to the event (a preset such as `$province`, a rule
    /// parameter), as `text(ofProperty:)` reads the event's own: nil when none was added or it is no string,
    /// number or boolean.
    func text(ofAdded name: UnsafeBufferPointer<UInt8>, _ ev: Event) -> Text? {
        guard ev.addedHead >= 0,
              let (span, kind) = EventBatch.addedProperty(head: ev.addedHead, added: added, scratch: scratch, name: name)
        else { return nil }
        switch kind {
        case .string: return Self.stringText(scratch, span)
        case .number, .bool: return Text(base: scratch.baseAddress! + Int(span.start), count: span.count, escaped: false)
        default: return nil
        }
    }

    /// Appends property `k`'s text to `out`; false when it has none.
    @inline(__always) func appendText(ofProperty k: Int, to out: inout [UInt8]) -> Bool {
        guard let t = text(ofProperty: k) else { return false }
        t.append(to: &out)
        return true
    }

    /// `$app_version` inside the event's `lib` object, decoded, appended to `out`.
    func appendLibAppVersion(_ ev: Event, to out: inout [UInt8]) -> Bool {
        guard ev.lib.isPresent, ev.lib.count > 2 else { return false }
        let key: StaticString = "\"$app_version\""
        let keyCount = key.utf8CodeUnitCount
        let lo = Int(ev.lib.start), hi = Int(ev.lib.end)
        let j = json.baseAddress!
        // Shallow scan for the key, then the string after the colon.
        var i = lo
        while i + keyCount < hi {
            if j[i] == 0x22 && memcmp(j + i, key.utf8Start, keyCount) == 0 {
                var k = i + keyCount
                while k < hi && (j[k] == 0x20 || j[k] == 0x3A || j[k] == 0x0A || j[k] == 0x09 || j[k] == 0x0D) { k += 1 }
                guard k < hi, j[k] == 0x22 else { return false }
                var e = k + 1
                while e < hi && j[e] != 0x22 { e += j[e] == 0x5C ? 2 : 1 }
                Self.stringText(json, Span(k, e + 1)).append(to: &out)
                return true
            }
            i += 1
        }
        return false
    }

    /// The event's `distinct_id` text.
    func appendDistinctID(_ ev: Event, to out: inout [UInt8]) {
        let lo = Int(ev.distinctID.start), n = ev.distinctID.count
        let raw = UnsafeRawBufferPointer(start: json.baseAddress! + lo, count: n)
        if ev.distinctIDEscaped { out.append(contentsOf: unescapeJSONString(raw)) } else { out.append(contentsOf: raw) }
    }

    /// Hash64 of the decoded `distinct_id` (users are counted by it, across partitions and workers). The
    /// decoder already hashed the raw bytes, which are the decoded ones when nothing is escaped.
    @inline(__always) func userHash(_ ev: Event) -> UInt64 {
        if !ev.distinctIDEscaped && ev.distinctIDHash != 0 { return ev.distinctIDHash }
        var id: [UInt8] = []
        appendDistinctID(ev, to: &id)
        var h = Hash64()
        id.withUnsafeBufferPointer { if let b = $0.baseAddress { h.add(b, $0.count) } }
        return h.value
    }
}

extension EventBatch {
    /// Runs `body` with buffer pointers over the arenas the windows stage reads.
    func withWindowsView<R>(_ body: (BatchView) throws -> R) rethrows -> R {
        try json.withUnsafeBufferPointer { j in
            try scratch.withUnsafeBufferPointer { s in
                try properties.withUnsafeBufferPointer { p in
                    try hits.withUnsafeBufferPointer { h in
                        try events.withUnsafeBufferPointer { e in
                            try records.withUnsafeBufferPointer { r in
                                try added.withUnsafeBufferPointer { a in
                                    try input.withUnsafeBufferPointer { i in
                                        try body(BatchView(json: j, scratch: s, properties: p, hits: h, events: e, records: r, added: a, input: i))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Finds several properties of an event in one pass over its properties (names compared by length first),
/// stopping once every name asked for is found.
final class PropertyFinder {
    let names: [[UInt8]]
    let count: Int
    /// All names back to back; name `n` at `offsets[n]`.
    private let flat: UnsafeMutablePointer<UInt8>
    private let offsets: UnsafeMutablePointer<Int>
    /// Names of length `l` are `byLength[lengthStart[l] ..< lengthStart[l + 1]]` (lengths up to 255).
    private let lengthStart: UnsafeMutablePointer<Int32>
    private let byLength: UnsafeMutablePointer<Int32>
    /// `alternative[n]`: a name no longer needed once name `n` has a text value (-1: none).
    private let alternative: UnsafeMutablePointer<Int>
    /// Per name (up to 64): its `KnownProperty` bit, or 0: a name whose bit an event lacks is not looked for.
    private let knownBits: UnsafeMutablePointer<UInt64>
    /// Per `KnownProperty` raw value: the bits of the names that are that property. Properties with a known
    /// name are matched by `Property.known` alone, without reading their name bytes (with up to 64 names).
    private let namesOfKnown: UnsafeMutablePointer<UInt64>
    /// Per name length: the bits of the names of that length that are no `KnownProperty` (all bits when there
    /// are more than 64 names, then every name is compared), so a property whose length only fits names no
    /// longer looked for is skipped without reading its name.
    private let otherLengthBits: UnsafeMutablePointer<UInt64>
    /// `found`: the property index of each name, or -1 (reused for every event).
    let found: UnsafeMutablePointer<Int>

    /// `alternatives`: pairs (n, m): m is read only when n has no text value.
    init(_ names: [String], alternatives: [(Int, Int)] = []) {
        self.names = names.map { Array($0.utf8) }
        count = names.count
        let total = self.names.reduce(0) { $0 + $1.count }
        flat = .allocate(capacity: max(1, total))
        offsets = .allocate(capacity: max(1, count))
        var o = 0
        for (n, name) in self.names.enumerated() {
            offsets[n] = o
            for b in name { flat[o] = b; o += 1 }
        }
        lengthStart = .allocate(capacity: 257)
        byLength = .allocate(capacity: max(1, count))
        var k = 0
        for l in 0..<256 {
            lengthStart[l] = Int32(k)
            for (n, name) in self.names.enumerated() where name.count == l { byLength[k] = Int32(n); k += 1 }
        }
        lengthStart[256] = Int32(k)
        alternative = .allocate(capacity: max(1, count))
        alternative.initialize(repeating: -1, count: max(1, count))
        for (n, m) in alternatives { alternative[n] = m }
        found = .allocate(capacity: max(1, count))
        found.initialize(repeating: -1, count: max(1, count))
        knownBits = .allocate(capacity: 64)
        knownBits.initialize(repeating: 0, count: 64)
        for (n, name) in self.names.enumerated() where n < 64 {
            if let k = KnownProperty.allCases.first(where: { k in k.name.withUTF8Buffer { Array($0) } == name }) { knownBits[n] = k.bit }
        }
        namesOfKnown = .allocate(capacity: 256)
        namesOfKnown.initialize(repeating: 0, count: 256)
        otherLengthBits = .allocate(capacity: 256)
        otherLengthBits.initialize(repeating: 0, count: 256)
        for (n, name) in self.names.enumerated() where name.count < 256 {
            if count <= 64 && knownBits[n] != 0 {
                namesOfKnown[knownBits[n].trailingZeroBitCount] |= 1 << UInt64(n)
            } else {
                otherLengthBits[name.count] |= count <= 64 ? 1 << UInt64(n) : UInt64.max
            }
        }
    }

    deinit {
        flat.deallocate(); offsets.deallocate(); lengthStart.deallocate(); byLength.deallocate()
        alternative.deallocate(); found.deallocate(); knownBits.deallocate()
        namesOfKnown.deallocate(); otherLengthBits.deallocate()
    }

    /// `found[n]` becomes the property index of `names[n]` in event `ev`, or -1, for at least the names whose
    /// bit is set in `wanted` (names from 64 on are always looked for); others may stay -1.
    @inline(__always)
    func find(_ v: BatchView, _ ev: Event, wanted: UInt64) {
        for k in 0..<count { found[k] = -1 }
        // Without a bit per name, never stop early.
        var remaining = count > 64 ? UInt64.max : wanted
        var w = remaining & (count > 64 ? 0 : UInt64.max)
        while w != 0 {
            let n = w.trailingZeroBitCount
            let bit = knownBits[n]
            if bit != 0 && ev.known & bit == 0 { remaining &= ~(1 << UInt64(n)) }
            w &= w &- 1
        }
        if remaining == 0 { return }
        let lo = Int(ev.firstProperty), hi = lo + Int(ev.propertyCount)
        let json = v.json.baseAddress!
        for k in lo..<hi {
            let p = v.properties[k]
            if p.known != KnownProperty.none && count <= 64 {
                // A known name: the names it is, by its byte (no name bytes read).
                var m = namesOfKnown[Int(p.known)] & remaining
                guard m != 0, p.fix != .drop else { continue }
                while m != 0 {
                    let idx = m.trailingZeroBitCount
                    m &= m &- 1
                    guard found[idx] < 0 else { continue }
                    found[idx] = k
                    remaining &= ~(1 << UInt64(idx))
                    let alt = alternative[idx]
                    if alt >= 0 && alt < 64 && (p.kind == .string || p.kind == .number || p.kind == .bool) {
                        remaining &= ~(1 << UInt64(alt))
                    }
                }
                if remaining == 0 { return }
                continue
            }
            let n = p.name.count
            guard n < 256, otherLengthBits[n] & remaining != 0, p.fix != .drop else { continue }
            let s = Int(lengthStart[n]), e = Int(lengthStart[n + 1])
            let name = json + Int(p.name.start)
            // No break on a match: a name may be wanted twice (`by: [app_version]` reads `$app_version` again).
            for c in s..<e {
                let idx = Int(byLength[c])
                guard idx >= 64 || remaining & (1 << UInt64(idx)) != 0, found[idx] < 0,
                      bytesEqual(name, flat + offsets[idx], n) else { continue }
                found[idx] = k
                if idx < 64 { remaining &= ~(1 << UInt64(idx)) }
                let alt = alternative[idx]
                if alt >= 0 && alt < 64 && (p.kind == .string || p.kind == .number || p.kind == .bool) {
                    remaining &= ~(1 << UInt64(alt))
                }
            }
            if remaining == 0 { return }
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

    @inline(__always)
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

    @inline(__always)
    private func equal(_ i: Int, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let s = spans[i]
        guard s.count == bytes.count else { return false }
        if s.count == 0 { return true }
        return storage.withUnsafeBufferPointer { st in bytesEqual(st.baseAddress! + s.start, bytes.baseAddress!, s.count) }
    }

    subscript(_ i: Int32) -> ArraySlice<UInt8> {
        let s = spans[Int(i)]
        return storage[s.start..<(s.start + s.count)]
    }
}

/// FNV-1a: a stable hash for choosing internal partitions (every worker must agree).
func stableHash<C: Sequence<UInt8>>(_ bytes: C) -> UInt64 {
    var h: UInt64 = 0xCBF2_9CE4_8422_2325
    for b in bytes {
        h ^= UInt64(b)
        h = h &* 0x100_0000_01B3
    }
    return h
}
