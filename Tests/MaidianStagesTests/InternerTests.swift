import XCTest
import MaidianEvents
@testable import MaidianStages

/// The windows stage's `Interner`: one number per distinct byte string, whichever way the bytes come.
final class InternerTests: XCTestCase {
    func testEqualBytesGetOneNumber() {
        var interner = Interner()
        let words = ["home", "", "cart", "home/long-path-over-eight-bytes", "cart", "", "home/long-path-over-eight-bytez"]
        var numbers: [Int32] = []
        for w in words {
            let n = Array(w.utf8).withByteView { interner.intern($0) }
            XCTAssertEqual(n, interner.intern(Array(w.utf8)), "\(w): a view and an array agree")
            numbers.append(n)
        }
        // An empty view without storage is the empty string too.
        let fromNil = "".withByteView { interner.intern($0) }
        XCTAssertEqual(fromNil, numbers[1])
        XCTAssertEqual(numbers[2], numbers[4])
        XCTAssertEqual(numbers[1], numbers[5])
        XCTAssertEqual(Set(numbers).count, 5)
        XCTAssertEqual(interner.count, 5)
        for (w, n) in zip(words, numbers) { XCTAssertEqual(Array(interner[n]), Array(w.utf8)) }
    }
}
