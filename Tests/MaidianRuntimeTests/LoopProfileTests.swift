import XCTest

@testable import MaidianRuntime

/// The loop profile adds each phase's time and calls, and counts empty polls apart: the line
/// `bench/through_broker.py` reads to tell waiting from working.
final class LoopProfileTests: XCTestCase {
    func testPhasesAddUpSeparatelyAndEmptyPollsAreCountedApart() {
        var p = LoopProfile()
        let now = ContinuousClock.now
        p.add(.poll, since: now - .milliseconds(1500))
        p.add(.poll, since: now - .milliseconds(500))
        p.emptyPoll(took: .milliseconds(100))
        p.add(.stages, since: now - .milliseconds(250))
        let fields = Dictionary(uniqueKeysWithValues: p.summary.split(separator: " ").map { field -> (String, String) in
            let kv = field.split(separator: "=", maxSplits: 1)
            return (String(kv[0]), String(kv[1]))
        })
        XCTAssertEqual(Set(fields.keys), ["poll", "stages", "produce", "deliveries", "commits", "flush", "empty_polls"])
        let poll = fields["poll"]!.split(separator: "/")
        XCTAssertEqual(poll[1], "2")
        XCTAssertGreaterThanOrEqual(Double(poll[0].dropLast())!, 2.0)
        XCTAssertLessThan(Double(poll[0].dropLast())!, 3.0)
        XCTAssertEqual(fields["stages"]!.split(separator: "/")[1], "1")
        XCTAssertEqual(fields["produce"], "0.000s/0")
        XCTAssertEqual(fields["empty_polls"], "0.100s/1")
    }
}
