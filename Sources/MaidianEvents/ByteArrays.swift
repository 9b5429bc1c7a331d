// The byte-array primitives the windows stage's hot paths need (copying a piece of one arena into another,
// ordering keys, little-endian integers), written once here with pointers so the stage itself has none.
// Each one's signature is safe: arrays, ranges and views in, checked in debug builds.

extension Array where Element == UInt8 {
    /// Appends `source[range]` (a piece of another arena, such as an interned key part): one copy, no slice.
    @inlinable @inline(__always)
    public mutating func append(bytesOf source: [UInt8], _ range: Range<Int>) {
        source.withUnsafeBufferPointer { append(contentsOf: UnsafeBufferPointer(rebasing: $0[range])) }
    }

    /// Appends the bytes of `view`.
    @inlinable @inline(__always)
    public mutating func append(_ view: ByteView) { append(contentsOf: view.base) }

    /// Appends `v` as 8 little-endian bytes.
    @inlinable @inline(__always)
    public mutating func appendLittleEndian(_ v: UInt64) {
        Swift.withUnsafeBytes(of: v.littleEndian) { append(contentsOf: $0) }
    }

    /// Appends `v` as 4 little-endian bytes.
    @inlinable @inline(__always)
    public mutating func appendLittleEndian(_ v: UInt32) {
        Swift.withUnsafeBytes(of: v.littleEndian) { append(contentsOf: $0) }
    }
}

extension ByteView {
    /// Whether these bytes sort before `other`'s: byte by byte (as `memcmp`), then the shorter first.
    @inlinable
    public func precedes(_ other: ByteView) -> Bool {
        let n = Swift.min(count, other.count)
        if n > 0 {
            let c = memcmpBytes(base.baseAddress!, other.base.baseAddress!, n)
            if c != 0 { return c < 0 }
        }
        return count < other.count
    }

    /// JSON string content of the bytes appended to `out` (`JSONOut.appendEscaped`'s one policy).
    @inlinable
    public func appendEscaped(to out: inout [UInt8]) { JSONOut.appendEscaped(UnsafeRawBufferPointer(base), to: &out) }
}

/// Byte-wise comparison of `n` bytes, as `memcmp` returns it (negative, zero, positive): whole words
/// (compared in big-endian order, which is byte order), then the tail.
@inlinable @inline(__always)
func memcmpBytes(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ n: Int) -> Int {
    let ra = UnsafeRawPointer(a), rb = UnsafeRawPointer(b)
    var i = 0
    while i &+ 8 <= n {
        let x = ra.loadUnaligned(fromByteOffset: i, as: UInt64.self), y = rb.loadUnaligned(fromByteOffset: i, as: UInt64.self)
        if x != y { return UInt64(bigEndian: x) < UInt64(bigEndian: y) ? -1 : 1 }
        i &+= 8
    }
    while i < n {
        if a[i] != b[i] { return a[i] < b[i] ? -1 : 1 }
        i &+= 1
    }
    return 0
}

extension ArraySlice where Element == UInt8 {
    /// JSON string content of the bytes appended to `out` (`JSONOut.appendEscaped`'s one policy).
    @inlinable
    public func appendEscaped(to out: inout [UInt8]) { withUnsafeBytes { JSONOut.appendEscaped($0, to: &out) } }
}

extension BatchView {
    /// `text(ofAdded:_:)` with the name as a view.
    @inlinable
    public func text(ofAdded name: ByteView, _ ev: Event) -> Text? { text(ofAdded: name.base, ev) }
}

extension ByteView {
    /// The bytes as a `Sequence` (for generic byte code such as a hash over any bytes). A wrapper rather
    /// than a conformance of the view itself, whose `Sequence` methods (`max`, `first`, ...) would shadow
    /// the globals inside it.
    @inlinable public var elements: Elements { Elements(view: self) }

    /// The bytes of a view in order.
    public struct Elements: Sequence {
        @usableFromInline let view: ByteView
        @inlinable init(view: ByteView) { self.view = view }

        /// Iterates over the bytes.
        public struct Iterator: IteratorProtocol {
            @usableFromInline let view: ByteView
            @usableFromInline var i = 0
            @inlinable init(_ view: ByteView) { self.view = view }
            @inlinable @inline(__always)
            public mutating func next() -> UInt8? {
                guard i < view.count else { return nil }
                defer { i &+= 1 }
                return view[i]
            }
        }

        @inlinable public func makeIterator() -> Iterator { Iterator(view) }
        @inlinable public var underestimatedCount: Int { view.count }
    }
}
