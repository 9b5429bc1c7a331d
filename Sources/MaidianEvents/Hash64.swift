/// A fast 64-bit hash for in-memory keys (not stable across versions; never persisted).
/// Multiply-xorshift mixing in the style of wyhash/murmur finalizers.
public struct Hash64 {
    @usableFromInline var h: UInt64 = 0x9E37_79B9_7F4A_7C15

    @inlinable public init() {}

    @inline(__always) @usableFromInline static func mix(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let r = a.multipliedFullWidth(by: b)
        return r.high ^ r.low
    }

    @inlinable @inline(__always) public mutating func add(_ v: UInt64) {
        h = Hash64.mix(h ^ v, 0xA076_1D64_78BD_642F) &+ 0xE703_7ED1_A0B4_28DB
    }

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

    @inlinable public var value: UInt64 { Hash64.mix(h, 0x8EBC_6AF0_9C88_C6E3) }
}
