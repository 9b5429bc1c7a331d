import XCTest
@testable import MaidianEvents

/// String scanning validates runs of non-ASCII text sequence after sequence and skips ASCII a word at a
/// time: every kind of byte at every offset within and across words must give the standard library's answer.
final class JSONScannerTests: XCTestCase {
    /// One batch reused (a new one zero-fills its JSON arena): thousands of decodes.
    private var batch = EventBatch()

    /// The record's status and reason and the property's decoded length after decoding `content` as the
    /// value of a string property.
    private func decodeString(_ content: [UInt8]) -> (status: EventStatus, reason: DeadLetterReason, length: Int32?) {
        let value = Array(#"[{"type":"track","event":"e","time":1,"distinct_id":"u","properties":{"s":""#.utf8)
            + content + Array(#""}}]"#.utf8)
        batch.reset()
        let t = batch.topicIndex("raw")
        value.withUnsafeBytes { v in
            batch.appendRecord(topic: t, partition: 0, offset: 0, timestamp: 0, key: nil, value: v, ip: nil, receivedAt: nil, ua: nil, project: nil)
        }
        RecordDecoder().decodeAll(&batch)
        return (batch.records[0].status, batch.records[0].reason, batch.properties.first?.decodedLength)
    }

    func testNonASCIIAtEveryOffset() {
        let inserts: [[UInt8]] = [
            Array("é".utf8), Array("中文字".utf8), Array("😀é中".utf8), Array("é😀".utf8) + [0x41] + Array("ü".utf8),
            [0xFF], [0x80], [0xC0, 0x80], [0xC3, 0x28], [0xE2, 0x82], [0xF0, 0x9F, 0x98],
            Array("中".utf8) + [0xE2, 0x82], Array("é".utf8) + [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
        ]
        for total in 0..<34 {
            for insert in inserts where insert.count <= total {
                for at in 0...(total - insert.count) {
                    var bytes = [UInt8](repeating: 0x61, count: total)
                    bytes.replaceSubrange(at..<at + insert.count, with: insert)
                    let b = decodeString(bytes)
                    if String(validating: bytes, as: UTF8.self) != nil {
                        XCTAssertEqual(b.status, .live, "\(insert) at \(at) of \(total)")
                        XCTAssertEqual(b.length, Int32(total), "\(insert) at \(at) of \(total)")
                    } else {
                        XCTAssertEqual(b.reason, .badJSON, "\(insert) at \(at) of \(total)")
                    }
                }
            }
        }
    }

    /// A non-ASCII run that ends at a quote, an escape or a control character.
    func testNonASCIIRunThenSpecialByte() {
        for at in 0..<12 {
            let head = [UInt8](repeating: 0x61, count: at) + Array("中文".utf8)
            let escaped = decodeString(head + Array(#"\n"#.utf8))
            XCTAssertEqual(escaped.status, .live, "escape after run at \(at)")
            XCTAssertEqual(escaped.length, Int32(at + 7))
            XCTAssertEqual(decodeString(head + [0x01]).reason, .badJSON, "control after run at \(at)")
        }
    }
}
