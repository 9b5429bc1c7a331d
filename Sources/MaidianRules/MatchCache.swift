#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import MaidianEvents

/// Results of `RuleMatcher.matchRaw` by the exact bytes of the facts it reads, for one matcher and one thread.
///
/// Clicks and page views repeat: the same elements of the same pages, from a few app versions, so most events
/// carry facts matched before. A hit costs laying the facts out (a copy of a few hundred bytes), hashing them
/// and one comparison with the cached copy; a miss adds that to a full match. Two-way set associative (the
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
    /// The facts of the event being matched, laid out as a key (8 bytes of slack: the last word is loaded whole).
    private let key: UnsafeMutablePointer<UInt8>
    private static let longestKey = 4096

    /// A cache of about `slots` entries (rounded up to a power of two, at least 2; 0: no cache, every event is matched).
    public init(matcher: RuleMatcher, slots: Int) {
        self.matcher = matcher
        var sets = slots > 0 ? 1 : 0
        while sets > 0 && sets * 2 < slots { sets <<= 1 }
        mask = sets - 1
        entries = .allocate(capacity: max(2 * sets, 1))
        entries.initialize(repeating: Entry(), count: max(2 * sets, 1))
        key = .allocate(capacity: Self.longestKey + 8)
        key.initialize(repeating: 0, count: Self.longestKey + 8)
    }

    deinit {
        for k in 0..<max(2 * (mask + 1), 1) {
            entries[k].block?.deallocate()
        }
        entries.deallocate()
        key.deallocate()
    }

    /// Lays out one field of the key at `key + n`: 4 bytes of length (`UInt32.max` when absent), then the bytes.
    /// False when the key would be longer than `longestKey`.
    @inline(__always)
    private static func put(_ t: ByteView, _ key: UnsafeMutablePointer<UInt8>, _ n: inout Int) -> Bool {
        guard let p = t.start else {
            guard n + 4 <= longestKey else { return false }
            UnsafeMutableRawPointer(key + n).storeBytes(of: UInt32.max, as: UInt32.self)
            n += 4
            return true
        }
        let count = t.count
        guard n + 4 + count <= longestKey else { return false }
        UnsafeMutableRawPointer(key + n).storeBytes(of: UInt32(count), as: UInt32.self)
        copy(p, key + n + 4, count)
        n += 4 + count
        return true
    }

    /// Copies `n` bytes. Fields are short (page names, paths, versions): up to 64 bytes are copied with
    /// (overlapping) word loads and stores inside `src[0..<n]`, no call per field; longer ones with `memmove`.
    @inline(__always)
    private static func copy(_ src: UnsafePointer<UInt8>, _ dst: UnsafeMutablePointer<UInt8>, _ n: Int) {
        let s = UnsafeRawPointer(src), d = UnsafeMutableRawPointer(dst)
        @inline(__always) func word(_ at: Int) { d.storeBytes(of: s.loadUnaligned(fromByteOffset: at, as: UInt64.self), toByteOffset: at, as: UInt64.self) }
        if n >= 8 && n <= 64 {
            var i = 0
            while i &+ 8 < n { word(i); i &+= 8 }
            word(n &- 8)
        } else if n >= 4 && n < 8 {
            d.storeBytes(of: s.loadUnaligned(as: UInt32.self), as: UInt32.self)
            d.storeBytes(of: s.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self), toByteOffset: n &- 4, as: UInt32.self)
        } else if n < 4 {
            for i in 0..<n { dst[i] = src[i] }
        } else {
            dst.update(from: src, count: n)
        }
    }

    /// A hash of the whole key in four independent lanes (a multiply and a rotation per word, the lanes in
    /// parallel), finished with `Hash64`: it only spreads keys over the sets, every hit is compared byte for byte.
    @inline(__always)
    private static func hash(_ p: UnsafePointer<UInt8>, _ n: Int) -> UInt64 {
        let raw = UnsafeRawPointer(p)
        @inline(__always) func word(_ i: Int) -> UInt64 { raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) }
        @inline(__always) func step(_ lane: UInt64, _ w: UInt64) -> UInt64 {
            let m = (lane ^ w) &* 0x9E37_79B9_7F4A_7C15
            return (m << 29) | (m >> 35)
        }
        var a: UInt64 = 0x243F_6A88_85A3_08D3, b: UInt64 = 0x1319_8A2E_0370_7344
        var c: UInt64 = 0xA409_3822_299F_31D0, d: UInt64 = 0x082E_FA98_EC4E_6C89
        var i = 0
        while i &+ 32 <= n {
            a = step(a, word(i)); b = step(b, word(i &+ 8)); c = step(c, word(i &+ 16)); d = step(d, word(i &+ 24))
            i &+= 32
        }
        while i &+ 8 <= n {
            a = step(a, word(i))
            i &+= 8
        }
        // The last partial word, masked (the key buffer has slack past its end).
        if i < n { b = step(b, word(i) & (UInt64.max >> UInt64(64 &- 8 &* (n &- i)))) }
        var h = Hash64()
        h.add(a); h.add(b); h.add(c); h.add(d); h.add(UInt64(n))
        return h.value
    }

    /// Appends to `hits` what `matcher.matchRaw(role:facts:into:buffer:)` appends.
    public func match(role: EventRole, facts f: RawFacts, into hits: inout [Int], buffer: inout [UInt8]) {
        guard mask >= 0, role != .other else {
            matcher.matchRaw(role: role, facts: f, into: &hits, buffer: &buffer)
            return
        }
        // `lib` is read only for an event without `$app_version`.
        let lib = f.appVersion.isPresent ? ByteView.absent : f.lib
        var n = 1
        key[0] = role.rawValue
        let key = self.key
        guard Self.put(f.screenName, key, &n), Self.put(f.currentURL, key, &n), Self.put(f.pagePath, key, &n),
              Self.put(f.appVersion, key, &n), Self.put(lib, key, &n), Self.put(f.elementPath, key, &n),
              Self.put(f.elementType, key, &n), Self.put(f.elementPosition, key, &n), Self.put(f.elementIndex, key, &n),
              Self.put(f.content, key, &n), Self.put(f.contentObject, key, &n), Self.put(f.elementKind, key, &n),
              Self.put(f.target, key, &n), Self.put(f.action, key, &n), Self.put(f.container, key, &n),
              Self.put(f.tag, key, &n)
        else {
            matcher.matchRaw(role: role, facts: f, into: &hits, buffer: &buffer)
            return
        }
        let hash = Self.hash(key, n)
        let set = entries + 2 * (Int(truncatingIfNeeded: hash >> 17) & mask)
        for way in 0..<2 {
            let e = set + way
            guard e.pointee.hash == hash, Int(e.pointee.keyCount) == n else { continue }
            let block = e.pointee.block!
            let count = Int(e.pointee.hitCount)
            // Keys are a few hundred bytes: libc's vectorized compare.
            guard memcmp(block.advanced(by: 4 * count), key, n) == 0 else { continue }
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
        block.advanced(by: 4 * found).copyMemory(from: key, byteCount: n)
        e.pointee.keyCount = Int32(n)
        e.pointee.hitCount = Int32(found)
        e.pointee.hash = hash
    }
}
