/// An open-addressing hash table from already-hashed 64-bit keys to 64-bit values: no per-insert allocation,
/// no re-hashing of the key (Swift's Dictionary runs SipHash on every lookup).
public struct HashTable64: Sendable {
    private var keys: [UInt64]
    private var values: [Int64]
    private var mask: Int
    public private(set) var count = 0

    public init(capacity: Int = 1024) {
        var n = 16
        while n < capacity * 2 { n <<= 1 }
        keys = Array(repeating: 0, count: n)
        values = Array(repeating: 0, count: n)
        mask = n - 1
    }

    /// 0 marks an empty slot, so key 0 is stored as 1 (a 2^-64 collision, like any other).
    @inline(__always) private static func slotKey(_ k: UInt64) -> UInt64 { k == 0 ? 1 : k }

    /// The value for `key`, or nil.
    @inline(__always)
    public func get(_ key: UInt64) -> Int64? {
        let k = HashTable64.slotKey(key)
        return keys.withUnsafeBufferPointer { ks -> Int64? in
            var i = Int(truncatingIfNeeded: k) & mask
            while true {
                let s = ks[i]
                if s == k { return values[i] }
                if s == 0 { return nil }
                i = (i &+ 1) & mask
            }
        }
    }

    /// Sets `key` to `value`.
    @inline(__always)
    public mutating func set(_ key: UInt64, _ value: Int64) {
        let (slot, _) = claim(key)
        values[slot] = value
    }

    /// The slot of `key`, claiming an empty one (and counting it) when the key is new.
    @inline(__always)
    private mutating func claim(_ key: UInt64) -> (slot: Int, inserted: Bool) {
        if (count + 1) * 10 > keys.count * 7 { grow() }
        let k = HashTable64.slotKey(key)
        let m = mask
        let found = keys.withUnsafeMutableBufferPointer { ks -> (Int, Bool) in
            var i = Int(truncatingIfNeeded: k) & m
            while true {
                let s = ks[i]
                if s == k { return (i, false) }
                if s == 0 { ks[i] = k; return (i, true) }
                i = (i &+ 1) & m
            }
        }
        if found.1 { count += 1 }
        return found
    }

    /// The value for `key` if present; otherwise inserts `value` and returns nil. One probe sequence.
    @inline(__always)
    public mutating func getOrInsert(_ key: UInt64, _ value: Int64) -> Int64? {
        let (slot, inserted) = claim(key)
        if inserted {
            values[slot] = value
            return nil
        }
        return values[slot]
    }

    /// Empties the table, keeping its capacity.
    public mutating func removeAll() {
        if count == 0 { return }
        keys.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
        count = 0
    }

    private mutating func grow() {
        let oldKeys = keys, oldValues = values
        let n = keys.count * 2
        keys = Array(repeating: 0, count: n)
        values = Array(repeating: 0, count: n)
        mask = n - 1
        count = 0
        for (i, k) in oldKeys.enumerated() where k != 0 { set(k, oldValues[i]) }
    }
}
