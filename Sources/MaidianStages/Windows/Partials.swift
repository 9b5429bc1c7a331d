import MaidianEvents

/// The partial aggregate of one source partition for one `metrics.counts` key and window, as it travels
/// through the internal topic (keyed by the output key) to the worker that merges that key.
struct PartialAggregate: Equatable {
    var sourcePartition: Int32
    var windowEnd: Int64
    /// The output record up to its counts: `{"metric":..,"rule":..,"window_start":..,"window_end":..,"dims":{..}`.
    var head: [UInt8]
    var count: Int64
    var users: UserSet
    var isDwell: Bool
    var sumMs: Int64
    var durations: DurationDigest
    /// The window size it belongs to: 0 for the stage's first size (`window`), else the size's length in ms.
    var size: Int64 = 0
}

/// Messages of the internal topic. Binary, little-endian, version byte first: only Maidian reads them.
enum InternalMessage: Equatable {
    case partial(PartialAggregate)
    /// Every partial of `source` for windows ending at or before `watermark` was written before this
    /// (`Int64.max`: the partition's input is finished). `idle`: the partition has had no input for the
    /// idle timeout and must not hold windows back.
    case progress(source: Int32, watermark: Int64, idle: Bool)

    static let version: UInt8 = 1

    func encode(into out: inout [UInt8]) {
        switch self {
        case .progress(let source, let watermark, let idle):
            out.append(Self.version)
            out.append(2)
            out.appendLE(source)
            out.appendLE(watermark)
            out.append(idle ? 1 : 0)
        case .partial(let p):
            p.head.withByteView {
                Self.encodePartial(sourcePartition: p.sourcePartition, windowEnd: p.windowEnd, head: $0, count: p.count,
                                   isDwell: p.isDwell, sumMs: p.sumMs, durations: p.durations, size: p.size, into: &out) { p.users.encode(into: &$0) }
            }
        }
    }

    /// A partial's encoding from its parts (the windows stage writes them without building a `PartialAggregate`);
    /// `users` writes the users part. `size`: 0 for the first window size, else the size's length in ms.
    static func encodePartial(sourcePartition: Int32, windowEnd: Int64, head: ByteView, count: Int64,
                              isDwell: Bool, sumMs: Int64, durations: DurationDigest, size: Int64 = 0, lateOffset: Int64? = nil,
                              into out: inout [UInt8], users: (inout [UInt8]) -> Void) {
        out.append(Self.version)
        // A late partial (type 3) is one record's contribution to a window already closed at the source,
        // named by that record's offset; a partial (type 1) is the source's whole window. Types 4 and 5 are the
        // same of a further window size, named after the offset by its length: the first size's partials are
        // written as before sizes existed, so a partials topic written before them is read the same.
        if let lateOffset {
            out.append(size == 0 ? 3 : 5)
            out.appendLE(lateOffset)
        } else {
            out.append(size == 0 ? 1 : 4)
        }
        if size != 0 { out.appendLE(size) }
        out.appendLE(sourcePartition)
        out.appendLE(windowEnd)
        out.appendLE(Int32(head.count))
        out.append(head)
        out.appendLE(count)
        users(&out)
        out.append(isDwell ? 1 : 0)
        if isDwell {
            out.appendLE(sumMs)
            if durations.bucketed {
                out.append(1)
                out.appendLE(Int32(durations.buckets.count))
                for b in durations.buckets.keys.sorted() {
                    out.appendLE(b)
                    out.appendLE(durations.buckets[b]!)
                }
            } else {
                out.append(0)
                out.appendLE(Int32(durations.values.count))
                for v in durations.values { out.appendLE(v) }
            }
        }
    }

    /// A bundle (type 6): several internal messages for one internal partition in one record, each with the
    /// key it would have had as a record of its own. A source partition's advance writes one per internal
    /// partition instead of one record per partial and a progress record per internal partition: over 32
    /// partitions that halves a worker's internal records (bench/README.md, session 11).
    static let bundleType: UInt8 = 6

