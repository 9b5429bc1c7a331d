import XCTest

@testable import MaidianRuntime

/// Offsets move over delivered records only, and only to commit points (a partition's last record in a
/// batch, which carries what the batch completed).
final class OffsetTrackerTests: XCTestCase {
    let p0 = Slot(lane: .source, partition: 0)
    let p1 = Slot(lane: .source, partition: 1)

    func testOffsetWaitsForTheBatchsLastRecordOfThePartition() {
        let t = OffsetTracker()
        // One batch: p0 offsets 10, 11, 12 (12 carries a closed window's partial) interleaved with p1 offset 5.
        let a = t.add(partition: p0, offset: 10, outputs: 1, commitPoint: false)
        let b = t.add(partition: p1, offset: 5, outputs: 1, commitPoint: true)
        let c = t.add(partition: p0, offset: 11, outputs: 1, commitPoint: false)
        let d = t.add(partition: p0, offset: 12, outputs: 2, commitPoint: true)
        for token in [a, b, c] { t.delivered(token: token, error: nil) }
        t.advance()
        XCTAssertEqual(t.takeAdvanced(), [p1: 6], "p0 stays: offset 12's outputs (caused by 10-12) are in flight")
        t.delivered(token: d, error: nil)
        t.advance()
        XCTAssertEqual(t.takeAdvanced(), [:], "one of 12's two outputs is still in flight")
        t.delivered(token: d, error: nil)
        t.advance()
        XCTAssertEqual(t.takeAdvanced(), [p0: 13])
        XCTAssertTrue(t.isIdle)
    }

    func testFailedDeliveryHoldsBackEveryLaterOffset() {
        let t = OffsetTracker()
        let a = t.add(partition: p0, offset: 0, outputs: 1)
        let b = t.add(partition: p1, offset: 0, outputs: 1)
        t.delivered(token: b, error: nil)
        t.delivered(token: a, error: "delivery failed")
        t.advance()
        XCTAssertEqual(t.takeAdvanced(), [:])
        XCTAssertEqual(t.firstFailure, "delivery failed")
    }
}
