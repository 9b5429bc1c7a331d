/// A fast 64-bit hash for in-memory keys (not stable across versions; never persisted).
/// Multiply-xorshift mixing in the style of wyhash/murmur finalizers.
public struct Hash64 {
    @usableFromInline var h: UInt64 = 0x9E37_79B9_7F4A_7C15

    /// A hash of nothing yet: `add` the key's parts, then read `value`.
    @inlinable public init() {}

    @inline(__always) @usableFromInline static func mix(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let r = a.multipliedFullWidth(by: b)
        return r.high ^ r.low
    }

    /// Mixes in one 64-bit word.
    @inlinable @inline(__always) public mutating func add(_ v: UInt64) {
        h = Hash64.mix(h ^ v, 0xA076_1D64_78BD_642F) &+ 0xE703_7ED1_A0B4_28DB
    }

    /// Mixes in the `n` bytes at `p`, a word at a time; the length goes in with the last partial word.
    @inlinable @inline(__always) public mutating func add(_ p: UnsafePointer<UInt8>, _ n: Int) {
        var i = 0
        let raw = UnsafeRawPointer(p)
        while i + 8 <= n {
            add(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            i += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while i < n {
            tail |= UInt64(p[i]) << shift
            shift += 8
            i += 1
        }
        add(tail ^ (UInt64(n) << 56))
    }

    /// The hash of everything added so far, finalized (reading it does not change the state).
    @inlinable public var value: UInt64 { Hash64.mix(h, 0x8EBC_6AF0_9C88_C6E3) }
}

/// 64-bit FNV-1a: a hash whose values never change between versions or processes, for what several workers
/// must agree on (the internal partition of a windowed key) and for tables generated ahead of use. Slower than
/// `Hash64` (a multiply per byte): use it only where a value is shared or kept.
public enum StableHash {
    /// FNV-1a of `bytes`; with `lowercasingASCII`, of the bytes with ASCII `A`–`Z` as `a`–`z` (other bytes as
    /// they are), so that texts differing only in ASCII case hash alike.
    @inlinable @inline(__always)
    public static func fnv1a(_ bytes: ByteView, lowercasingASCII: Bool = false) -> UInt64 {
        let n = bytes.count
        var h: UInt64 = 0xCBF2_9CE4_8422_2325  // the offset basis
        var i = 0
        while i < n {
            var b = bytes[i]
            if lowercasingASCII && b >= 0x41 && b <= 0x5A { b |= 0x20 }
            h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3  // the prime
            i &+= 1
        }
        return h
    }

    /// FNV-1a of a sequence of bytes.
    @inlinable
    public static func fnv1a<C: Sequence<UInt8>>(_ bytes: C) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
        return h
    }
}
