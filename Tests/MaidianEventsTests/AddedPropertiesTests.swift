import XCTest
@testable import MaidianEvents

final class AddedPropertiesTests: XCTestCase {
    /// One decoded event with the given fragments linked as added properties, in order.
    func batch(_ fragments: [String]) -> EventBatch {
        var batch = EventBatch()
        let t = batch.topicIndex("raw")
        let value = Array("[{\"type\":\"track\",\"event\":\"e\",\"time\":1,\"distinct_id\":\"u\",\"properties\":{\"$province\":\"x\"}}]".utf8)
        value.withUnsafeBytes { v in
            batch.appendRecord(topic: t, partition: 0, offset: 0, timestamp: 0, key: nil, value: v, ip: nil, receivedAt: nil, ua: nil, project: nil)
        }
        RecordDecoder().decodeAll(&batch)
        for f in fragments {
            let start = batch.scratch.count
            batch.scratch.append(contentsOf: Array(f.utf8))
            batch.linkAdded(event: 0, Span(start, batch.scratch.count))
        }
        return batch
    }

    func value(_ b: EventBatch, _ name: String) -> (String, ValueKind)? {
        let n = Array(name.utf8)
        guard let (span, kind) = n.withUnsafeBufferPointer({ b.addedProperty(event: 0, name: $0) }) else { return nil }
        return (String(decoding: b.scratch[Int(span.start)..<Int(span.end)], as: UTF8.self), kind)
    }

    func testFindsEachPairOfEveryFragment() throws {
        let b = batch([
            "\"$ip\":\"1.2.3.4\"",
            "\"$country\":\"中国\",\"$province\":\"四川\",\"$city\":\"成都\"",
            "\"$matched_rules\":[\"a\",\"b,]\"],\"cfg\":{\"k\":[1,{\"x\":\"}\"}]},\"n\":-12.5,\"t\":true,\"z\":null",
            "\"q\":\"say \\\"hi\\\"\"",
        ])
        XCTAssertEqual(value(b, "$ip")?.0, "\"1.2.3.4\"")
        XCTAssertEqual(value(b, "$province")?.0, "\"四川\"")
        XCTAssertEqual(value(b, "$city")?.1, .string)
        XCTAssertEqual(value(b, "$matched_rules")?.0, "[\"a\",\"b,]\"]")
        XCTAssertEqual(value(b, "$matched_rules")?.1, .array)
        XCTAssertEqual(value(b, "cfg")?.0, "{\"k\":[1,{\"x\":\"}\"}]}")
        XCTAssertEqual(value(b, "cfg")?.1, .object)
        XCTAssertEqual(value(b, "n")?.0, "-12.5")
        XCTAssertEqual(value(b, "n")?.1, .number)
        XCTAssertEqual(value(b, "t")?.1, .bool)
        XCTAssertEqual(value(b, "z")?.1, .null)
        XCTAssertEqual(value(b, "q")?.0, "\"say \\\"hi\\\"\"")
    }

    func testOnlyAddedPropertiesAreFound() {
        // `$province` is the client's own property here: not an added one.
        XCTAssertNil(value(batch([]), "$province"))
        XCTAssertNil(value(batch(["\"$ip\":\"1.2.3.4\""]), "$province"))
        XCTAssertNil(value(batch(["\"$ip\":\"1.2.3.4\""]), "$i"))
    }

    func testMalformedFragmentsAreSkippedWithoutReadingPastThem() {
        let b = batch(["\"$a\":\"unterminated", "\"$b\" 1", "\"$c\":[1,2", "\"$d\":7"])
        XCTAssertNil(value(b, "$a"))
        XCTAssertNil(value(b, "$c"))
        XCTAssertEqual(value(b, "$d")?.0, "7")
    }
}
