import XCTest

/// The golden test of wire format, revision 2 on `sample-v2.ndjson` (offline caches up to 3 h late, caches more than
/// a day late, future clocks without `_flush_time`, logins mid-visit, hostile-but-valid input): two workers on
/// the mock cluster, every output against `sample-v2.expected.json`.
final class GoldenSampleV2Tests: XCTestCase {
    func testSampleV2TrafficTwoWorkers() throws {
        try GoldenSampleTests.runGolden(recording: "sample-v2", records: 9473)
    }
}
