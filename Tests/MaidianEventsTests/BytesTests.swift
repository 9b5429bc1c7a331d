import XCTest
import MaidianEvents

/// The byte toolkit's primitives, over whole words and the tails after them.
final class BytesTests: XCTestCase {
    func testBytesEqualAndBackslashOverWordsAndTails() {
        let a = Array("abcdefghijklmnopq\\rs".utf8)
        var b = a
        a.withUnsafeBufferPointer { pa in
            XCTAssertTrue(Bytes.hasBackslash(pa.baseAddress!, pa.count))
            XCTAssertFalse(Bytes.hasBackslash(pa.baseAddress!, 17))
            for n in 0...pa.count {
                b.withUnsafeBufferPointer { pb in XCTAssertTrue(Bytes.equal(pa.baseAddress!, pb.baseAddress!, n)) }
            }
        }
        for k in [0, 7, 8, 15, 19] {
            b = a
            b[k] ^= 1
            a.withUnsafeBufferPointer { pa in
                b.withUnsafeBufferPointer { pb in
                    XCTAssertFalse(Bytes.equal(pa.baseAddress!, pb.baseAddress!, pa.count), "differs at \(k)")
                    XCTAssertTrue(Bytes.equal(pa.baseAddress!, pb.baseAddress!, k), "same before \(k)")
                }
            }
        }
    }
}
