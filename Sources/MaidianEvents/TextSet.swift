/// A fixed set of byte strings (configured names, ids) looked up by the bytes of a batch: one `Hash64` of
/// the bytes finds the candidate in a `HashTable64`, and the bytes are compared to confirm it (a hash match
/// alone could be a collision). Built once per stage; lookups allocate nothing.
///
/// Stages use it through the access layer (`EventBatch.firstIndex(of:in:)`, `EventRoles.Table`) instead of
/// keeping their own tables of names and hashing code.
public struct TextSet: Sendable {
    /// The members' bytes, back to back; member `i` is `bytes[offsets[i] ..< offsets[i + 1]]`.
    @usableFromInline let bytes: [UInt8]
    @usableFromInline let offsets: [Int32]
    @usableFromInline let table: HashTable64
    /// Two members share a hash: lookups of a hash found in the table fall back to comparing every member
    /// with that hash (never the case with 64-bit hashes of a few names, but correct if it happens).
    @usableFromInline let collisions: Bool

    /// The set of `members`, numbered in order; a member listed twice keeps its first number.
    public init(_ members: [String]) {
        var bytes: [UInt8] = []
        var offsets: [Int32] = [0]
        var table = HashTable64(capacity: max(8, members.count))
        var collisions = false
        for m in members {
            let b = Array(m.utf8)
            let h = TextSet.hash(b)
            if let seen = table.get(h) {
                let s = Int(seen)
                if bytes[Int(offsets[s])..<Int(offsets[s + 1])].elementsEqual(b) {
                    // A repeated member: numbered, but found under its first number.
                } else {
                    collisions = true
                }
            } else {
                table.set(h, Int64(offsets.count - 1))
            }
            bytes.append(contentsOf: b)
            offsets.append(Int32(bytes.count))
        }
        self.bytes = bytes
        self.offsets = offsets
        self.table = table
        self.collisions = collisions
    }

    /// Number of members (repeated ones included).
    public var count: Int { offsets.count - 1 }

    /// The `Hash64` of some bytes, as the decoder computes `Event.eventNameHash` and `distinctIDHash`.
    public static func hash(_ b: [UInt8]) -> UInt64 {
        b.withByteView { $0.hash }
    }

    /// The number of the member equal to `b` (whose `Hash64` is `hash`), or nil.
    @inlinable
    public func index(of b: ByteView, hash: UInt64) -> Int? {
        guard let found = table.get(hash) else { return nil }
        if equals(Int(found), b) { return Int(found) }
        guard collisions else { return nil }
        for i in 0..<count where equals(i, b) { return i }
        return nil
    }

    /// The number of the member equal to `b`, or nil.
    @inlinable
    public func index(of b: ByteView) -> Int? {
        index(of: b, hash: b.hash)
    }

    /// The number of the member equal to `s`, or nil (configuration and tests).
    public func index(of s: String) -> Int? {
        s.withByteView { index(of: $0) }
    }

    /// The bytes of member `i`.
    @inlinable
    public func withMember<R>(_ i: Int, _ body: (ByteView) -> R) -> R {
        bytes.withByteView { body($0[Int(offsets[i]) ..< Int(offsets[i + 1])]) }
    }

    @inlinable
    func equals(_ i: Int, _ b: ByteView) -> Bool {
        withMember(i) { $0.equals(b) }
    }
}
