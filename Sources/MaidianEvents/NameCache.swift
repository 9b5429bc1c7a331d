/// Remembers, per distinct property name, whether it is a valid SPEC name and which `KnownProperty` it is.
///
/// The same few dozen names repeat in every event; checking each byte of each name against a class table
/// and comparing it with the known names cost more than the rest of the scan. A direct-mapped cache keyed
/// by the name's bytes (compared in full, so a hit is exact) answers with three word loads.
final class NameCache {
    private struct Entry {
        var length: Int = -1
        var w0: UInt64 = 0, w1: UInt64 = 0, w2: UInt64 = 0, w3: UInt64 = 0
        var valid = false
        var bit: UInt64 = 0
    }

    private static let slots = 512
    private let entries: UnsafeMutablePointer<Entry>

    init() {
        entries = .allocate(capacity: NameCache.slots)
        entries.initialize(repeating: Entry(), count: NameCache.slots)
    }

    deinit {
        entries.deinitialize(count: NameCache.slots)
        entries.deallocate()
    }

    /// Word `k` of the name at `p[start..<start+n]`, zero-padded. Reads at most 8 bytes from any position
    /// before `start + n`, which the JSON arena's padding makes safe.
    @inline(__always)
    private static func word(_ p: UnsafePointer<UInt8>, _ start: Int, _ n: Int, _ k: Int) -> UInt64 {
        let off = k &* 8
        if off >= n { return 0 }
        let w = UnsafeRawPointer(p + (start &+ off)).loadUnaligned(as: UInt64.self)
        let left = n &- off
        return left >= 8 ? w : w & ((1 << UInt64(left &* 8)) &- 1)
    }

    /// Validity and known-property bit of the unescaped name `p[start..<end]`.
    @inline(__always)
    func lookup(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int, _ names: KnownNameTable.View) -> (valid: Bool, bit: UInt64) {
        let n = end &- start
        if n > 32 { return (isValidName(p, start, end), 0) }
        let w0 = NameCache.word(p, start, n, 0), w1 = NameCache.word(p, start, n, 1)
        let w2 = NameCache.word(p, start, n, 2), w3 = NameCache.word(p, start, n, 3)
        var h = (w0 ^ (w1 &* 0x9E37_79B9_7F4A_7C15) ^ (w2 &* 0xC2B2_AE3D_27D4_EB4F) ^ (w3 &* 0x1656_67B1_9E37_79F9)) &+ UInt64(n)
        h = (h ^ (h >> 29)) &* 0xBF58_476D_1CE4_E5B9
        let slot = entries + Int(truncatingIfNeeded: (h >> 40) & UInt64(NameCache.slots - 1))
        if slot.pointee.length == n && slot.pointee.w0 == w0 && slot.pointee.w1 == w1 && slot.pointee.w2 == w2 && slot.pointee.w3 == w3 {
            return (slot.pointee.valid, slot.pointee.bit)
        }
        let valid = isValidName(p, start, end)
        let bit = names.classify(p, start, end)
        slot.pointee = Entry(length: n, w0: w0, w1: w1, w2: w2, w3: w3, valid: valid, bit: bit)
        return (valid, bit)
    }
}
