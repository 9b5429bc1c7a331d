import XCTest
@testable import MaidianPipeline

final class CheckpointTests: XCTestCase {
    // MARK: - ReplayPoint metadata

    func testMetadataRoundTrip() {
        for point in [
            ReplayPoint(offset: 0, maxEventTime: nil),
            ReplayPoint(offset: 12_345, maxEventTime: 1_763_700_000_000),
            ReplayPoint(offset: .max, maxEventTime: -5),
            ReplayPoint(offset: 7, maxEventTime: .min),
            ReplayPoint(offset: 7, maxEventTime: 3, item: 2),
            ReplayPoint(offset: 900, maxEventTime: 1_763_700_000_000, finished: true),
            ReplayPoint(offset: 900, maxEventTime: nil, item: 4, finished: true),
        ] {
            XCTAssertEqual(ReplayPoint(metadata: point.metadata), point, point.metadata)
        }
        XCTAssertEqual(ReplayPoint(offset: 42, maxEventTime: 1_000).metadata, "maidian/1 replay_from=42 max_time=1000")
        XCTAssertEqual(ReplayPoint(offset: 42, maxEventTime: nil).metadata, "maidian/1 replay_from=42 max_time=-")
        XCTAssertEqual(ReplayPoint(offset: 42, maxEventTime: 5, finished: true).metadata, "maidian/1 replay_from=42 max_time=5 finished")
        XCTAssertEqual(ReplayPoint(metadata: "maidian/1 replay_from=42 max_time=5")?.finished, false, "a point written before the flag existed")
    }

    func testForeignMetadataIsRejected() {
        for text in [
            "", "some tool's note", "maidian/2 replay_from=1 max_time=2", "maidian/1 replay_from=1",
            "maidian/1 replay_from=1 max_time=2 extra", "maidian/1 max_time=2 replay_from=1",
            "maidian/1 replay_from=x max_time=2", "maidian/1 replay_from=1 max_time=soon",
            "maidian/1 replay_from= max_time=-", "maidian/1 replay_from=1 max_time=",
            "maidian/1 replay_from=99999999999999999999 max_time=-",
            "maidian/1 replay_from=1 finished", "maidian/1 replay_from=1 max_time=2 finished finished",
            "maidian/1 replay_from=1 max_time=2 item=0 finished", "finished",
        ] {
            XCTAssertNil(ReplayPoint(metadata: text), text)
        }
    }

    // MARK: - PartitionClock

    func testSamplesAreKeptOnlyWhenTheClockMoves() {
        var c = PartitionClock(start: ReplayPoint(offset: 10, maxEventTime: nil))
        XCTAssertEqual(c.samples.map(\.offset), [9])
        c.advance(lastOffset: 12, batchMax: nil)     // no events: same clock
        c.advance(lastOffset: 15, batchMax: 1_000)
        c.advance(lastOffset: 18, batchMax: 900)     // older events do not move it back
        c.advance(lastOffset: 20, batchMax: 2_000)
        XCTAssertEqual(c.maxTime, 2_000)
        XCTAssertEqual(c.samples.map(\.offset), [12, 18, 20])
        XCTAssertEqual(c.samples.map(\.maxTime), [nil, 1_000, 2_000])
        for (a, b) in zip(c.samples, c.samples.dropFirst()) {
            XCTAssertLessThan(a.offset, b.offset)
            XCTAssertLessThan(a.maxTime ?? .min, b.maxTime ?? .min, "samples are monotone")
        }
    }

    /// A clock over batches of offsets (`last`, newest event time).
    func clock(from start: ReplayPoint = ReplayPoint(offset: 0, maxEventTime: nil), _ batches: [(Int64, Int64?)]) -> PartitionClock {
        var c = PartitionClock(start: start)
        for (last, m) in batches { c.advance(lastOffset: last, batchMax: m) }
        return c
    }

