import MaidianRuntime
import XCTest

/// What the replay's progress display computes and prints.
final class ReplayProgressTests: XCTestCase {
    func testBarLineAndETA() {
        let p = ReplayProgress(done: 1_250, total: 5_000, rate: 500)
        XCTAssertEqual(p.etaSeconds, 8)
        XCTAssertEqual(p.bar(width: 8), "[██░░░░░░]  25%  1,250/5,000 records  500 rec/s  ETA 0:08")
        XCTAssertEqual(p.line, "replay: 1250/5000 records (25%), 500 records/s, ETA 0:08")
        XCTAssertEqual(ReplayProgress(done: 0, total: 10, rate: 0).line, "replay: 0/10 records (0%), 0 records/s, ETA -:--")
        XCTAssertEqual(ReplayProgress(done: 0, total: 7_200, rate: 1).bar(width: 2), "[░░]   0%  0/7,200 records  1 rec/s  ETA 2:00:00")
        XCTAssertEqual(ReplayProgress(done: 3, total: 0, rate: 1).fraction, 1, "an empty range is done")
    }

    func testRateIgnoresTheWaitBeforeTheFirstRecord() {
        var meter = RateMeter()
        let t0 = ContinuousClock.now
        XCTAssertEqual(meter.add(0, at: t0), 0)
        XCTAssertEqual(meter.add(0, at: t0 + .seconds(3)), 0, "group join: nothing yet")
        XCTAssertEqual(meter.add(100, at: t0 + .seconds(4)), 100, accuracy: 0.001, "counted from the last sample without progress")
        XCTAssertEqual(meter.add(300, at: t0 + .seconds(5)), 150, accuracy: 0.001)
        // The base moves to the newest sample at least 10 s old: 5 s, then (at 30 s) 20 s.
        XCTAssertEqual(meter.add(1_300, at: t0 + .seconds(20)), 1_000.0 / 15.0, accuracy: 0.001)
        XCTAssertEqual(meter.add(1_400, at: t0 + .seconds(21)), 1_100.0 / 16.0, accuracy: 0.001)
        XCTAssertEqual(meter.add(2_400, at: t0 + .seconds(30)), 1_100.0 / 10.0, accuracy: 0.001)
    }
}
