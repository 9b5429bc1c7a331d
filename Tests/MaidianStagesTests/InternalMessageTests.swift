import MaidianEvents
import MaidianTools
import XCTest

@testable import MaidianStages

/// The internal topic's messages read in place (`InternalMessage.progress(in:_:)`) against the checked reader
/// (`InternalMessage.layout`), and the merger's per-source progress table (`SourceProgress`).
final class InternalMessageTests: XCTestCase {
    /// The in-place reader takes exactly the progress messages `layout` takes, with the same values, wherever
    /// the message lies in a larger buffer: progress messages with every field at its edges, their cuts and
    /// byte changes, a byte added, and other message types.
    func testProgressReadInPlaceAcceptsWhatLayoutAccepts() throws {
        var cases: [[UInt8]] = []
        for source: Int32 in [0, 1, 31, -1, .max, .min] {
            for watermark: Int64 in [0, 59_999, .max, .min, -1] {
                for idle in [false, true] {
                    var v: [UInt8] = []
                    InternalMessage.progress(source: source, watermark: watermark, idle: idle).encode(into: &v)
                    cases.append(v)
                }
            }
        }
        var seeded = SplitMix64(seed: 0x5EED)  // seeded: a failing case is the same on the next run
        let whole = cases
        for v in whole {
            for cut in 0..<v.count { cases.append(Array(v.prefix(cut))) }
            cases.append(v + [0])
            for _ in 0..<8 {
                var m = v
                m[Int(seeded.next() % UInt64(m.count))] = UInt8(truncatingIfNeeded: seeded.next())
                cases.append(m)
            }
        }
        var partial: [UInt8] = []
        InternalMessage.partial(PartialAggregate(sourcePartition: 0, windowEnd: 60_000, head: Array(#"{"metric":"pv"}"#.utf8), count: 1,
                                                 users: UserSet(), isDwell: false, sumMs: 0, durations: DurationDigest())).encode(into: &partial)
        cases += [partial, [], [1], [1, 2], [2, 2] + Array(repeating: 0, count: 13), [1, 6] + Array(repeating: 0, count: 13)]

        for (n, v) in cases.enumerated() {
            let expected: (source: Int32, watermark: Int64, idle: Bool)?
            if case .progress(let s, let w, let i)? = try? InternalMessage.layout(v) { expected = (s, w, i) } else { expected = nil }
            // Alone, and between other bytes as an item of a bundle lies.
            for (prefix, suffix) in [(0, 0), (7, 3)] {
                let buffer = Array(repeating: 0xAB, count: prefix) + v + Array(repeating: 0xCD, count: suffix)
                let got = InternalMessage.progress(in: buffer, prefix..<(prefix + v.count))
                XCTAssertEqual(got?.source, expected?.source, "case \(n): \(v)")
                XCTAssertEqual(got?.watermark, expected?.watermark, "case \(n): \(v)")
                XCTAssertEqual(got?.idle, expected?.idle, "case \(n): \(v)")
            }
        }
        XCTAssertNil(InternalMessage.progress(in: whole[0], 0..<(whole[0].count + 1)), "a range past the bytes")
    }

    func testSourceProgressKeepsEverySourceWhateverItsNumber() {
        var table = SourceProgress(sources: 4)
        let at = WindowMerger.Position(offset: 7, item: 2)
        for (s, w) in [(Int32(0), Int64(10)), (3, 30), (4, 40), (-1, -10), (.max, 99)] {
            XCTAssertNil(table[s])
            table[s] = WindowMerger.Progress(watermark: w, idle: false, at: at)
        }
        table[3]?.idle = true
        XCTAssertEqual(table[0]?.watermark, 10)
        XCTAssertEqual(table[3]?.idle, true)
        XCTAssertEqual(table[4]?.watermark, 40, "past the topic's partitions when the table was made")
        XCTAssertEqual(table[-1]?.watermark, -10)
        XCTAssertEqual(table[.max]?.watermark, 99, "a partition number does not size memory")
        XCTAssertNil(table[1])
        var seen: [Int64] = []
        table.forEach { seen.append($0.watermark) }
        XCTAssertEqual(seen.sorted(), [-10, 10, 30, 40, 99])
        table[4] = nil
        table[0] = nil
        seen = []
        table.forEach { seen.append($0.watermark) }
        XCTAssertEqual(seen.sorted(), [-10, 30, 99])
    }
}
