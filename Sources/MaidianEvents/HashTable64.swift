/// An open-addressing hash table from already-hashed 64-bit keys to 64-bit values: no per-insert allocation,
/// no re-hashing of the key (Swift's Dictionary runs SipHash on every lookup).
///
/// A key and its value sit side by side (one cache line per probe: a table larger than the caches costs one
/// miss per lookup, not two).
public struct HashTable64: Sendable {
    /// Slot `i` is `slots[2 * i]` (key, 0 = empty) and `slots[2 * i + 1]` (the value's bit pattern).
    private var slots: [UInt64]
    private var mask: Int
    public private(set) var count = 0

    public init(capacity: Int = 1024) {
        var n = 16
        while n < capacity * 2 { n <<= 1 }
        slots = Array(repeating: 0, count: 2 * n)
        mask = n - 1
    }

    private var slotCount: Int { mask + 1 }

    /// 0 marks an empty slot, so key 0 is stored as 1 (a 2^-64 collision, like any other).
    @inline(__always) private static func slotKey(_ k: UInt64) -> UInt64 { k == 0 ? 1 : k }

    /// The value for `key`, or nil.
    @inline(__always)
    public func get(_ key: UInt64) -> Int64? {
        let k = HashTable64.slotKey(key)
        let m = mask
        return slots.withUnsafeBufferPointer { s -> Int64? in
            var i = Int(truncatingIfNeeded: k) & m
            while true {
                let sk = s[2 &* i]
                if sk == k { return Int64(bitPattern: s[2 &* i &+ 1]) }
                if sk == 0 { return nil }
                i = (i &+ 1) & m
            }
        }
    }

    /// Sets `key` to `value`.
    @inline(__always)
    public mutating func set(_ key: UInt64, _ value: Int64) {
        _ = claim(key, value, overwrite: true)
    }

    /// The value for `key` if present; otherwise inserts `value` and returns nil. One probe sequence.
    @inline(__always)
    public mutating func getOrInsert(_ key: UInt64, _ value: Int64) -> Int64? {
        claim(key, value, overwrite: false)
    }

    /// Finds `key`'s slot, claiming an empty one for a new key (stores `value`); stores `value` into an
    /// existing slot too when `overwrite`. Returns the value the key had, or nil when it is new.
    @inline(__always)
    private mutating func claim(_ key: UInt64, _ value: Int64, overwrite: Bool) -> Int64? {
        if (count + 1) * 10 > slotCount * 7 { grow() }
        let k = HashTable64.slotKey(key)
        let m = mask
        let old = slots.withUnsafeMutableBufferPointer { s -> Int64? in
            var i = Int(truncatingIfNeeded: k) & m
            while true {
                let sk = s[2 &* i]
                if sk == k {
                    let was = Int64(bitPattern: s[2 &* i &+ 1])
                    if overwrite { s[2 &* i &+ 1] = UInt64(bitPattern: value) }
                    return was
                }
                if sk == 0 {
                    s[2 &* i] = k
                    s[2 &* i &+ 1] = UInt64(bitPattern: value)
                    return nil
                }
                i = (i &+ 1) & m
            }
        }
        if old == nil { count += 1 }
        return old
    }

    /// Empties the table, keeping its capacity.
    public mutating func removeAll() {
        if count == 0 { return }
        slots.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
        count = 0
    }

    private mutating func grow() {
        let old = slots
        let n = slotCount * 2
        slots = Array(repeating: 0, count: 2 * n)
        mask = n - 1
        count = 0
        var i = 0
        while i < old.count {
            if old[i] != 0 { set(old[i], Int64(bitPattern: old[i + 1])) }
            i += 2
        }
    }
}
