/// The scanner's memory of object keys: per distinct key, whether it is a valid name (wire format §2), which
/// `KnownProperty` or top-level field it is, and which key followed it last time.
///
/// Every event of an upload carries the same few dozen keys in the same order. Scanning is a chain of
/// data-dependent steps (where one string ends decides where the next starts), so it is bound by latency;
/// the cache turns the common case into a prediction checked by comparing words: the key is the one that
/// followed the previous key last time when the bytes at the current position are exactly `"name":`. No scan,
/// no hashing, and the position after the colon is known before the comparison finishes. A failed check falls
/// back to the full scan and a hashed lookup, so results never depend on the cache; only plain keys (no
/// escapes) that scanned cleanly are cached.
///
/// Long values repeat too (the `lib` object, element paths within an upload): each key remembers its last
/// value of `memoMin...memoMax` bytes, and a value with the same bytes, followed by `,` or `}`, is taken
/// without a scan. Short values are not worth it: scanning them costs less than a wrong guess.
final class NameCache {
    /// A key: its token `"name":` as words to compare with (length, first and last 8 bytes, bytes 8..<24 for
    /// tokens over 16 bytes, each masked to the token), and what is known about the name.
    struct Token {
        /// Token length (name length + 3); 0 never matches.
        var length: Int = 0
        var first: UInt64 = 0, last: UInt64 = 0
        var firstMask: UInt64 = 0, lastMask: UInt64 = 0
        var middle0: UInt64 = 0, middle1: UInt64 = 0
        var middleMask1: UInt64 = 0
        /// A valid name (wire format §2); its `KnownProperty` bit (or 0); the top-level field it names.
        var valid = false
        var field = TopField.other
        var bit: UInt64 = 0
    }

    struct Entry {
        /// This slot's key (`length` 0 for an empty slot or a pseudo entry).
        var token = Token()
        /// The keys that followed this one the last two times they differed: slots and copies of their
        /// tokens, so that checking the next key does not first have to load where that key's entry is.
        /// Valid while `nextEpoch` is the cache's `epoch`.
        var next: Int32 = 0
        var otherNext: Int32 = 0
        var nextEpoch = 0
        var nextToken = Token()
        var otherNextToken = Token()
        /// Length of the remembered value (0: none); its last 8 bytes; what scanning it found. The other
        /// bytes are in `memo`.
        var memoLength: Int = 0
        var memoLast: UInt64 = 0
        var memoKind = ValueKind.null
        var memoEscaped = false
        var memoNonString = false
        var memoDecodedLength: Int32 = 0
    }

    /// Duplicate member names (wire format §2, `duplicate_key`), found through the slots: `object` numbers the
    /// object being scanned; `duplicate` says a key was seen twice in it; `unsure` says the slots cannot tell
    /// (a key without a slot, or a slot of this object reused for another key), and an exact check must.
    /// Unchecked exclusivity: one decoder on one thread.
    @exclusivity(unchecked) var object = 0
    @exclusivity(unchecked) var duplicate = false
    @exclusivity(unchecked) var unsure = false

    /// Per slot, the object (`object`) its key was last seen in: a second sighting in the same object is a
    /// duplicate member name. 0 for a new key, so a slot reused within an object is not taken for one. Apart
    /// from the entries so that it stays in the L1 cache (4 KiB).
    private let seenIn: UnsafeMutablePointer<Int>

    /// Starts a new object for the duplicate check.
    @inline(__always) func beginObject() {
        object &+= 1
        duplicate = false
        unsure = false
    }

    /// Notes key `slot` of the current object.
    @inline(__always) func see(_ slot: Int32) {
        if slot == NameCache.none { unsure = true; return }
        let e = seenIn + Int(slot)
        if e.pointee == object { duplicate = true }
        e.pointee = object
    }

    /// Slot 0 never matches (escaped and very long keys use it); slot 1 is the head of every object: its
    /// `next` is the usual first key.
    static let none: Int32 = 0
    static let head: Int32 = 1
    /// Longest cached name; the arena padding covers reading `maxName + 3` bytes from a key's quote.
    static let maxName = 29
    static let memoMin = 24
    static let memoMax = 128
    private static let slots = 512
    private static let firstSlot = 2
    let entries: UnsafeMutablePointer<Entry>
    /// `memoMax / 8` words per slot.
    private let memo: UnsafeMutablePointer<UInt64>