    /// Whether `bytes` is a bundle (`bundleItems` reads it; anything else is one message).
    static func isBundle(_ bytes: [UInt8]) -> Bool { bytes.count >= 2 && bytes[0] == version && bytes[1] == bundleType }

    /// One message of a bundle: where its key (nil: it had none) and its value are in the bundle.
    struct BundleItem: Equatable {
        var key: Range<Int>?
        var value: Range<Int>
    }

    /// The messages of a bundle, checked whole before any is used (a bundle is taken or skipped as one):
    /// version, type 6, the item count, then per item the key's length (-1: none) and bytes, the value's
    /// length and bytes. An item is never a bundle itself.
    static func bundleItems(_ bytes: [UInt8]) throws -> [BundleItem] {
        var r = ByteReader(bytes: bytes)
        guard try r.u8() == version, try r.u8() == bundleType else { throw Malformed(description: "not an internal bundle") }
        let count = Int(try r.i32())
        // Each item takes at least 8 bytes: a count past that is a lie, not a reason to reserve memory.
        guard count >= 0, count <= (bytes.count - r.i) / 8 else { throw Malformed(description: "internal bundle with a count of \(count)") }
        var items: [BundleItem] = []
        items.reserveCapacity(count)
        for _ in 0..<count {
            let keyCount = Int(try r.i32())
            var key: Range<Int>?
            if keyCount >= 0 {
                let start = r.i
                try r.skip(keyCount)
                key = start..<r.i
            } else if keyCount != -1 {
                throw Malformed(description: "internal bundle item with a key length of \(keyCount)")
            }
            let valueCount = Int(try r.i32())
            let start = r.i
            try r.skip(valueCount)
            if valueCount >= 2 && bytes[start + 1] == bundleType { throw Malformed(description: "internal bundle inside a bundle") }
            items.append(BundleItem(key: key, value: start..<r.i))
        }
        guard r.i == bytes.count else { throw Malformed(description: "internal bundle with \(bytes.count - r.i) bytes after its items") }
        return items
    }

    /// The progress message at `range` of `bytes` (an item of a bundle), read in place; nil for anything else,
    /// a malformed progress message included (the caller's general path reports it). Accepts exactly what
    /// `layout` accepts as progress.
    static func progress(in bytes: [UInt8], _ range: Range<Int>) -> (source: Int32, watermark: Int64, idle: Bool)? {
        guard range.count >= 15, range.lowerBound >= 0, range.upperBound <= bytes.count,
              bytes[range.lowerBound] == version, bytes[range.lowerBound + 1] == 2 else { return nil }
        var r = ByteReader(bytes: bytes)
        r.i = range.lowerBound + 2
        guard let source = try? r.i32(), let watermark = try? r.i64(), let idle = try? r.u8() else { return nil }
        return (source, watermark, idle != 0)
    }

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    static func decode(_ bytes: [UInt8]) throws -> InternalMessage {
        switch try layout(bytes) {
        case .progress(let source, let watermark, let idle):
            return .progress(source: source, watermark: watermark, idle: idle)
        case .partial(let l):
            var users = UserSet()
            var exact = Set<UInt64>()
            try l.readUsers(bytes, sketch: { users = UserSet(exact: [], registers: $0.array) }, hash: { exact.insert($0) })
            if !users.isSketch { users = UserSet(exact: exact, registers: []) }
            let dwell = try l.readDwell(bytes)
            return .partial(PartialAggregate(
                sourcePartition: l.sourcePartition, windowEnd: l.windowEnd, head: Array(bytes[l.head]), count: l.count, users: users,
                isDwell: dwell != nil, sumMs: dwell?.sum ?? 0, durations: dwell?.durations ?? DurationDigest(), size: l.size))
        }
    }
}

