import MaidianEvents

/// Results of `RuleMatcher.matchRaw` by the exact bytes of the facts it reads, for one matcher and one thread.
///
/// Clicks and page views repeat: the same elements of the same pages, from a few app versions, so most events
/// carry facts matched before. A hit costs hashing the facts where they are and one comparison with the cached
/// copy; a miss adds a full match and laying the facts out as the entry's key. Two-way set associative (the
/// more recently used way first), `slots` entries in all; facts longer than `longestKey` bytes are not cached.
///
/// Not `Sendable`: one worker's stage owns it. All its state is behind `let` pointers, so its methods need no
/// dynamic exclusivity checks.
public final class MatchCache {
    /// The matcher whose results are cached.
    public let matcher: RuleMatcher

    /// One cached match: the hits (`Int32`s) followed by the key's bytes, in one block (one cache miss for both).
    private struct Entry {
        var hash: UInt64 = 0
        var block: UnsafeMutableRawPointer?
        var keyCount: Int32 = 0
        var hitCount: Int32 = 0
        var capacity = 0
    }
    private let entries: UnsafeMutablePointer<Entry>
    /// Sets - 1 (sets is a power of two), or -1 without a cache.
    private let mask: Int
    private static let longestKey = 4096

    /// A cache of about `slots` entries (rounded up to a power of two, at least 2; 0: no cache, every event is matched).
    public init(matcher: RuleMatcher, slots: Int) {
        self.matcher = matcher
        var sets = slots > 0 ? 1 : 0
        while sets > 0 && sets * 2 < slots { sets <<= 1 }
        mask = sets - 1
        entries = .allocate(capacity: max(2 * sets, 1))
        entries.initialize(repeating: Entry(), count: max(2 * sets, 1))
    }

    deinit {
        for k in 0..<max(2 * (mask + 1), 1) {
            entries[k].block?.deallocate()
        }
        entries.deallocate()
    }

    /// Calls `body` with each field of the key, in key order, while it returns true.
    @inline(__always)
    private static func fields(_ f: RawFacts, _ body: (ByteView) -> Bool) -> Bool {
        // `lib` is read only for an event without `$app_version`.
        let lib = f.appVersion.isPresent ? ByteView.absent : f.lib
        return body(f.screenName) && body(f.currentURL) && body(f.pagePath) && body(f.appVersion) && body(lib)
            && body(f.elementPath) && body(f.elementType) && body(f.elementPosition) && body(f.elementIndex)
            && body(f.content) && body(f.contentObject) && body(f.elementKind) && body(f.target) && body(f.action)
            && body(f.container) && body(f.tag)
    }

