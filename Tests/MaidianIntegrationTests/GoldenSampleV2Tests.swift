import Foundation
import XCTest

/// The golden test of wire format, revision 2 on `sample-v2.ndjson` (offline caches up to 3 h late, caches more than
/// a day late, future clocks without `_flush_time`, logins mid-visit, hostile-but-valid input): workers on the mock
/// cluster, every output against `sample-v2.expected.json`.
final class GoldenSampleV2Tests: XCTestCase {
    /// One worker holds every raw and partials partition: late events, per-install visits, trails, clamped clocks
    /// and the revision-2 dead letters, end to end.
    func testSampleV2TrafficOneWorker() throws {
        try GoldenSampleTests.runGolden(recording: "sample-v2", records: 9473, workers: 1)
    }

    /// Two workers of one group: the second worker's join moves partitions, and a worker that has finished its
    /// sources may hand its merged partitions over; the late contributions stay in the merged windows
    /// (`WindowMergerTests.testAfterEverySourceEndedAReReadWritesNoWindowAgain`).
    func testSampleV2TrafficTwoWorkers() throws {
        try GoldenSampleTests.runGolden(recording: "sample-v2", records: 9473)
    }
}
