import XCTest
import MaidianEvents
import MaidianPipeline
@testable import MaidianStages

final class CalibrateTimeStageTests: XCTestCase {
    func testWrongClockIsCalibrated() throws {
        let h = try StageHarness.standard()
        // Client clock 2 hours ahead: flush at T+2h, received at T.
        let received: Int64 = 1_763_700_010_000
        let ev = trackEvent(time: received + 7_200_000 - 5_000, flushTime: received + 7_200_000)
        let r = try h.run([TestRecord(json: "[\(ev)]", receivedAt: received)])
        let e = r.enriched[0].value
        XCTAssertEqual(e["time"] as? Int64, received - 5_000)
        XCTAssertEqual((e["properties"] as? [String: Any])?["$client_time"] as? Int64, received + 7_200_000 - 5_000)
        XCTAssertEqual(r.events[0].time, received - 5_000)
    }

    func testSmallSkewUntouched() throws {
        let h = try StageHarness.standard()
        let received: Int64 = 1_763_700_010_000
        let ev = trackEvent(time: received - 1000, flushTime: received - 60_000)  // exactly 60 s: not more than
        let r = try h.run([TestRecord(json: "[\(ev)]", receivedAt: received)])
        XCTAssertEqual(r.enriched[0].value["time"] as? Int64, received - 1000)
        XCTAssertNil((r.enriched[0].value["properties"] as? [String: Any])?["$client_time"])
    }

    func testNeedsBothFlushTimeAndReceivedAt() throws {
        let h = try StageHarness.standard()
        let t: Int64 = 1_700_000_000_000
        let ev1 = trackEvent(time: t, trackID: 1, flushTime: nil)
        let ev2 = trackEvent(time: t, trackID: 2, flushTime: t + 1000_000)
        let r = try h.run([TestRecord(json: "[\(ev1)]", receivedAt: 1_763_700_000_000), TestRecord(json: "[\(ev2)]", receivedAt: nil)])
        XCTAssertEqual(r.enriched.map { $0.value["time"] as? Int64 }, [t, t])
    }

    func testClockBehind() throws {
        let h = try StageHarness.standard()
        let received: Int64 = 1_763_700_010_000
        let ev = trackEvent(time: received - 86_400_000, flushTime: received - 86_400_000 + 10)
        let r = try h.run([TestRecord(json: "[\(ev)]", receivedAt: received)])
        XCTAssertEqual(r.enriched[0].value["time"] as? Int64, received - 10)
    }

    func testTimeAfterPropertiesIsRewritten() throws {
        let h = try StageHarness.standard()
        let ev = "{\"type\":\"track\",\"event\":\"e\",\"distinct_id\":\"u\",\"properties\":{\"a\":1},\"_flush_time\":1700000100000,\"time\":1700000099000}"
        let r = try h.run([TestRecord(json: "[\(ev)]", receivedAt: 1_700_000_200_000)])
        XCTAssertEqual(r.enriched[0].value["time"] as? Int64, 1_700_000_199_000)
        let p = r.enriched[0].value["properties"] as? [String: Any]
        XCTAssertEqual(p?["$client_time"] as? Int64, 1_700_000_099_000)
        XCTAssertEqual(p?["a"] as? Int, 1)
    }

    func testFutureClockWithoutFlushTimeIsClamped() throws {
        let h = try StageHarness.standard()
        let received: Int64 = 1_763_700_010_000
        let far = received + 400 * 86_400_000  // a clock 400 days ahead, no _flush_time
        let near = received + 10 * 60_000      // exactly max_future ahead: not more than
        let r = try h.run([TestRecord(json: "[\(trackEvent(time: far, trackID: 1)),\(trackEvent(time: near, trackID: 2))]", receivedAt: received)])
        XCTAssertEqual(r.enriched.map { $0.value["time"] as? Int64 }, [received, near])
        XCTAssertEqual((r.enriched[0].value["properties"] as? [String: Any])?["$client_time"] as? Int64, far)
        XCTAssertNil((r.enriched[1].value["properties"] as? [String: Any])?["$client_time"])
    }

    func testClampAppliesAfterCalibration() throws {
        // The skew correction still leaves the event an hour ahead of its receive time: clamped, and the
        // original client time is kept once.
        let h = try StageHarness.standard()
        let received: Int64 = 1_763_700_010_000
        let ev = trackEvent(time: received + 2 * 3_600_000, flushTime: received + 3_600_000)
        let r = try h.run([TestRecord(json: "[\(ev)]", receivedAt: received)])
        XCTAssertEqual(r.enriched[0].value["time"] as? Int64, received)
        XCTAssertEqual((r.enriched[0].value["properties"] as? [String: Any])?["$client_time"] as? Int64, received + 2 * 3_600_000)
    }

    func testMaxFutureIsConfigurable() throws {
        let ctx = StageHarness.context()
        var config = CalibrateTimeStage.Config()
        config.maxFuture = ConfigDuration(milliseconds: 60_000)
        let h = try StageHarness(stages: [ValidateStage(config: .init(), context: ctx), CalibrateTimeStage(config: config, context: ctx)])
        let received: Int64 = 1_763_700_010_000
        let r = try h.run([TestRecord(json: "[\(trackEvent(time: received + 61_000))]", receivedAt: received)])
        XCTAssertEqual(r.enriched[0].value["time"] as? Int64, received)
    }

    func testRecordTimestampIsTheReferenceWithoutReceivedAt() {
        let ts: Int64 = 1_763_700_010_000
        let c = CalibrateTimeStage.corrected(time: ts + 3_600_000, flushTime: nil, receivedAt: nil, timestamp: ts, maxSkew: 60_000, maxFuture: 600_000)
        XCTAssertEqual(c?.time, ts)
        XCTAssertEqual(c?.clamped, true)
        // No reference at all (timestamp absent): nothing to clamp to.
        XCTAssertNil(CalibrateTimeStage.corrected(time: ts, flushTime: nil, receivedAt: nil, timestamp: -1, maxSkew: 60_000, maxFuture: 600_000))
    }

    func testCalibrationNeverLeavesTheValidRangeOrOverflows() {
        let received: Int64 = 1_763_700_010_000
        let time: Int64 = 1_700_000_000_000
        // Arithmetic that would overflow, and corrections that would leave 2015-2100: the receive time.
        for flush in [Int64.min, Int64.max, -4_000_000_000_000, received + 1_000_000_000_000] {
            let c = CalibrateTimeStage.corrected(time: time, flushTime: flush, receivedAt: received, timestamp: 0, maxSkew: 60_000, maxFuture: 600_000)
            XCTAssertEqual(c?.time, received, "flush \(flush)")
            XCTAssertEqual(c?.outOfRange, true)
            XCTAssertTrue(EventTimeRange.contains(c!.time))
        }
        // A receive time out of range as well: the client time stays (validation already checked it).
        let c = CalibrateTimeStage.corrected(time: time, flushTime: Int64.min, receivedAt: Int64.max, timestamp: 0, maxSkew: 60_000, maxFuture: 600_000)
        XCTAssertEqual(c?.time, time)
        // Extreme settings do not overflow either.
        XCTAssertNil(CalibrateTimeStage.corrected(time: time, flushTime: nil, receivedAt: received, timestamp: 0, maxSkew: .max, maxFuture: .max))
    }
}
