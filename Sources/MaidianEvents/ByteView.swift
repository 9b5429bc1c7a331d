/// A read-only view of bytes (a batch arena, a part of one, a stage's own table), valid only inside the
/// closure that gives it, as `withUnsafeBufferPointer`'s buffer is, which it wraps. It is how stages read
/// bytes: indexes and ranges instead of pointers, and the primitives (equality, search, hashing, loads)
/// written once here. Element access is checked in debug builds and unchecked in release builds, like
/// the buffer's: the hot paths that read through it were measured with both.
public struct ByteView {
    @usableFromInline let base: UnsafeBufferPointer<UInt8>

    @inlinable init(_ base: UnsafeBufferPointer<UInt8>) { self.base = base }

    /// Number of bytes.
    @inlinable public var count: Int { base.count }
    /// Whether there are no bytes (an absent field reads as empty).
    @inlinable public var isEmpty: Bool { base.isEmpty }

    /// Byte `i` (`0 ..< count`).
    @inlinable public subscript(i: Int) -> UInt8 {
        @inline(__always) get { base[i] }
    }

    /// The bytes in `r` (within `0 ..< count`), as a view of their own (indexes from 0).
    @inlinable public subscript(r: Range<Int>) -> ByteView {
        @inline(__always) get { ByteView(UnsafeBufferPointer(rebasing: base[r])) }
    }

    /// The bytes a `Span` of this arena covers.
    @inlinable public subscript(span: Span) -> ByteView {
        @inline(__always) get { self[Int(span.start) ..< Int(span.end)] }
    }

    /// Whether the bytes equal `s`'s.
    @inlinable public func equals(_ s: StaticString) -> Bool {
        count == s.utf8CodeUnitCount && (count == 0 || Bytes.equal(base.baseAddress!, s))
    }

    /// Whether the bytes equal `other`'s.
    @inlinable public func equals(_ other: ByteView) -> Bool {
        count == other.count && (count == 0 || Bytes.equal(base.baseAddress!, other.base.baseAddress!, count))
    }

    /// Whether the bytes equal `b`.
    @inlinable public func equals(_ b: [UInt8]) -> Bool {
        b.withUnsafeBufferPointer { equals(ByteView($0)) }
    }

    /// Whether `s`'s bytes are at position `i`.
    @inlinable public func has(_ s: StaticString, at i: Int) -> Bool {
        let n = s.utf8CodeUnitCount
        return i >= 0 && i + n <= count && (n == 0 || Bytes.equal(base.baseAddress! + i, s))
    }

    /// The first position at or after `from` where `needle` is, or nil.
    @inlinable public func firstIndex(of needle: StaticString, from: Int = 0) -> Int? {
        let m = needle.utf8CodeUnitCount
        guard m > 0, m <= count else { return nil }
        let first = needle.utf8Start[0]
        var i = max(0, from)
        while i + m <= count {
            if base[i] == first && Bytes.equal(base.baseAddress! + i, needle) { return i }
            i += 1
        }
        return nil
    }

    /// The `Hash64` of the bytes (as `TextSet` and the decoder's `eventNameHash`/`distinctIDHash` compute it).
    @inlinable public var hash: UInt64 {
        var h = Hash64()
        if let p = base.baseAddress { h.add(p, count) } else { h.add(0) }
        return h.value
    }

    /// The 8 bytes at `i ..< i + 8` (which must be within the view) as a little-endian integer.
    @inlinable public func load64(at i: Int) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(base.baseAddress! + i).loadUnaligned(as: UInt64.self))
    }

    /// Appends the bytes to `out`.
    @inlinable public func append(to out: inout [UInt8]) { out.append(contentsOf: base) }

    /// A copy of the bytes.
    @inlinable public var array: [UInt8] { Array(base) }

    /// The bytes as a String (invalid UTF-8 repaired; messages and rare paths).
    public var string: String { String(decoding: base, as: UTF8.self) }

    /// The bytes for an API of another module that reads raw bytes (an address parser, a C library).
    @inlinable public func withRawBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(base))
    }
}

extension Array where Element == UInt8 {
    /// Calls `body` with a view of the array's bytes.
    @inlinable public func withByteView<R>(_ body: (ByteView) throws -> R) rethrows -> R {
        try withUnsafeBufferPointer { try body(ByteView($0)) }
    }
}

extension String {
    /// Calls `body` with a view of the string's UTF-8 bytes.
    @inlinable public func withByteView<R>(_ body: (ByteView) throws -> R) rethrows -> R {
        var s = self
        return try s.withUTF8 { try body(ByteView($0)) }
    }
}

extension EventBatch {
    /// Calls `body` with a view of the JSON arena (index it with the spans of events and properties).
    @inlinable public func withJSON<R>(_ body: (ByteView) throws -> R) rethrows -> R {
        try json.withUnsafeBufferPointer { try body(ByteView($0)) }
    }

    /// Calls `body` with a view of the input arena (record keys and header values).
    @inlinable public func withInput<R>(_ body: (ByteView) throws -> R) rethrows -> R {
        try input.withUnsafeBufferPointer { try body(ByteView($0)) }
    }

    /// Calls `body` with a view of the scratch arena (what stages wrote).
    @inlinable public func withScratch<R>(_ body: (ByteView) throws -> R) rethrows -> R {
        try scratch.withUnsafeBufferPointer { try body(ByteView($0)) }
    }
}
