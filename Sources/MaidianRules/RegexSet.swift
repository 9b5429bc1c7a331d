import CHyperscan
import MaidianEvents
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `identifier_regex` patterns compiled together into one Hyperscan database: one pass over an element
/// identifier reports every pattern that matches it, however many there are.
///
/// The dialect is Hyperscan's (PCRE syntax without back-references or lookaround), searched anywhere in
/// the bytes (anchor with `^`/`$`), `.` matching any byte including newline, case-sensitive, byte-oriented
/// (no UTF-8 mode). The loader compiles each pattern alone with the same flags, so whatever loads also scans.
public final class RegexSet: Sendable {
    /// A pattern Hyperscan rejected.
    public struct CompileError: Error, Sendable, CustomStringConvertible {
        /// Hyperscan's message.
        public var message: String
        /// Which pattern (index into the list compiled), when Hyperscan names one.
        public var index: Int?
        /// The message.
        public var description: String { message }
    }

    /// The flags every pattern is compiled with: `.` matches newline, each pattern is reported once per
    /// scan, and patterns that can match the empty string (`.*`) are allowed, as they were with POSIX regexes.
    static let flags = UInt32(HS_FLAG_DOTALL | HS_FLAG_SINGLEMATCH | HS_FLAG_ALLOWEMPTY)

    /// The patterns as written.
    public let patterns: [String]
    private let database: HyperscanDatabase?
    /// The scratch space scans use; a concurrent second scan clones its own (Hyperscan needs one per scan in flight).
    private let scratch: ScanScratch?
    private let scratchBusy = Atomic<Bool>(false)

    /// Compiles `patterns` into one database (an empty list scans nothing). `cacheSlots` (rounded up to a power
    /// of two; 0: none) bounds a cache of scan results by scanned text: identifiers repeat, since the same
    /// elements are clicked over and over, and a look-up costs a fraction of a scan of many patterns.
    public init(_ patterns: [String], cacheSlots: Int = 4096) throws {
        self.patterns = patterns
        guard !patterns.isEmpty else {
            database = nil
            scratch = nil
            return
        }
        let db = try HyperscanDatabase(patterns)
        database = db
        scratch = try ScanScratch(database: db, capacity: patterns.count, cacheSlots: cacheSlots)
    }

    /// Compiles one pattern alone with the flags a set uses (the loader's check); throws what Hyperscan says.
    public static func check(_ pattern: String) throws {
        _ = try HyperscanDatabase([pattern])
    }

    /// The number of patterns.
    public var count: Int { patterns.count }

    /// Calls `body` with the index of every pattern that matches `bytes`, in no particular order.
    func forEachMatch(_ bytes: UnsafeRawBufferPointer, _ body: (Int) -> Void) {
        guard let database, let scratch else { return }
        if scratchBusy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {
            scratch.scan(database, bytes, body)
            scratchBusy.store(false, ordering: .releasing)
        } else {
            // Another thread holds the shared scratch (and its cache): scan with a private copy. Cloning fails only
            // when memory is exhausted; skipping the scan would silently lose matches.
            do {
                try ScanScratch(cloning: scratch).scan(database, bytes, body)
            } catch {
                fatalError("\(error)")
            }
        }
    }

    /// The indices of the patterns that match `text`, ascending.
    public func matching(_ text: String) -> [Int] {
        var out: [Int] = []
        var text = text
        text.withUTF8 { u in forEachMatch(UnsafeRawBufferPointer(u)) { out.append($0) } }
        return out.sorted()
    }

    /// Whether any pattern matches `text`.
    public func matches(_ text: String) -> Bool { !matching(text).isEmpty }
}

/// A compiled Hyperscan database. Immutable once compiled: Hyperscan allows any number of concurrent scans of
/// one database (each with its own scratch), which is what makes sharing it across threads safe.
final class HyperscanDatabase: @unchecked Sendable {
    let raw: OpaquePointer

    init(_ patterns: [String]) throws {
        for (i, p) in patterns.enumerated() where p.utf8.contains(0) {
            throw RegexSet.CompileError(message: "a NUL byte in the pattern (write \\x00)", index: i)
        }
        var cStrings = patterns.map { strdup($0) }
        defer { cStrings.forEach { free($0) } }
        let flags = [UInt32](repeating: RegexSet.flags, count: patterns.count)
        let ids = (0..<patterns.count).map { UInt32($0) }
        var db: OpaquePointer?
        var error: UnsafeMutablePointer<hs_compile_error_t>?
        let rc = cStrings.withUnsafeMutableBufferPointer { exprs in
            exprs.withMemoryRebound(to: UnsafePointer<CChar>?.self) { e in
                hs_compile_multi(e.baseAddress, flags, ids, UInt32(patterns.count), UInt32(HS_MODE_BLOCK), nil, &db, &error)
            }
        }
        guard rc == HS_SUCCESS, let db else {
            let message = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "hyperscan error \(rc)"
            let index = error.map { Int($0.pointee.expression) }.flatMap { $0 >= 0 ? $0 : nil }
            hs_free_compile_error(error)
            throw RegexSet.CompileError(message: message, index: index)
        }
        raw = db
    }