extension InternalMessage {
    /// Where the parts of an encoded partial lie in its message, so that a merger can keep the message as it
    /// came (no copies, no sets) and read the parts when the window is written.
    struct PartialLayout {
        var sourcePartition: Int32
        var windowEnd: Int64
        /// A late partial's record offset; -1 for a whole-window partial.
        var lateOffset: Int64 = -1
        /// Its window size: 0 for the first size, else the size's length in ms.
        var size: Int64 = 0
        var head: Range<Int>
        var count: Int64
        /// The users part: a form byte, then registers or a count and the hashes.
        var users: Int
        /// The dwell byte.
        var dwell: Int
    }

    enum Layout {
        case partial(PartialLayout)
        case progress(source: Int32, watermark: Int64, idle: Bool)
    }

    /// Checks a whole message, as `decode` would, and says where its parts are, without copying anything.
    static func layout(_ bytes: [UInt8]) throws -> Layout {
        var r = ByteReader(bytes: bytes)
        guard try r.u8() == version else { throw Malformed(description: "unknown internal message version") }
        switch try r.u8() {
        case 2:
            return .progress(source: try r.i32(), watermark: try r.i64(), idle: try r.u8() != 0)
        case 1, 3, 4, 5:
            let type = r.bytes[r.i - 1]
            let lateOffset = type == 3 || type == 5 ? try r.i64() : -1
            let size = type >= 4 ? try r.i64() : 0
            if type >= 4 && size <= 0 { throw Malformed(description: "internal message with a window size of \(size)") }
            let source = try r.i32()
            let windowEnd = try r.i64()
            let headStart = r.i + 4
            try r.skip(Int(try r.i32()))
            let head = headStart..<r.i
            // Values a windows stage never writes are refused here, so that merging can trust the rest: no
            // negative count or sum, no register past a 64-bit hash's rank, no duration bucket past Int64's.
            let count = try r.i64()
            guard count >= 0 else { throw Malformed(description: "internal partial with a count of \(count)") }
            let users = r.i
            if try r.u8() == 1 {
                let registers = r.i
                try r.skip(UserSet.registerCount)
                for k in registers..<r.i where bytes[k] > UserSet.maxRank {
                    throw Malformed(description: "internal partial with a user register of \(bytes[k])")
                }
            } else {
                try r.skip(Int(try r.i32()), times: 8)
            }
            let dwell = r.i
            if try r.u8() != 0 {
                guard try r.i64() >= 0 else { throw Malformed(description: "internal partial with a negative duration sum") }
                // A count the remaining bytes cannot hold is refused before any loop (no negative range either).
                func entries(_ size: Int) throws -> Int {
                    let n = Int(try r.i32())
                    guard n >= 0, n <= (bytes.count - r.i) / size else { throw Malformed(description: "truncated internal message") }
                    return n
                }
                if try r.u8() == 1 {
                    for _ in 0..<(try entries(12)) {
                        let bucket = try r.i32(), n = try r.i64()
                        guard (-1...DurationDigest.maxBucket).contains(bucket), n >= 0 else {
                            throw Malformed(description: "internal partial with a duration bucket \(bucket) of \(n)")
                        }
                    }
                } else {
                    for _ in 0..<(try entries(8)) {
                        guard try r.i64() >= 0 else { throw Malformed(description: "internal partial with a negative duration") }
                    }
                }
            }
            return .partial(PartialLayout(sourcePartition: source, windowEnd: windowEnd, lateOffset: lateOffset, size: size, head: head, count: count, users: users, dwell: dwell))
        default:
            throw Malformed(description: "unknown internal message type")
        }
    }
}

