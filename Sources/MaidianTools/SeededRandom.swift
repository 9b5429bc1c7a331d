#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// SplitMix64: seeds other generators and derives independent streams from (seed, index); tests use it for
/// reproducible random inputs (a failure names its seed).
public struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    /// A generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) { state = seed }

    @inline(__always)
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// xoshiro256**: the generator's deterministic PRNG (never the system generator), one per simulated user.
struct SeededRandom {
    private var s0: UInt64
    private var s1: UInt64
    private var s2: UInt64
    private var s3: UInt64

    /// A stream derived from a seed and a stream number (for example a user index).
    init(seed: UInt64, stream: UInt64 = 0) {
        var sm = SplitMix64(seed: seed ^ (stream &* 0xD1B5_4A32_D192_ED03))
        s0 = sm.next()
        s1 = sm.next()
        s2 = sm.next()
        s3 = sm.next()
        if s0 | s1 | s2 | s3 == 0 { s0 = 1 }
    }

    @inline(__always)
    private static func rotl(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }

    @inline(__always)
    mutating func next() -> UInt64 {
        let result = SeededRandom.rotl(s1 &* 5, 7) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = SeededRandom.rotl(s3, 45)
        return result
    }

    /// Uniform in 0..<n (n > 0).
    @inline(__always)
    mutating func below(_ n: Int) -> Int {
        Int(truncatingIfNeeded: next().multipliedFullWidth(by: UInt64(n)).high)
    }

    /// Uniform in lo..<hi (hi > lo).
    @inline(__always)
    mutating func range(_ lo: Int64, _ hi: Int64) -> Int64 {
        lo + Int64(below(Int(hi - lo)))
    }

    /// Uniform in [0, 1).
    @inline(__always)
    mutating func unit() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// True with probability p.
    @inline(__always)
    mutating func chance(_ p: Double) -> Bool { unit() < p }

    /// A standard normal variate (Box-Muller).
    mutating func gaussian() -> Double {
        let u1 = Swift.max(unit(), 0x1.0p-53)
        let u2 = unit()
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }

    /// A log-normal variate with the given median and log-space sigma.
    mutating func logNormal(median: Double, sigma: Double) -> Double {
        median * exp(sigma * gaussian())
    }

    /// An exponential variate with the given mean.
    mutating func exponential(mean: Double) -> Double {
        -mean * log(Swift.max(1 - unit(), 0x1.0p-53))
    }

    /// How many successes before the first failure, with the given mean (capped).
    mutating func geometric(mean: Double, cap: Int = 40) -> Int {
        let q = mean / (mean + 1)
        var n = 0
        while n < cap && unit() < q { n += 1 }
        return n
    }

    /// An index drawn with the given weights (their sum need not be 1).
    mutating func weighted(_ weights: [Double]) -> Int {
        var total = 0.0
        for w in weights { total += w }
        var x = unit() * total
        for (i, w) in weights.enumerated() {
            if x < w { return i }
            x -= w
        }
        return weights.count - 1
    }
}

/// A binary min-heap.
struct MinHeap<Element: Comparable> {
    private(set) var items: [Element] = []

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }
    var min: Element? { items.first }

    mutating func push(_ e: Element) {
        items.append(e)
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            if items[i] < items[parent] {
                items.swapAt(i, parent)
                i = parent
            } else {
                break
            }
        }
    }

    mutating func pop() -> Element? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var i = 0
        let n = items.count
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var m = i
            if l < n && items[l] < items[m] { m = l }
            if r < n && items[r] < items[m] { m = r }
            if m == i { break }
            items.swapAt(i, m)
            i = m
        }
        return top
    }
}
