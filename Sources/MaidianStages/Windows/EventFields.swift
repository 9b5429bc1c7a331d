// The windows stage's side of reading events: its string interner and partition hash. The readers of event
// fields (`BatchView`, its texts, `PropertyFinder`) are in the access layer, MaidianEvents.
import MaidianEvents

/// Strings stored once and referred to by number (pages, element identifiers, rule lists, dims): one
/// Hash64 and one open-addressing probe per lookup, bytes compared only on a hash hit.
struct Interner {
    private var storage: [UInt8] = []
    private var spans: [(start: Int, count: Int)] = []
    private var table = HashTable64(capacity: 256)

    var count: Int { spans.count }

    mutating func intern(_ bytes: [UInt8]) -> Int32 {
        bytes.withByteView { intern($0) }
    }

    @inline(__always)
    mutating func intern(_ bytes: ByteView) -> Int32 {
        var h = bytes.hash
        while let v = table.get(h) {
            if equal(Int(v), bytes) { return Int32(v) }
            h = h &* 0x9E37_79B9_7F4A_7C15 &+ 1  // a 64-bit collision: probe on
        }
        let i = spans.count
        spans.append((storage.count, bytes.count))
        bytes.append(to: &storage)
        table.set(h, Int64(i))
        return Int32(i)
    }

    @inline(__always)
    private func equal(_ i: Int, _ bytes: ByteView) -> Bool {
        let s = spans[i]
        guard s.count == bytes.count else { return false }
        if s.count == 0 { return true }
        return storage.withByteView { $0[s.start ..< (s.start + s.count)].equals(bytes) }
    }

    subscript(_ i: Int32) -> ArraySlice<UInt8> {
        let s = spans[Int(i)]
        return storage[s.start..<(s.start + s.count)]
    }

    /// The texts `keep` marks (by number) in a new interner, numbered in their old order, and each old number's
    /// new one (-1 for a text left out).
    func compacted(keeping keep: [Bool]) -> (interner: Interner, numbers: [Int32]) {
        var new = Interner()
        var numbers = [Int32](repeating: -1, count: count)
        for i in 0..<count where i < keep.count && keep[i] {
            numbers[i] = new.intern(Array(self[Int32(i)]))
        }
        return (new, numbers)
    }
}

/// The numbers of the last two texts interned through it, remembered by their bytes as stored: equal stored
/// bytes are equal texts, and comparing a repeated text costs less than hashing it (clicks share few long
/// element paths).
struct RecentTexts {
    private var bytes0: [UInt8] = []
    private var bytes1: [UInt8] = []
    /// The numbers of `bytes0` and `bytes1`; -1: none yet.
    private var numbers: (Int32, Int32) = (-1, -1)

    /// `t`'s number in `interner` (interned, decoded, when it is neither of the last two).
    @inline(__always)
    mutating func number(of t: BatchView.Text, in interner: inout Interner) -> Int32 {
        let raw = t.raw
        if numbers.0 >= 0 && raw.equals(bytes0) { return numbers.0 }
        if numbers.1 >= 0 && raw.equals(bytes1) {
            swap(&bytes0, &bytes1)
            numbers = (numbers.1, numbers.0)
            return numbers.0
        }
        let n = t.withDecoded { interner.intern($0) }
        // The older one makes room (its array's storage is reused).
        swap(&bytes0, &bytes1)
        bytes0.removeAll(keepingCapacity: true)
        raw.append(to: &bytes0)
        numbers = (n, numbers.0)
        return n
    }

    /// Forgets the texts remembered (their interner was replaced).
    mutating func forget() {
        numbers = (-1, -1)
    }
}
