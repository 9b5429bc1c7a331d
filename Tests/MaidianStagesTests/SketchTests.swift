import XCTest
import MaidianEvents
@testable import MaidianStages

final class SketchTests: XCTestCase {
    /// The hash a user is counted by: Hash64 of its `distinct_id`, as the windows stage computes it.
    func userHash(_ i: Int) -> UInt64 {
        let id = Array("user-\(i)".utf8)
        var h = Hash64()
        id.withUnsafeBufferPointer { h.add($0.baseAddress!, $0.count) }
        return h.value
    }

    func users(_ range: Range<Int>) -> UserSet {
        var s = UserSet()
        for i in range { s.insert(userHash(i)) }
        return s
    }

    func relativeError(_ estimate: Int, _ truth: Int) -> Double { abs(Double(estimate - truth)) / Double(truth) }

    // MARK: - UserSet

    func testExactUpToTheLimit() {
        var s = UserSet()
        for i in 0..<UserSet.exactLimit {
            s.insert(userHash(i))
            s.insert(userHash(i))  // the same user again
        }
        XCTAssertFalse(s.isSketch)
        XCTAssertEqual(s.count, 1000)
        s.insert(userHash(1000))
        XCTAssertTrue(s.isSketch, "past 1,000 users the set becomes a sketch")
        XCTAssertLessThan(relativeError(s.count, 1001), 0.02)
    }

    func testSketchErrorAtTenThousandAndOneMillionUsers() {
        for n in [10_000, 1_000_000] {
            let s = users(0..<n)
            XCTAssertTrue(s.isSketch)
            XCTAssertLessThan(relativeError(s.count, n), 0.02, "\(n) users: estimate \(s.count)")
        }
    }

    func testSketchErrorAcrossTheRangeBetween() {
        // Around 2.5 to 5 times the register count the raw HyperLogLog estimate is known to be biased.
        var s = UserSet()
        var inserted = 0
        for n in [2_000, 5_000, 20_000, 30_000, 40_000, 45_000, 60_000, 80_000, 100_000, 200_000] {
            while inserted < n {
                s.insert(userHash(inserted))
                inserted += 1
            }
            XCTAssertLessThan(relativeError(s.count, n), 0.02, "\(n) users: estimate \(s.count)")
        }
    }

    func testMergeOfExactSets() {
        var a = users(0..<300)
        a.merge(users(200..<600))
        XCTAssertFalse(a.isSketch)
        XCTAssertEqual(a.count, 600, "overlapping users count once")
        XCTAssertEqual(a, users(0..<600))

        var big = users(0..<700)
        big.merge(users(500..<1_500))
        XCTAssertTrue(big.isSketch, "a union past the limit becomes a sketch")
        XCTAssertEqual(big, users(0..<1_500))
    }

    func testMergeOfExactAndSketchInEitherOrder() {
        let union = users(0..<5_000)
        var a = users(0..<500)
        a.merge(users(300..<5_000))
        XCTAssertEqual(a, union)
        var b = users(300..<5_000)
        b.merge(users(0..<500))
        XCTAssertEqual(b, union)
    }

    func testMergeOfSketchesIsTheSketchOfTheUnion() {
        var a = users(0..<20_000)
        a.merge(users(10_000..<50_000))
        XCTAssertEqual(a, users(0..<50_000))
        XCTAssertLessThan(relativeError(a.count, 50_000), 0.02)
        var empty = UserSet()
        empty.merge(a)
        XCTAssertEqual(empty, a)
    }

    // MARK: - DurationDigest

    /// The nearest-rank percentile of `values`.
    func nearestRank(_ values: [Int64], _ q: Double) -> Int64 {
        let s = values.sorted()
        return s[max(1, Int((q * Double(s.count)).rounded(.up))) - 1]
    }

    func digest(_ values: [Int64]) -> DurationDigest {
        var d = DurationDigest()
        for v in values { d.add(v) }
        return d
    }

