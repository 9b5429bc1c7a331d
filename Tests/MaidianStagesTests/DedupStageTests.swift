import XCTest
import MaidianEvents
@testable import MaidianStages

final class DedupStageTests: XCTestCase {
    func testRetriedCopyDropped() throws {
        let h = try StageHarness.standard()
        let ev = trackEvent(trackID: 42)
        let r1 = try h.run([TestRecord(json: "[\(ev)]")])
        XCTAssertEqual(r1.enriched.count, 1)
        let r2 = try h.run([TestRecord(json: "[\(ev)]")])  // a later batch: the SDK retried
        XCTAssertEqual(r2.enriched.count, 0)
        XCTAssertEqual(r2.events[0].status, .dropped)
        let dedup = h.stages[2] as! DedupStage
        XCTAssertEqual(dedup.duplicates.value, 1)
    }

    func testDifferentFieldsAreDifferentEvents() throws {
        let h = try StageHarness.standard()
        let evs = [
            trackEvent(trackID: 1), trackEvent(distinctID: "u2", trackID: 1),
            trackEvent(time: 1_763_700_000_001, trackID: 1), trackEvent(event: "other", trackID: 1),
            trackEvent(trackID: 2),
        ]
        let r = try h.run([TestRecord(json: "[" + evs.joined(separator: ",") + "]")])
        XCTAssertEqual(r.enriched.count, 5)
    }

    func testWithoutTrackIDNeverDuplicate() throws {
        let h = try StageHarness.standard()
        let ev = trackEvent(trackID: nil)
        let r = try h.run([TestRecord(json: "[\(ev),\(ev)]")])
        XCTAssertEqual(r.enriched.count, 2)
    }

    func testOutsideWindowNotDuplicate() throws {
        let h = try StageHarness.standard()
        let t0: Int64 = 1_763_700_000_000
        // Same client time, but calibration puts the copies 11 minutes apart in event time.
        let a = trackEvent(time: t0, trackID: 7, flushTime: t0)
        let r1 = try h.run([TestRecord(json: "[\(a)]", receivedAt: t0)])
        let r2 = try h.run([TestRecord(json: "[\(a)]", receivedAt: t0 + 660_000)])
        XCTAssertEqual(r1.enriched.count + r2.enriched.count, 2)
    }

    func testInsideWindowDuplicateAcrossBatches() throws {
        let h = try StageHarness.standard()
        let t0: Int64 = 1_763_700_000_000
        let a = trackEvent(time: t0, trackID: 7, flushTime: t0)
        _ = try h.run([TestRecord(json: "[\(a)]", receivedAt: t0)])
        let r2 = try h.run([TestRecord(json: "[\(a)]", receivedAt: t0 + 540_000)])  // 9 min later
        XCTAssertEqual(r2.enriched.count, 0)
    }

    func testMemoryIsBounded() throws {
        let h = try StageHarness.standard()
        let dedup = h.stages[2] as! DedupStage
        var t: Int64 = 1_763_700_000_000
        for batch in 0..<50 {
            var evs: [String] = []
            for i in 0..<100 {
                evs.append(trackEvent(time: t, trackID: Int64(batch * 1000 + i)))
                t += 1000  // 100 s of event time per batch
            }
            // Received when they happened (an online phone): no clock to clamp.
            _ = try h.run([TestRecord(json: "[" + evs.joined(separator: ",") + "]", receivedAt: t)])
        }
        // Two generations of at most 10 minutes each: at most ~1200 s of events = 1200 keys (+ one batch).
        XCTAssertLessThanOrEqual(dedup.rememberedKeys, 1300)
        XCTAssertGreaterThanOrEqual(dedup.rememberedKeys, 600)
    }

    /// A worker that takes a partition over re-reads it from a replay point (docs/recovery.md): once it has
    /// re-read two windows of event time it must decide like the worker before it, although that one started
    /// earlier. Here a copy of an event comes when the newest event time is 16 minutes past it.
    func testLaterStartSameDecisionsAfterTwoWindows() throws {
        let t0: Int64 = 1_763_700_000_000 - 1_763_700_000_000 % 600_000  // a multiple of the 10 min window
        let minute: Int64 = 60_000
        let k1 = trackEvent(time: t0 + 12 * minute, trackID: 1)
        let common = [k1, trackEvent(time: t0 + 16 * minute, trackID: 2), trackEvent(time: t0 + 27 * minute, trackID: 3), k1]
        var dropped: [Bool] = []
        for startEarlier in [true, false] {
            let h = try StageHarness.standard()
            if startEarlier { _ = try h.run([TestRecord(json: "[\(trackEvent(time: t0 + 5 * minute, trackID: 9))]")]) }
            var last: StageHarness.Result?
            for e in common { last = try h.run([TestRecord(json: "[\(e)]")]) }
            dropped.append(last!.events[0].status == .dropped)
        }
        XCTAssertEqual(dropped[0], dropped[1], "the copy's fate depends on where reading started")
        XCTAssertTrue(dropped[0], "a copy with the same event time is a duplicate while remembered")
    }

    func testRevokedPartitionForgotten() throws {
        let h = try StageHarness.standard()
        let ev = trackEvent(trackID: 9)
        _ = try h.run([TestRecord(json: "[\(ev)]", partition: 3)])
        let dedup = h.stages[2] as! DedupStage
        dedup.partitionsRevoked([3])
        XCTAssertEqual(dedup.rememberedKeys, 0)
    }
}

/// Issue 13, class 1: event times near the 64-bit limits never trap, even without validation before dedup.
extension DedupStageTests {
    func testTimesNearTheLimitsDoNotTrap() throws {
        let h = try StageHarness(stages: [DedupStage(config: .init(), context: StageHarness.context())])
        let times: [Int64] = [.min + 1, .max, .min + 1, 0, .max - 1, -1, .max]
        let evs = times.enumerated().map { trackEvent(time: $0.element, trackID: 7) }
        let r = try h.run([TestRecord(json: "[" + evs.joined(separator: ",") + "]")])
        // The copies at the same time are duplicates; the others are more than a window apart.
        XCTAssertEqual(r.events.map(\.status), [.live, .live, .dropped, .live, .live, .live, .dropped])
    }
}
