import Foundation
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
        XCTAssertEqual(Set(fields.keys), ["poll", "stages", "produce", "deliveries", "commits", "flush", "empty_polls", "thread_cpu"])
        let poll = fields["poll"]!.split(separator: "/")
        XCTAssertEqual(poll[1], "2")
        XCTAssertGreaterThanOrEqual(Double(poll[0].dropLast())!, 2.0)
        XCTAssertLessThan(Double(poll[0].dropLast())!, 3.0)
        XCTAssertEqual(fields["stages"]!.split(separator: "/")[1], "1")
        XCTAssertEqual(fields["produce"], "0.000s/0")
        XCTAssertEqual(fields["empty_polls"], "0.100s/1")
    }

    /// Only the thread's own CPU time counts for a phase: a phase that sleeps adds wall time but (almost) no
    /// CPU time, one that computes adds both.
    func testThreadCPUTimeCountsWorkNotWaiting() {
        var p = LoopProfile()
        p.startCPU()
        var start = ContinuousClock.now
        Thread.sleep(forTimeInterval: 0.2)
        start = p.add(.poll, since: start)
        var x: UInt64 = 1
        while ContinuousClock.now - start < .milliseconds(200) { x = x &* 6364136223846793005 &+ 1 }
        p.add(.stages, since: start)
        XCTAssertNotEqual(x, 0)
        let cpu = p.summary.split(separator: " ").first { $0.hasPrefix("thread_cpu=") }!.dropFirst(11)
        let phases = Dictionary(uniqueKeysWithValues: cpu.split(separator: ",").map { field -> (String, Double) in
            let kv = field.split(separator: ":")
            return (String(kv[0]), Double(kv[1])!)
        })
        XCTAssertLessThan(phases["poll"]!, 0.05, "a sleeping phase used CPU")
        // Busy for 0.2 s of wall time; on a loaded machine the thread gets less than all of it.
        XCTAssertGreaterThan(phases["stages"]!, 0.02)
        XCTAssertLessThanOrEqual(phases["stages"]!, 0.25)
        XCTAssertEqual(phases["produce"], 0)
    }
}