    func testPercentilesExactUpToTheLimit() {
        XCTAssertEqual(DurationDigest().percentile(0.5), 0)
        XCTAssertEqual(digest([7]).percentile(0.9), 7)
        let ten: [Int64] = [9, 1, 8, 2, 7, 3, 6, 4, 5, 10].map { $0 * 1000 }
        XCTAssertEqual(digest(ten).percentile(0.5), 5_000)
        XCTAssertEqual(digest(ten).percentile(0.9), 9_000)
        var state: UInt64 = 1
        let values: [Int64] = (0..<DurationDigest.exactLimit).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int64(state >> 44)
        }
        let d = digest(values)
        XCTAssertFalse(d.bucketed)
        for q in [0.01, 0.5, 0.9, 0.99, 1.0] { XCTAssertEqual(d.percentile(q), nearestRank(values, q)) }
    }

    func testPercentilesWithinOnePercentBeyondTheLimit() {
        var state: UInt64 = 3
        // Log-uniform durations from 50 ms to about 3 hours.
        let values: [Int64] = (0..<100_000).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let u = Double(state >> 11) / Double(1 << 53)
            return Int64(50 * exp(u * 12.3))
        }
        let d = digest(values)
        XCTAssertTrue(d.bucketed)
        for q in [0.1, 0.5, 0.9, 0.99] {
            let truth = nearestRank(values, q)
            XCTAssertLessThan(relativeError(Int(d.percentile(q)), Int(truth)), 0.015, "q \(q): \(d.percentile(q)) vs \(truth)")
        }
        XCTAssertEqual(digest([0, -5] + Array(repeating: 100, count: 2_000)).percentile(0.0001), 0, "non-positive durations are 0")
    }

    func testDigestMergeEqualsTheDigestOfTheUnion() {
        let a: [Int64] = (1...600).map { $0 * 17 }
        let b: [Int64] = (1...700).map { $0 * 31 }
        var small = digest(Array(a.prefix(100)))
        small.merge(digest(Array(b.prefix(100))))
        XCTAssertEqual(small, digest(Array(a.prefix(100)) + Array(b.prefix(100))), "exact + exact below the limit")

        for (x, y) in [(a, b), (a + b, b), (b, a + b), (a + b, a + b)] {
            var m = digest(x)
            m.merge(digest(y))
            let u = digest(x + y)
            XCTAssertTrue(m.bucketed)
            XCTAssertEqual(m.buckets, u.buckets)
            XCTAssertEqual(m.percentile(0.5), u.percentile(0.5))
        }
    }

    // MARK: - Partials

    func roundTrip(_ m: InternalMessage, file: StaticString = #filePath, line: UInt = #line) throws {
        var bytes: [UInt8] = []
        m.encode(into: &bytes)
        XCTAssertEqual(try InternalMessage.decode(bytes), m, file: file, line: line)
        for cut in [0, 1, bytes.count / 2, bytes.count - 1] where cut < bytes.count {
            XCTAssertThrowsError(try InternalMessage.decode(Array(bytes[..<cut])), "truncated at \(cut)", file: file, line: line)
        }
    }

    func testPartialsRoundTrip() throws {
        let head = Array("{\"metric\":\"dwell\",\"rule\":\"home\",\"window_start\":0,\"window_end\":60000,\"dims\":{\"app_version\":\"3.2.1\"}".utf8)
        var durations = DurationDigest()
        for v in [5_000, 7_000, 12_000] as [Int64] { durations.add(v) }
        var bucketed = DurationDigest()
        for v in 1...2_000 { bucketed.add(Int64(v) * 13) }
        try roundTrip(.partial(PartialAggregate(sourcePartition: 3, windowEnd: 1_763_700_060_000, head: head, count: 3,
                                                users: users(0..<2), isDwell: true, sumMs: 24_000, durations: durations)))
        try roundTrip(.partial(PartialAggregate(sourcePartition: 0, windowEnd: 60_000, head: head, count: 2_000,
                                                users: users(0..<1_500), isDwell: true, sumMs: 26_013_000, durations: bucketed)))
        try roundTrip(.partial(PartialAggregate(sourcePartition: 7, windowEnd: -60_000, head: [], count: 1,
                                                users: users(0..<1), isDwell: false, sumMs: 0, durations: DurationDigest())))
        try roundTrip(.progress(source: 2, watermark: 1_763_700_000_000, idle: false))
        try roundTrip(.progress(source: 0, watermark: .min, idle: true))
        try roundTrip(.progress(source: 5, watermark: .max, idle: false))

        var bytes: [UInt8] = []
        InternalMessage.progress(source: 1, watermark: 5, idle: false).encode(into: &bytes)
        bytes[0] = 9
        XCTAssertThrowsError(try InternalMessage.decode(bytes), "unknown version")
        bytes[0] = InternalMessage.version
        bytes[1] = 7
        XCTAssertThrowsError(try InternalMessage.decode(bytes), "unknown type")
    }

    func testPartialEncodingIsCanonical() {
        // The same partial encodes to the same bytes whatever order its users were inserted in (re-read
        // sources write identical records).
        var a = UserSet(), b = UserSet()
        for i in 0..<50 { a.insert(userHash(i)) }
        for i in (0..<50).reversed() { b.insert(userHash(i)) }
        func encoded(_ u: UserSet) -> [UInt8] {
            var out: [UInt8] = []
            InternalMessage.partial(PartialAggregate(sourcePartition: 0, windowEnd: 60_000, head: [0x7B], count: 50, users: u,
                                                     isDwell: false, sumMs: 0, durations: DurationDigest())).encode(into: &out)
            return out
        }
        XCTAssertEqual(encoded(a), encoded(b))
    }
}
