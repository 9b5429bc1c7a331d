/// Finds several properties of an event in one pass over its properties, for a stage that reads many of
/// them per event (windows: the page, the element fields, the `by` dims). `EventBatch.propertyIndex` finds
/// one by name or by its `KnownProperty` byte; this is the many-names form of the same rule (the first
/// property not dropped with that name), built once per stage:
/// - names that are a `KnownProperty` are matched by `Property.known` alone, without reading name bytes,
///   and are not looked for in an event whose `Event.known` lacks their bit;
/// - other names are compared only with properties of their length;
/// - the pass stops once every name asked for is found.
///
/// Its tables are allocated once, in `init`, so a lookup allocates nothing and reads them without checks.
public final class PropertyFinder {
    /// The names looked for, in the order given.
    public let names: [[UInt8]]
    /// Number of names looked for (`names.count`).
    public let count: Int
    /// All names back to back; name `n` at `offsets[n]`.
    @usableFromInline let flat: UnsafeMutablePointer<UInt8>
    @usableFromInline let offsets: UnsafeMutablePointer<Int>
    /// Names of length `l` are `byLength[lengthStart[l] ..< lengthStart[l + 1]]` (lengths up to 255).
    @usableFromInline let lengthStart: UnsafeMutablePointer<Int32>
    @usableFromInline let byLength: UnsafeMutablePointer<Int32>
    /// `alternative[n]`: a name no longer needed once name `n` has a text value (-1: none).
    @usableFromInline let alternative: UnsafeMutablePointer<Int>
    /// Per name (up to 64): its `KnownProperty` bit, or 0: a name whose bit an event lacks is not looked for.
    @usableFromInline let knownBits: UnsafeMutablePointer<UInt64>
    /// Per `KnownProperty` raw value: the bits of the names that are that property. Properties with a known
    /// name are matched by `Property.known` alone, without reading their name bytes (with up to 64 names).
    @usableFromInline let namesOfKnown: UnsafeMutablePointer<UInt64>
    /// Per name length: the bits of the names of that length that are no `KnownProperty` (all bits when there
    /// are more than 64 names, then every name is compared), so a property whose length only fits names no
    /// longer looked for is skipped without reading its name.
    @usableFromInline let otherLengthBits: UnsafeMutablePointer<UInt64>
    @usableFromInline let foundIndices: UnsafeMutablePointer<Int>

    /// What the last `find` found: `found[n]` is the property index of `names[n]`, or -1.
    public struct Found {
        @usableFromInline let base: UnsafeMutablePointer<Int>
        @usableFromInline let count: Int
        @inlinable init(base: UnsafeMutablePointer<Int>, count: Int) {
            self.base = base
            self.count = count
        }
        /// The property index of name `n` (`0 ..< names.count`), or -1.
        @inlinable public subscript(n: Int) -> Int {
            @inline(__always) get { UnsafeBufferPointer(start: base, count: count)[n] }
        }
    }

    /// The indices the last `find` left (reused for every event: read them before the next `find`).
    @inlinable public var found: Found { Found(base: foundIndices, count: count) }

    /// `alternatives`: pairs (n, m): m is read only when n has no text value.
    public init(_ names: [String], alternatives: [(Int, Int)] = []) {
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
        foundIndices = .allocate(capacity: max(1, count))
        foundIndices.initialize(repeating: -1, count: max(1, count))
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
        alternative.deallocate(); foundIndices.deallocate(); knownBits.deallocate()
        namesOfKnown.deallocate(); otherLengthBits.deallocate()
    }

    /// `found[n]` becomes the property index of `names[n]` in event `i` of `v`, or -1, for at least the names
    /// whose bit is set in `wanted` (names from 64 on are always looked for); others may stay -1.
    @inlinable @inline(__always)
    public func find(_ v: BatchView, event i: Int, wanted: UInt64) { find(v, v.events[i], wanted: wanted) }

    /// `find(_:event:wanted:)` for an event entry read from `v`.
    @inlinable @inline(__always)
    public func find(_ v: BatchView, _ ev: Event, wanted: UInt64) {
        let found = foundIndices
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
                      Bytes.equal(name, flat + offsets[idx], n) else { continue }
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
