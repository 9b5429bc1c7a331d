import XCTest
import MaidianEvents
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
}
