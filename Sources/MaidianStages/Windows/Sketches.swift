#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Distinct users of one aggregate: exact (64-bit hashes of `distinct_id`) up to `exactLimit`, then a
/// HyperLogLog of 2^14 registers (standard error 0.81%). Both forms merge, so partial aggregates of
/// different partitions and workers combine into the same answer in any order.
public struct UserSet: Sendable, Equatable {
    /// Above this many distinct users a set becomes a sketch (wire format §5: exact below 1,000).
    public static let exactLimit = 1000
    static let precision = 14
    static let registerCount = 1 << precision
    /// The largest register value `add` writes (a rank of the hash's remaining bits).
    static let maxRank = UInt8(64 - precision + 1)

    /// The users' hashes while the set is exact; emptied when it becomes a sketch.
    public private(set) var exact: Set<UInt64> = []
    /// Empty until the set turns into a sketch.
    public private(set) var registers: [UInt8] = []

    /// An empty, exact set.
    public init() {}

    /// Whether the set has become a HyperLogLog (its count is then an estimate).
    public var isSketch: Bool { !registers.isEmpty }

    /// Adds a user by the hash of its `distinct_id`; past `exactLimit` users the set becomes a sketch.
    @inline(__always)
    public mutating func insert(_ hash: UInt64) {
        if isSketch { Self.add(hash, to: &registers); return }
        exact.insert(hash)
        if exact.count > Self.exactLimit { toSketch() }
    }

    /// The union with `other`.
    public mutating func merge(_ other: UserSet) {
        if other.isSketch {
            if !isSketch { toSketch() }
            for i in 0..<Self.registerCount where other.registers[i] > registers[i] { registers[i] = other.registers[i] }
        } else {
            for h in other.exact { insert(h) }
        }
    }

    /// Replaces the set by a sketch of the same hashes.
    public mutating func toSketch() {
        if isSketch { return }
        registers = [UInt8](repeating: 0, count: Self.registerCount)
        for h in exact { Self.add(h, to: &registers) }
        exact = []
    }

    /// Exact count, or the sketch's estimate: Ertl's improved HyperLogLog estimator ("New cardinality
    /// estimation algorithms for HyperLogLog sketches", 2017), unbiased over the whole range without tables.
    /// (The classic raw estimate with a switch to linear counting at 2.5 m is off by more than 2% around
    /// 40,000 users.)
    public var count: Int {
        guard isSketch else { return exact.count }
        return Self.estimate(registers)
    }

    /// The estimate of a sketch's registers (see `count`).
    static func estimate(_ registers: [UInt8]) -> Int {
        let q = 64 - Self.precision
        var histogram = [Int](repeating: 0, count: q + 2)
        for r in registers { histogram[Int(r)] += 1 }
        let m = Double(registerCount)
        var z = m * Self.tau(1 - Double(histogram[q + 1]) / m)
        for k in stride(from: q, through: 1, by: -1) { z = 0.5 * (z + Double(histogram[k])) }
        z += m * Self.sigma(Double(histogram[0]) / m)
        return Int((m * m / (2 * log(2.0)) / z).rounded())
    }

    private static func sigma(_ x0: Double) -> Double {
        if x0 == 1 { return .infinity }
        var x = x0, y = 1.0, z = x0
        while true {
            x *= x
            let previous = z
            z += x * y
            y += y
            if z == previous { return z }
        }
    }

    private static func tau(_ x0: Double) -> Double {
        if x0 == 0 || x0 == 1 { return 0 }
        var x = x0, y = 1.0, z = 1 - x0
        while true {
            x = x.squareRoot()
            let previous = z
            y *= 0.5
            z -= (1 - x) * (1 - x) * y
            if z == previous { return z / 3 }
        }
    }