extension InternalMessage.PartialLayout {
    /// Reads the users part of `message` (the partial this layout describes): `sketch` gets a sketch's
    /// registers, or `hash` each exact hash.
    func readUsers(_ message: [UInt8], sketch: (ByteView) -> Void, hash: (UInt64) -> Void) throws {
        var r = ByteReader(bytes: message)
        r.i = users
        if try r.u8() == 1 {
            try r.skip(UserSet.registerCount)
            message.withByteView { sketch($0[(r.i - UserSet.registerCount)..<r.i]) }
        } else {
            for _ in 0..<Int(try r.i32()) { hash(try r.u64()) }
        }
    }

    /// The dwell part of `message`: its sum and durations, or nil for a pv or click partial.
    func readDwell(_ message: [UInt8]) throws -> (sum: Int64, durations: DurationDigest)? {
        var r = ByteReader(bytes: message)
        r.i = dwell
        guard try r.u8() != 0 else { return nil }
        let sum = try r.i64()
        if try r.u8() == 1 {
            var buckets: [Int32: Int64] = [:]
            for _ in 0..<Int(try r.i32()) { buckets[try r.i32()] = try r.i64() }
            return (sum, DurationDigest(values: [], buckets: buckets, bucketed: true))
        }
        var values: [Int64] = []
        for _ in 0..<Int(try r.i32()) { values.append(try r.i64()) }
        return (sum, DurationDigest(values: values, buckets: [:], bucketed: false))
    }
}

struct ByteReader {
    let bytes: [UInt8]
    var i = 0

    mutating func u8() throws -> UInt8 {
        guard i < bytes.count else { throw InternalMessage.Malformed(description: "truncated internal message") }
        defer { i += 1 }
        return bytes[i]
    }

    mutating func u64() throws -> UInt64 {
        guard i + 8 <= bytes.count else { throw InternalMessage.Malformed(description: "truncated internal message") }
        var v: UInt64 = 0
        for k in 0..<8 { v |= UInt64(bytes[i + k]) << UInt64(8 * k) }
        i += 8
        return v
    }

    mutating func i64() throws -> Int64 { Int64(bitPattern: try u64()) }

    mutating func i32() throws -> Int32 {
        guard i + 4 <= bytes.count else { throw InternalMessage.Malformed(description: "truncated internal message") }
        var v: UInt32 = 0
        for k in 0..<4 { v |= UInt32(bytes[i + k]) << UInt32(8 * k) }
        i += 4
        return Int32(bitPattern: v)
    }

    /// Moves past `n` items of `times` bytes each.
    mutating func skip(_ n: Int, times: Int = 1) throws {
        guard n >= 0, n <= (bytes.count - i) / times else { throw InternalMessage.Malformed(description: "truncated internal message") }
        i += n * times
    }

    mutating func bytes(_ n: Int) throws -> [UInt8] {
        guard n >= 0, i + n <= bytes.count else { throw InternalMessage.Malformed(description: "truncated internal message") }
        defer { i += n }
        return Array(bytes[i..<i + n])
    }
}

extension UserSet {
    /// The users part of a partial: a sketch's registers, or the exact hashes sorted.
    func encode(into out: inout [UInt8]) {
        if isSketch {
            out.append(1)
            out.append(contentsOf: registers)
        } else {
            out.append(0)
            out.appendLE(Int32(exact.count))
            for h in exact.sorted() { out.appendLE(h) }
        }
    }
}

extension Array where Element == UInt8 {
    @inline(__always) mutating func appendLE(_ v: UInt64) { appendLittleEndian(v) }
    @inline(__always) mutating func appendLE(_ v: Int64) { appendLE(UInt64(bitPattern: v)) }
    @inline(__always) mutating func appendLE(_ v: Int32) { appendLittleEndian(UInt32(bitPattern: v)) }
}

/// Collects the internal messages of one advance of one source partition, per internal partition, and writes
/// each internal partition's as one record: the message itself when it is alone, else a bundle. Every message
/// of an advance belongs to one input record (the one its outputs are attributed to), so a bundle does too.
/// A bundle stays under the producer's message limit and `maxBundleBytes`: a message that would take it past
/// either first writes out what is collected.
struct InternalBundler {
    /// Per internal partition: the collected items, encoded as in a bundle.
    private var staged: [[UInt8]] = []
    private var counts: [Int32] = []
    /// Internal partitions with items, in the order they got their first.
    private var touched: [Int32] = []
    private var record: Int32 = 0
    private var pending = false