    func testReplayPointIsJustAfterTheLastSampleMoreThanTheHorizonBehind() {
        let batches: [(Int64, Int64?)] = [(9, 1_000), (19, 5_000), (29, 9_000), (39, 20_000), (49, 21_000)]
        // Committing 50 with newest time 21,000: horizon 10,000 reaches back to 11,000; the last sample still
        // below that is offset 29 (9,000).
        var c = clock(batches)
        XCTAssertEqual(c.replayPoint(next: 50, horizon: 10_000), ReplayPoint(offset: 30, maxEventTime: 9_000))
        // A horizon reaching to the start replays everything.
        var d = clock(batches)
        XCTAssertEqual(d.replayPoint(next: 50, horizon: 100_000), ReplayPoint(offset: 0, maxEventTime: nil))
        // A zero horizon replays from the last sample before the clock's current value.
        var e = clock(batches)
        XCTAssertEqual(e.replayPoint(next: 50, horizon: 0), ReplayPoint(offset: 40, maxEventTime: 20_000))
    }

    func testReplayPointUsesTheClockAtTheCommittedOffset() {
        let batches: [(Int64, Int64?)] = [(9, 1_000), (19, 5_000), (29, 9_000), (39, 20_000), (49, 21_000)]
        // Committing 25 (inside the batch ending at 29): the clock there is at least 5,000.
        var c = clock(batches)
        XCTAssertEqual(c.replayPoint(next: 25, horizon: 3_000), ReplayPoint(offset: 10, maxEventTime: 1_000))
        // The point found is never past the commit.
        for next in Int64(1)...50 {
            for horizon: Int64 in [0, 1_000, 4_000, 15_000] {
                var k = clock(batches)
                let p = k.replayPoint(next: next, horizon: horizon)
                XCTAssertLessThanOrEqual(p.offset, next, "next \(next) horizon \(horizon)")
            }
        }
    }

    func testNoEventTimeYetMeansNothingToReplay() {
        var c = clock([(9, nil), (19, nil)])
        XCTAssertEqual(c.replayPoint(next: 20, horizon: 1_000), ReplayPoint(offset: 20, maxEventTime: nil))
        // A commit inside the first batch with events: its earlier records may have had some.
        var d = clock([(9, nil), (19, 5_000)])
        XCTAssertEqual(d.replayPoint(next: 15, horizon: 1_000), ReplayPoint(offset: 10, maxEventTime: nil))
        var e = clock([(19, 5_000)])
        XCTAssertEqual(e.replayPoint(next: 1, horizon: 1_000), ReplayPoint(offset: 0, maxEventTime: nil))
    }

    func testRestoredClockStartsWithThePointAsAPseudoSample() {
        let start = ReplayPoint(offset: 100, maxEventTime: 50_000)
        var c = PartitionClock(start: start)
        XCTAssertEqual(c.maxTime, 50_000)
        XCTAssertEqual(c.samples.map(\.offset), [99])
        // Committing before anything was read again: the same point.
        XCTAssertEqual(c.replayPoint(next: 100, horizon: 1_000), start)
        XCTAssertEqual(c.replayPoint(next: 90, horizon: 1_000), start)
        c.advance(lastOffset: 109, batchMax: 40_000)  // re-read records older than the clock
        XCTAssertEqual(c.maxTime, 50_000)
        // Records 100...109 are still within the horizon: a commit now must replay them again.
        for next: Int64 in [100, 105, 110] {
            var k = c
            XCTAssertEqual(k.replayPoint(next: next, horizon: 1_000), start, "next \(next)")
        }
        c.advance(lastOffset: 119, batchMax: 60_000)
        c.advance(lastOffset: 129, batchMax: 80_000)
        var k = c
        XCTAssertEqual(k.replayPoint(next: 130, horizon: 10_000), ReplayPoint(offset: 120, maxEventTime: 60_000))
        var s = c
        XCTAssertEqual(s.replayPoint(next: 130, horizon: 1_000_000), start, "never before the restored point")
    }

    func testPruningKeepsLaterPointsTheSame() {
        let batches: [(Int64, Int64?)] = (0..<40).map { (Int64($0 * 10 + 9), Int64($0) * 1_000) }
        var pruned = clock(batches)
        for next in stride(from: Int64(10), through: 400, by: 10) {
            var fresh = clock(batches)
            XCTAssertEqual(pruned.replayPoint(next: next, horizon: 5_000), fresh.replayPoint(next: next, horizon: 5_000), "next \(next)")
        }
        XCTAssertLessThanOrEqual(pruned.samples.count, 7, "samples older than the horizon are pruned")
        XCTAssertEqual(pruned.samples.first?.offset, 339)
    }
}