    @inline(__always)
    static func add(_ hash: UInt64, to registers: inout [UInt8]) {
        // The hash of a distinct_id is already mixed (Hash64); mix once more so that the register index and
        // the rank use independent-looking bits even for weak inputs.
        var x = hash &* 0x9E37_79B9_7F4A_7C15
        x ^= x >> 29
        let index = Int(x >> UInt64(64 - precision))
        let rest = x << UInt64(precision)
        let rank = UInt8(min(rest.leadingZeroBitCount, 64 - precision) + 1)
        if rank > registers[index] { registers[index] = rank }
    }

    /// Restores a set from its serialized parts (partials).
    init(exact: Set<UInt64>, registers: [UInt8]) {
        self.exact = exact
        self.registers = registers
    }
}

/// Visit durations of one dwell aggregate, for p50/p90: exact up to `exactLimit` values, then logarithmic
/// buckets 2% wide (relative error at most 1%). Mergeable like `UserSet`.
public struct DurationDigest: Sendable, Equatable {
    /// Above this many durations a digest switches to buckets.
    public static let exactLimit = 1000
    static let gamma = 1.02

    /// The durations in ms while the digest is exact; emptied once it is bucketed.
    public private(set) var values: [Int64] = []
    /// Bucket index → count, once the digest is bucketed.
    public private(set) var buckets: [Int32: Int64] = [:]
    /// Whether the digest holds buckets rather than exact values (its percentiles are then within 1%).
    public private(set) var bucketed = false

    /// An empty, exact digest.
    public init() {}

    init(values: [Int64], buckets: [Int32: Int64], bucketed: Bool) {
        self.values = values
        self.buckets = buckets
        self.bucketed = bucketed
    }

    /// Adds one visit duration in ms; past `exactLimit` values the digest switches to buckets.
    public mutating func add(_ ms: Int64) {
        if bucketed { buckets[Self.bucket(ms), default: 0] += 1; return }
        values.append(ms)
        if values.count > Self.exactLimit { toBuckets() }
    }

    /// The largest bucket index (`bucket(Int64.max)`).
    static let maxBucket = bucket(.max)

    /// The union with `other` (bucketed when either is; bucket counts saturate).
    public mutating func merge(_ other: DurationDigest) {
        if other.bucketed {
            toBuckets()
            for (b, n) in other.buckets { buckets[b, default: 0] = buckets[b, default: 0].saturatingAdd(n) }
        } else {
            for v in other.values { add(v) }
        }
    }

    mutating func toBuckets() {
        if bucketed { return }
        bucketed = true
        for v in values { buckets[Self.bucket(v), default: 0] += 1 }
        values = []
    }

    static func bucket(_ ms: Int64) -> Int32 {
        if ms <= 0 { return -1 }
        return Int32(log(Double(ms)) / log(gamma))
    }

    static func bucketValue(_ b: Int32) -> Int64 {
        if b < 0 { return 0 }
        // The bucket's geometric middle (held below Int64's limit: the last buckets' middles pass it).
        let middle = (exp(Double(b) * log(gamma)) * (1 + gamma) / 2).rounded()
        return middle < 9.2e18 ? Int64(middle) : .max
    }

    /// The nearest-rank percentile (`q` in 0...1), or 0 when empty.
    public func percentile(_ q: Double) -> Int64 {
        if !bucketed {
            if values.isEmpty { return 0 }
            let sorted = values.sorted()
            let rank = max(1, Int((q * Double(sorted.count)).rounded(.up)))
            return sorted[min(rank, sorted.count) - 1]
        }
        let total = buckets.values.reduce(Int64(0)) { $0.saturatingAdd($1) }
        if total == 0 { return 0 }
        let rank = max(1, Int64(min((q * Double(total)).rounded(.up), Double(Int64.max / 2))))
        var seen: Int64 = 0
        for b in buckets.keys.sorted() {
            seen = seen.saturatingAdd(buckets[b]!)
            if seen >= rank { return Self.bucketValue(b) }
        }
        return 0
    }
}


extension Int64 {
    /// `self + other`, held at `Int64.max` (or `.min`) instead of trapping: totals of partials read from the
    /// internal topic, which no real traffic brings near the limit.
    @inline(__always)
    func saturatingAdd(_ other: Int64) -> Int64 {
        let (r, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : r
    }
}