    /// Large enough that a window's partials for one internal partition fit; small enough that a merger's
    /// fetches and the broker's batches stay ordinary.
    static let maxBundleBytes = 512 * 1024

    /// Adds one message for internal partition `partition` on behalf of input record `record`: `key` (nil: none)
    /// and the value `value` writes. Writes out what is collected when the record changes or a limit is near.
    mutating func add(partition: Int32, record: Int32, key: ByteView?, output: inout OutputBuffer, topic: Int32,
                      value: (inout [UInt8]) -> Void) {
        if pending && record != self.record { flush(output: &output, topic: topic) }
        self.record = record
        pending = true
        let q = Int(partition)
        if staged.count <= q {
            staged.append(contentsOf: repeatElement([], count: q + 1 - staged.count))
            counts.append(contentsOf: repeatElement(0, count: q + 1 - counts.count))
        }
        let start = staged[q].count
        if let key {
            staged[q].appendLE(Int32(key.count))
            staged[q].append(key)
        } else {
            staged[q].appendLE(Int32(-1))
        }
        let lengthAt = staged[q].count
        staged[q].appendLE(Int32(0))
        value(&staged[q])
        let length = UInt32(staged[q].count - lengthAt - 4)
        for k in 0..<4 { staged[q][lengthAt + k] = UInt8(truncatingIfNeeded: length >> UInt32(8 * k)) }
        if counts[q] == 0 { touched.append(partition) }
        counts[q] += 1
        // Past a limit with the new item: what came before it goes out alone, the item starts the next bundle.
        let limit = min(Self.maxBundleBytes, output.maxMessageBytes)
        if counts[q] > 1 && staged[q].count + 6 > limit {
            let item = Array(staged[q][start...])
            staged[q].removeSubrange(start...)
            counts[q] -= 1
            write(q, output: &output, topic: topic)
            staged[q] = item
            counts[q] = 1
        }
    }

    /// Writes every collected item out (one record per internal partition) and forgets them.
    mutating func flush(output: inout OutputBuffer, topic: Int32) {
        guard pending else { return }
        for q in touched where counts[Int(q)] > 0 { write(Int(q), output: &output, topic: topic) }
        touched.removeAll(keepingCapacity: true)
        pending = false
    }

    private mutating func write(_ q: Int, output: inout OutputBuffer, topic: Int32) {
        let keyStart = output.begin()
        if counts[q] == 1 {
            // Alone: the message as it would be without bundles (older mergers read it, and it is smaller).
            // Staged here, so it reads: `bundleItems`' layout without the bundle's header.
            var r = ByteReader(bytes: staged[q])
            let keyCount = Int(try! r.i32())
            if keyCount >= 0 { output.bytes.append(bytesOf: staged[q], 4 ..< 4 + keyCount) }
            let hasKey = keyCount >= 0
            let valueStart = output.bytes.count
            output.bytes.append(bytesOf: staged[q], (4 + max(keyCount, 0) + 4) ..< staged[q].count)
            output.finish(topic: topic, record: record, keyStart: keyStart, valueStart: valueStart, hasKey: hasKey, partition: Int32(q))
        } else {
            let valueStart = output.bytes.count
            output.bytes.append(InternalMessage.version)
            output.bytes.append(InternalMessage.bundleType)
            output.bytes.appendLE(counts[q])
            output.bytes.append(contentsOf: staged[q])
            output.finish(topic: topic, record: record, keyStart: keyStart, valueStart: valueStart, hasKey: false, partition: Int32(q))
        }
        staged[q].removeAll(keepingCapacity: true)
        counts[q] = 0
    }
}
