// Growing a byte array by a region that C code (zstd) or a writer fills through a pointer.

/// 1 MiB of zeros: appending from it is a memcpy, fast even in debug builds (unlike a repeated element).
/// `nonisolated(unsafe)` is safe: the memory is written once, in this initializer, and only read after.
nonisolated(unsafe) private let zeroBlock: UnsafeBufferPointer<UInt8> = {
    let n = 1 << 20
    let p = UnsafeMutablePointer<UInt8>.allocate(capacity: n)
    p.initialize(repeating: 0, count: n)
    return UnsafeBufferPointer(start: p, count: n)
}()

/// Appends `count` zero bytes.
@inline(__always)
func appendZeros(_ array: inout [UInt8], _ count: Int) {
    var left = count
    while left > 0 {
        let k = Swift.min(left, zeroBlock.count)
        array.append(contentsOf: UnsafeBufferPointer(rebasing: zeroBlock[0..<k]))
        left -= k
    }
}

/// Appends `count` zero bytes to `array` and calls `body` with a pointer to them; then keeps only the
/// first `used` of them, where `used` is what `body` returns. Amortized: no allocation once the array's
/// capacity suffices.
@inline(__always)
public func withAppendedRegion<R>(
    _ array: inout [UInt8], _ count: Int,
    _ body: (UnsafeMutableRawBufferPointer) -> (used: Int, result: R)
) -> R {
    let base = array.count
    let needed = base + count
    if array.capacity < needed {
        // Geometric growth so that repeated appends stay amortized O(1).
        array.reserveCapacity(Swift.max(needed, array.capacity * 2))
    }
    appendZeros(&array, count)
    let r = array.withUnsafeMutableBytes { all in
        body(UnsafeMutableRawBufferPointer(rebasing: all[base..<needed]))
    }
    array.removeLast(count - r.used)
    return r.result
}

/// The byte toolkit every module uses (one copy of each primitive): equality of byte runs here; the JSON
/// writer and its one string escaper in `JSONOut`; `Base64`; `Hash64` and `HashTable64`; `TextSet` for
/// sets of configured names; the batch's accessors in `EventAccess.swift`.
public enum Bytes {
    /// Whether the `n` bytes at `a` and at `b` are equal. Inline 8 bytes at a time, then byte by byte: the
    /// runs compared are names, ids, pages and element paths, where a `memcmp` call costs more than it saves.
    @inlinable @inline(__always)
    public static func equal(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ n: Int) -> Bool {
        var i = 0
        while i &+ 8 <= n {
            if UnsafeRawPointer(a).loadUnaligned(fromByteOffset: i, as: UInt64.self)
                != UnsafeRawPointer(b).loadUnaligned(fromByteOffset: i, as: UInt64.self) { return false }
            i &+= 8
        }
        while i < n {
            if a[i] != b[i] { return false }
            i &+= 1
        }
        return true
    }

    /// Whether the bytes at `a` (at least `b.count` of them readable) equal `b`'s.
    @inlinable @inline(__always)
    public static func equal(_ a: UnsafePointer<UInt8>, _ b: StaticString) -> Bool {
        b.withUTF8Buffer { equal(a, $0.baseAddress!, $0.count) }
    }
}
