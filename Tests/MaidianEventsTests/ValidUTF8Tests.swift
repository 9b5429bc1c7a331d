import XCTest
@testable import MaidianEvents

/// `isValidUTF8` skips ASCII a word at a time: every kind of byte at every offset within and across words
/// must give the same answer as the standard library's validation.
final class ValidUTF8Tests: XCTestCase {
    private func reference(_ bytes: [UInt8]) -> Bool {
        String(validating: bytes, as: UTF8.self) != nil
    }

    func testEveryInsertAtEveryOffset() {
        let inserts: [[UInt8]] = [
            [0x41], [0x7F], [0x00],
            Array("é".utf8), Array("€".utf8), Array("😀".utf8),
            [0xFF], [0x80], [0xC0, 0x80], [0xC3], [0xE2, 0x82], [0xF0, 0x9F, 0x98],
            [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE0, 0x80, 0xAF],
        ]
        for total in 0..<26 {
            for insert in inserts where insert.count <= total {
                for at in 0...(total - insert.count) {
                    var bytes = [UInt8](repeating: 0x61, count: total)
                    bytes.replaceSubrange(at..<at + insert.count, with: insert)
                    let got = bytes.withUnsafeBytes { isValidUTF8($0) }
                    XCTAssertEqual(got, reference(bytes), "\(insert) at \(at) of \(total)")
                }
            }
        }
    }

    /// Two non-ASCII sequences in one word, and a valid one cut by the end of the buffer.
    func testSequencesAcrossWordsAndTheEnd() {
        for at in 0..<16 {
            var bytes = [UInt8](repeating: 0x62, count: 16)
            let two = Array("éü".utf8)
            if at + two.count <= 16 {
                bytes.replaceSubrange(at..<at + two.count, with: two)
                XCTAssertTrue(bytes.withUnsafeBytes { isValidUTF8($0) }, "at \(at)")
            }
            let cut = Array(bytes[0..<at]) + [0xE2, 0x82]
            XCTAssertEqual(cut.withUnsafeBytes { isValidUTF8($0) }, reference(cut), "cut at \(at)")
        }
        XCTAssertTrue([UInt8]().withUnsafeBytes { isValidUTF8($0) })
    }
}
