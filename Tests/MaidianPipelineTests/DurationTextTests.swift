import MaidianPipeline
import XCTest

/// `Duration.rounded`: durations in log and summary lines, rounded to what a reader needs.
final class DurationTextTests: XCTestCase {
    func testRoundsToTheUnitThatFits() {
        XCTAssertEqual(Duration.nanoseconds(9_296_396).rounded, "9.3 ms", "was '0.009296396 seconds'")
        XCTAssertEqual(Duration.nanoseconds(850_400).rounded, "850 µs")
        XCTAssertEqual(Duration.nanoseconds(999_960_000).rounded, "1.00 s", "rounds up into the next unit")
        XCTAssertEqual(Duration.nanoseconds(999_700).rounded, "1.0 ms")
        XCTAssertEqual(Duration.milliseconds(59_999).rounded, "1m00s")
        XCTAssertEqual(Duration.milliseconds(1_254).rounded, "1.25 s")
        XCTAssertEqual(Duration.milliseconds(1_005).rounded, "1.01 s")
        XCTAssertEqual(Duration.milliseconds(60_400).rounded, "1m00s")
        XCTAssertEqual(Duration.seconds(125).rounded, "2m05s")
        XCTAssertEqual(Duration.zero.rounded, "0 µs")
        XCTAssertEqual(Duration.milliseconds(-1_500).rounded, "-1.50 s")
    }
}
