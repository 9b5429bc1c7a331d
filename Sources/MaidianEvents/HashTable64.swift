/// An open-addressing hash table from already-hashed 64-bit keys to 64-bit values: no per-insert allocation,
/// no re-hashing of the key (Swift's Dictionary runs SipHash on every lookup).
///
/// Beside the slots (key and value side by side) sits one tag byte per slot: 0 for empty, else 7 bits of
/// the key. Probes walk the small tag array and read a slot only when its tag matches, so a lookup of a key
/// that is not there, and an insert, load nothing from the large slot array: a table larger than the caches
/// (the de-duplication memory) costs no cache miss for new keys, only the stores of an insert.
public struct HashTable64: Sendable {
    /// Slot `i` is `slots[2 * i]` (key) and `slots[2 * i + 1]` (the value's bit pattern); valid when
    /// `tags[i] != 0`.
    @usableFromInline var slots: [UInt64]
    @usableFromInline var tags: [UInt8]
    @usableFromInline var mask: Int
    /// Keys in the table.
    public var count: Int { used }
    @usableFromInline var used = 0

    /// An empty table with room for `capacity` keys before it first grows (slots: a power of two, at least 16).
    public init(capacity: Int = 1024) {
        var n = 16
        while n < capacity * 2 { n <<= 1 }
        slots = Array(repeating: 0, count: 2 * n)
        tags = Array(repeating: 0, count: n)
        mask = n - 1
    }

    @inlinable var slotCount: Int { mask + 1 }

    /// The tag of a key: its top 7 bits, never 0. The slot index comes from the low bits.
    @inlinable @inline(__always) static func tag(_ k: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: k >> 57) | 0x80 }

    /// The value for `key`, or nil.
    @inlinable @inline(__always)
    public func get(_ key: UInt64) -> Int64? {
        let t = HashTable64.tag(key)
        let m = mask
        return tags.withUnsafeBufferPointer { tg -> Int64? in
            slots.withUnsafeBufferPointer { s -> Int64? in
                var i = Int(truncatingIfNeeded: key) & m
                while true {
                    let ti = tg[i]
                    if ti == 0 { return nil }
                    if ti == t && s[2 &* i] == key { return Int64(bitPattern: s[2 &* i &+ 1]) }
                    i = (i &+ 1) & m
                }
            }
        }
    }

    /// Reads the tag and the slot where a look-up of `key` starts, and returns them folded into one value
    /// (callers keep it, so the reads are not optimized away). A loop of these over a batch's keys, before the
    /// look-ups, has no read wait for another: their cache misses overlap, where the look-ups themselves,
    /// interleaved with other work, would wait for one after another (a table bigger than the caches).
    @inlinable @inline(__always)
    public func touch(_ key: UInt64) -> UInt64 {
        let i = Int(truncatingIfNeeded: key) & mask
        return tags.withUnsafeBufferPointer { tg in
            slots.withUnsafeBufferPointer { s in UInt64(tg[i]) &+ s[2 &* i &+ 1] }
        }
    }

    /// Sets `key` to `value`.
    @inlinable @inline(__always)
    public mutating func set(_ key: UInt64, _ value: Int64) {
        _ = claim(key, value, overwrite: true)
    }

    /// The value for `key` if present; otherwise inserts `value` and returns nil. One probe sequence.
    @inlinable @inline(__always)
    public mutating func getOrInsert(_ key: UInt64, _ value: Int64) -> Int64? {
        claim(key, value, overwrite: false)
    }

    /// Finds `key`'s slot, claiming an empty one for a new key (stores `value`); stores `value` into an
    /// existing slot too when `overwrite`. Returns the value the key had, or nil when it is new.
    @inlinable @inline(__always)
    mutating func claim(_ key: UInt64, _ value: Int64, overwrite: Bool) -> Int64? {
        if (used + 1) * 10 > slotCount * 7 { grow() }
        let t = HashTable64.tag(key)
        let m = mask
        let old = tags.withUnsafeMutableBufferPointer { tg -> Int64? in
            slots.withUnsafeMutableBufferPointer { s -> Int64? in
                var i = Int(truncatingIfNeeded: key) & m
                while true {
                    let ti = tg[i]
                    if ti == 0 {
                        tg[i] = t
                        s[2 &* i] = key
                        s[2 &* i &+ 1] = UInt64(bitPattern: value)
                        return nil
                    }
                    if ti == t && s[2 &* i] == key {
                        let was = Int64(bitPattern: s[2 &* i &+ 1])
                        if overwrite { s[2 &* i &+ 1] = UInt64(bitPattern: value) }
                        return was
                    }
                    i = (i &+ 1) & m
                }
            }
        }
        if old == nil { used &+= 1 }
        return old
    }

    /// Empties the table, keeping its capacity (only the tags are cleared).
    public mutating func removeAll() {
        if used == 0 { return }
        tags.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
        used = 0
    }

    @usableFromInline mutating func grow() {
        let oldSlots = slots, oldTags = tags
        let n = slotCount * 2
        slots = Array(repeating: 0, count: 2 * n)
        tags = Array(repeating: 0, count: n)
        mask = n - 1
        used = 0
        for i in oldTags.indices where oldTags[i] != 0 { set(oldSlots[2 * i], Int64(bitPattern: oldSlots[2 * i + 1])) }
    }
}