    /// The bytes `t[i ..< i + n]` (`n` in 1...8) as a little-endian word, zero-filled, without reading past
    /// `t`'s end (the fields are read where they are, in arenas without slack).
    @inline(__always)
    private static func tail(_ p: UnsafePointer<UInt8>, _ i: Int, _ n: Int, _ count: Int) -> UInt64 {
        let raw = UnsafeRawPointer(p)
        if count >= 8 {
            // The last 8 bytes of the field, shifted so that only the last `n` remain.
            return raw.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self) >> UInt64(64 &- 8 &* n)
        }
        var v: UInt64 = 0
        for k in 0..<n { v |= UInt64(p[i &+ k]) << UInt64(8 &* k) }
        return v
    }

    /// A hash of the key the fields make, read where they are (no copy): per field its length (or absence)
    /// and its words, in four independent lanes (a multiply and a rotation per word), finished with `Hash64`.
    /// It only spreads keys over the sets: every hit is compared field by field.
    @inline(__always)
    private static func hash(_ role: EventRole, _ f: RawFacts) -> (hash: UInt64, count: Int) {
        @inline(__always) func step(_ lane: UInt64, _ w: UInt64) -> UInt64 {
            let m = (lane ^ w) &* 0x9E37_79B9_7F4A_7C15
            return (m << 29) | (m >> 35)
        }
        var a: UInt64 = 0x243F_6A88_85A3_08D3 ^ UInt64(role.rawValue), b: UInt64 = 0x1319_8A2E_0370_7344
        var c: UInt64 = 0xA409_3822_299F_31D0, d: UInt64 = 0x082E_FA98_EC4E_6C89
        var n = 1
        _ = fields(f) { t in
            guard let p = t.start else {
                a = step(a, UInt64(UInt32.max))
                n &+= 4
                return true
            }
            let count = t.count
            a = step(a, UInt64(count))
            n &+= 4 &+ count
            let raw = UnsafeRawPointer(p)
            var i = 0
            while i &+ 16 <= count {
                c = step(c, raw.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                d = step(d, raw.loadUnaligned(fromByteOffset: i &+ 8, as: UInt64.self))
                i &+= 16
            }
            if i &+ 8 <= count {
                b = step(b, raw.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                i &+= 8
            }
            if i < count { b = step(b, tail(p, i, count &- i, count)) }
            return true
        }
        var h = Hash64()
        h.add(a); h.add(b); h.add(c); h.add(d); h.add(UInt64(n))
        return (h.value, n)
    }

    /// Whether the key stored at `key` (`n` bytes) is the one the fields make.
    @inline(__always)
    private static func same(_ key: UnsafeRawPointer, _ role: EventRole, _ f: RawFacts) -> Bool {
        guard key.load(as: UInt8.self) == role.rawValue else { return false }
        var at = 1
        return fields(f) { t in
            let stored = key.loadUnaligned(fromByteOffset: at, as: UInt32.self)
            at &+= 4
            guard let p = t.start else { return stored == UInt32.max }
            guard stored == UInt32(t.count) else { return false }
            let q = (key + at).assumingMemoryBound(to: UInt8.self)
            at &+= t.count
            return t.count == 0 || Bytes.equal(p, q, t.count)
        }
    }

    /// Appends to `hits` what `matcher.matchRaw(role:facts:into:buffer:)` appends.
    ///
    /// A hit reads the fields twice where they are (hash, comparison with the stored key) and copies nothing
    /// but the hits; only a miss lays the key out, into its entry's block.
    public func match(role: EventRole, facts f: RawFacts, into hits: inout [Int], buffer: inout [UInt8]) {
        guard mask >= 0, role != .other else {
            matcher.matchRaw(role: role, facts: f, into: &hits, buffer: &buffer)
            return
        }
        let (hash, n) = Self.hash(role, f)
        guard n <= Self.longestKey else {
            matcher.matchRaw(role: role, facts: f, into: &hits, buffer: &buffer)
            return
        }
        let set = entries + 2 * (Int(truncatingIfNeeded: hash >> 17) & mask)
        for way in 0..<2 {
            let e = set + way
            guard e.pointee.hash == hash, Int(e.pointee.keyCount) == n else { continue }
            let block = e.pointee.block!
            let count = Int(e.pointee.hitCount)
            guard Self.same(UnsafeRawPointer(block.advanced(by: 4 * count)), role, f) else { continue }
            let stored = block.assumingMemoryBound(to: Int32.self)
            for k in 0..<count { hits.append(Int(stored[k])) }
            if way == 1 { swap(&set[0], &set[1]) }
            return
        }
        let start = hits.count
        matcher.matchRaw(role: role, facts: f, into: &hits, buffer: &buffer)
        // The new entry goes first; the old first becomes second; the old second's block is reused.
        swap(&set[0], &set[1])
        let e = set
        let found = hits.count - start
        let size = 4 * found + n
        if e.pointee.capacity < size {
            e.pointee.block?.deallocate()
            e.pointee.block = .allocate(byteCount: size, alignment: 4)
            e.pointee.capacity = size
        }
        let block = e.pointee.block!
        let stored = block.bindMemory(to: Int32.self, capacity: found)
        for k in 0..<found { stored[k] = Int32(hits[start + k]) }
        // The key: the role, then per field 4 bytes of length (`UInt32.max` when absent) and the bytes.
        let key = block.advanced(by: 4 * found)
        key.storeBytes(of: role.rawValue, as: UInt8.self)
        var at = 1
        _ = Self.fields(f) { t in
            key.storeBytes(of: t.start == nil ? UInt32.max : UInt32(t.count), toByteOffset: at, as: UInt32.self)
            at += 4
            if let p = t.start, t.count > 0 { (key + at).copyMemory(from: p, byteCount: t.count) }
            at += t.count
            return true
        }
        e.pointee.keyCount = Int32(n)
        e.pointee.hitCount = Int32(found)
        e.pointee.hash = hash
    }
}