    init() {
        entries = .allocate(capacity: NameCache.slots)
        entries.initialize(repeating: Entry(), count: NameCache.slots)
        memo = .allocate(capacity: NameCache.slots * NameCache.memoMax / 8)
        memo.initialize(repeating: 0, count: NameCache.slots * NameCache.memoMax / 8)
        seenIn = .allocate(capacity: NameCache.slots)
        seenIn.initialize(repeating: 0, count: NameCache.slots)
    }

    deinit {
        entries.deinitialize(count: NameCache.slots)
        entries.deallocate()
        memo.deallocate()
        seenIn.deallocate()
    }

    @inline(__always) static func load(_ p: UnsafePointer<UInt8>, _ at: Int) -> UInt64 {
        UnsafeRawPointer(p + at).loadUnaligned(as: UInt64.self)
    }

    /// A mask of the low `n` bytes of a word (none for `n <= 0`, all for `n >= 8`).
    @inline(__always) static func lowBytes(_ n: Int) -> UInt64 {
        n >= 8 ? ~0 : (n <= 0 ? 0 : (1 << UInt64(truncatingIfNeeded: n &* 8)) &- 1)
    }

    /// Whether `p[at...]` is `token`, within `end`: then the token length, else 0.
    @inline(__always)
    static func match(_ token: Token, _ p: UnsafePointer<UInt8>, _ at: Int, _ end: Int) -> Int {
        let t = token.length
        // Both loads stay inside the token or the arena padding: `at + t <= end` is checked with them.
        let firstOK = load(p, at) & token.firstMask == token.first
        let lastOK = load(p, at &+ Swift.max(t &- 8, 0)) & token.lastMask == token.last
        guard firstOK && lastOK && t > 0 && at &+ t <= end else { return 0 }
        if t <= 16 { return t }
        let middleOK = load(p, at &+ 8) == token.middle0 && load(p, at &+ 16) & token.middleMask1 == token.middle1
        return middleOK ? t : 0
    }

    /// Bumped when a slot is reused for another key: every copied `nextToken` is then stale. Unchecked
    /// exclusivity: read once per key on one thread, never during a write.
    @exclusivity(unchecked) private(set) var epoch = 0

    /// The key predicted after `prev` when `p[at...]` is its token: its slot and (a copy of) its token; else
    /// slot `none` and a token of length 0. The second guess is only tried when the first fails.
    @inline(__always)
    func predict(after prev: Int32, _ p: UnsafePointer<UInt8>, _ at: Int, _ end: Int) -> (slot: Int32, token: Token) {
        let e = entries + Int(prev)
        guard e.pointee.nextEpoch == epoch else { return (NameCache.none, Token()) }
        if NameCache.match(e.pointee.nextToken, p, at, end) > 0 { return (e.pointee.next, e.pointee.nextToken) }
        if NameCache.match(e.pointee.otherNextToken, p, at, end) > 0 { return (e.pointee.otherNext, e.pointee.otherNextToken) }
        return (NameCache.none, Token())
    }

    /// Remembers that `slot` followed `prev` (neither prediction was right): the first guess becomes the
    /// second.
    @inline(__always)
    func link(_ prev: Int32, _ slot: Int32) {
        let e = entries + Int(prev)
        if e.pointee.nextEpoch == epoch {
            e.pointee.otherNext = e.pointee.next
            e.pointee.otherNextToken = e.pointee.nextToken
        } else {
            e.pointee.otherNext = NameCache.none
            e.pointee.otherNextToken = Token()
        }
        e.pointee.next = slot
        e.pointee.nextToken = entries[Int(slot)].token
        e.pointee.nextEpoch = epoch
    }

