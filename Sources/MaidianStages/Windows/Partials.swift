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
            let count = try r.i64()
            let users = r.i
            if try r.u8() == 1 {
                try r.skip(UserSet.registerCount)
            } else {
                try r.skip(Int(try r.i32()), times: 8)
            }
            let dwell = r.i
            if try r.u8() != 0 {
                _ = try r.i64()
                if try r.u8() == 1 {
                    try r.skip(Int(try r.i32()), times: 12)
                } else {
                    try r.skip(Int(try r.i32()), times: 8)
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