    deinit { hs_free_database(raw) }
}

/// Hyperscan scratch space, the buffer the match callback fills, and a direct-mapped cache of results by
/// scanned text (verified byte for byte). Used by one scan at a time: `RegexSet` hands its shared one out under
/// an atomic busy flag and clones a private one, without cache, when that is taken.
final class ScanScratch: @unchecked Sendable {
    private let raw: OpaquePointer
    /// Matched pattern indices of the scan in progress (at most one per pattern: single-match mode).
    fileprivate let ids: UnsafeMutablePointer<Int32>
    fileprivate var count = 0
    fileprivate let capacity: Int

    /// One cached scan: the text and the patterns that matched it.
    private struct Entry {
        var key: UInt64 = 0
        var text: UnsafeMutablePointer<UInt8>?
        var textCount = 0
        var ids: UnsafeMutablePointer<Int32>?
        var idCount = 0
    }
    private let entries: UnsafeMutablePointer<Entry>
    /// Slots - 1 (slots is a power of two), or -1 without a cache.
    private let mask: Int
    /// Longer texts are scanned every time.
    private static let longestCached = 1024

    init(database: HyperscanDatabase, capacity: Int, cacheSlots: Int) throws {
        var s: OpaquePointer?
        let rc = hs_alloc_scratch(database.raw, &s)
        guard rc == HS_SUCCESS, let s else { throw RegexSet.CompileError(message: "hyperscan scratch allocation failed (\(rc))") }
        raw = s
        self.capacity = capacity
        ids = .allocate(capacity: capacity)
        var slots = cacheSlots > 0 ? 1 : 0
        while slots > 0 && slots < cacheSlots { slots <<= 1 }
        mask = slots - 1
        entries = .allocate(capacity: max(slots, 1))
        entries.initialize(repeating: Entry(), count: max(slots, 1))
    }

    init(cloning other: ScanScratch) throws {
        var s: OpaquePointer?
        let rc = hs_clone_scratch(other.raw, &s)
        guard rc == HS_SUCCESS, let s else { throw RegexSet.CompileError(message: "hyperscan scratch clone failed (\(rc))") }
        raw = s
        capacity = other.capacity
        ids = .allocate(capacity: capacity)
        mask = -1
        entries = .allocate(capacity: 1)
        entries.initialize(to: Entry())
    }

    deinit {
        hs_free_scratch(raw)
        ids.deallocate()
        for k in 0...max(mask, 0) {
            entries[k].text?.deallocate()
            entries[k].ids?.deallocate()
        }
        entries.deallocate()
    }

    func scan(_ database: HyperscanDatabase, _ bytes: UnsafeRawBufferPointer, _ body: (Int) -> Void) {
        let n = bytes.count
        var entry: UnsafeMutablePointer<Entry>?
        var key: UInt64 = 0
        if mask >= 0, n <= Self.longestCached, let p = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) {
            var h = Hash64()
            h.addSampled(p, n)
            key = h.value | 1
            let e = entries + (Int(truncatingIfNeeded: key >> 20) & mask)
            if e.pointee.key == key && e.pointee.textCount == n && Bytes.equal(e.pointee.text!, p, n) {
                for k in 0..<e.pointee.idCount { body(Int(e.pointee.ids![k])) }
                return
            }
            entry = e
        }
        count = 0
        let context = Unmanaged.passUnretained(self).toOpaque()
        if let base = bytes.baseAddress {
            _ = hs_scan(database.raw, base.assumingMemoryBound(to: CChar.self), UInt32(clamping: n), 0, raw, onMatch, context)
        } else {
            var empty: CChar = 0
            _ = hs_scan(database.raw, &empty, 0, 0, raw, onMatch, context)
        }
        if let e = entry, let p = bytes.baseAddress {
            e.pointee.text?.deallocate()
            e.pointee.ids?.deallocate()
            let text = UnsafeMutablePointer<UInt8>.allocate(capacity: max(n, 1))
            text.initialize(from: p.assumingMemoryBound(to: UInt8.self), count: n)
            let found = UnsafeMutablePointer<Int32>.allocate(capacity: max(count, 1))
            found.initialize(from: ids, count: count)
            e.pointee = Entry(key: key, text: text, textCount: n, ids: found, idCount: count)
        }
        for k in 0..<count { body(Int(ids[k])) }
    }
}

/// Hyperscan's `match_event_handler`: records the pattern id (each at most once per scan) and continues.
private func onMatch(_ id: UInt32, _ from: UInt64, _ to: UInt64, _ flags: UInt32, _ context: UnsafeMutableRawPointer?) -> Int32 {
    let s = Unmanaged<ScanScratch>.fromOpaque(context!).takeUnretainedValue()
    if s.count < s.capacity {
        s.ids[s.count] = Int32(bitPattern: id)
        s.count += 1
    }
    return 0
}