    /// The slot of the plain (unescaped) name `p[start..<end]`, filling it on a miss; `none` for names over
    /// `maxName` bytes or without `":` right after the closing quote (then they are never predicted).
    @inline(__always)
    func lookup(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int, _ names: KnownNameTable.View) -> Int32 {
        let n = end &- start
        if n > NameCache.maxName { return NameCache.none }
        let at = start &- 1
        let t = n &+ 3
        let first = NameCache.load(p, at) & NameCache.lowBytes(t)
        let last = t > 8 ? NameCache.load(p, at &+ t &- 8) : 0
        var h = (first &* 0x9E37_79B9_7F4A_7C15) ^ (last &* 0xC2B2_AE3D_27D4_EB4F) ^ UInt64(truncatingIfNeeded: n)
        h ^= h >> 29
        let home = NameCache.firstSlot &+ Int(truncatingIfNeeded: (h >> 20) % UInt64(NameCache.slots &- NameCache.firstSlot))
        // Up to four neighbouring slots; past them the home slot is reused (the cache only ever speeds up).
        var slot = home
        for _ in 0..<4 {
            if entries[slot].token.length == 0 { return fill(slot, p, start, end, names) }
            if NameCache.match(entries[slot].token, p, at, end &+ 2) != 0 { return Int32(slot) }
            slot = slot &+ 1 == NameCache.slots ? NameCache.firstSlot : slot &+ 1
        }
        return fill(home, p, start, end, names)
    }

    @inline(never)
    private func fill(_ slot: Int, _ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int, _ names: KnownNameTable.View) -> Int32 {
        // Only a key written `"name":` can be predicted (the token includes the colon).
        guard p[end] == 0x22 && p[end &+ 1] == 0x3A else { return NameCache.none }
        let n = end &- start
        let at = start &- 1
        var e = Entry()
        let t = n &+ 3
        e.token.length = t
        e.token.firstMask = NameCache.lowBytes(t)
        e.token.first = NameCache.load(p, at) & e.token.firstMask
        if t > 8 {
            e.token.lastMask = ~0
            e.token.last = NameCache.load(p, at &+ t &- 8)
        }
        if t > 16 {
            e.token.middle0 = NameCache.load(p, at &+ 8)
            e.token.middleMask1 = NameCache.lowBytes(t &- 16)
            e.token.middle1 = NameCache.load(p, at &+ 16) & e.token.middleMask1
        }
        e.token.valid = isValidName(p, start, end)
        e.token.bit = names.classify(p, start, end)
        e.token.field = TopField.classify(p, start, end)
        if entries[slot].token.length != 0 { epoch &+= 1 }
        // The key that had this slot may come again in this object: the slots alone cannot tell then.
        if seenIn[slot] == object { unsure = true }
        seenIn[slot] = 0
        entries[slot] = e  // a new key: also forgets the old key's successor and value
        return Int32(slot)
    }

    /// Whether the value at `p[at...]` has the bytes of `slot`'s remembered value and is followed by `,` or
    /// `}` before `end`: then its length, else 0.
    @inline(__always)
    func memoMatch(_ slot: Int32, _ p: UnsafePointer<UInt8>, _ at: Int, _ end: Int) -> Int {
        let e = entries + Int(slot)
        let n = e.pointee.memoLength
        guard n > 0 && at &+ n < end else { return 0 }
        let t = p[at &+ n]
        guard (t == 0x2C || t == 0x7D) && NameCache.load(p, at &+ n &- 8) == e.pointee.memoLast else { return 0 }
        let words = memo + Int(slot) &* (NameCache.memoMax / 8)
        var i = 0
        while i &+ 8 <= n {
            if NameCache.load(p, at &+ i) != words[i >> 3] { return 0 }
            i &+= 8
        }
        return n
    }

    /// Remembers the scanned value `p[start..<end]` of `slot` (when its length is in `memoMin...memoMax`).
    @inline(never)
    func remember(_ slot: Int32, _ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int,
                  _ kind: ValueKind, escaped: Bool, nonString: Bool, decodedLength: Int) {
        let n = end &- start
        guard n >= NameCache.memoMin && n <= NameCache.memoMax && slot != NameCache.none else { return }
        let e = entries + Int(slot)
        let words = memo + Int(slot) &* (NameCache.memoMax / 8)
        var i = 0
        while i &+ 8 <= n {
            words[i >> 3] = NameCache.load(p, start &+ i)
            i &+= 8
        }
        e.pointee.memoLength = n
        e.pointee.memoLast = NameCache.load(p, end &- 8)
        e.pointee.memoKind = kind
        e.pointee.memoEscaped = escaped
        e.pointee.memoNonString = nonString
        e.pointee.memoDecodedLength = Int32(truncatingIfNeeded: decodedLength)
    }
}
