import Foundation
import MaidianEvents
import MaidianPipeline
@testable import MaidianStages
import XCTest

/// Issue 13, class 3: outputs the producer would refuse. Dead letters keep the first 64 KiB of a payload
/// that would make them too large; other outputs that are too large become `too_large` dead letters.
final class DeadLetterOutputTests: XCTestCase {
    static let limit = OutputBuffer.maxMessageBytes(producerLimit: OutputBuffer.defaultProducerLimit)

    func json(_ h: StageHarness, _ i: Int) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(h.output.valueString(i).utf8)) as? [String: Any], h.output.valueString(i))
    }

    func size(_ m: OutputMessage) -> Int { (m.key.isPresent ? m.key.count : 0) + m.value.count }

    func testADeadLetterThatWouldBeTooLargeKeepsTheFirst64KiB() throws {
        let h = try StageHarness.standard()
        let longID = String(repeating: "d", count: 1_000_000)  // bad_distinct_id; its dead letter was over 1 MB
        let badEvent = trackEvent(distinctID: longID)
        let badJSON = "[{\"a\":" + String(repeating: "@", count: 1_000_000) + "}]"  // bad JSON: 1.3 MB in base64
        let small = trackEvent(distinctID: String(repeating: "e", count: 300))
        try h.feed([TestRecord(json: "[\(badEvent)]"), TestRecord(json: badJSON), TestRecord(json: "[\(small)]")])
        XCTAssertEqual(h.output.messages.count, 3)
        for m in h.output.messages { XCTAssertLessThanOrEqual(size(m), Self.limit) }
        XCTAssertEqual(h.output.truncatedDeadLetters, 2)

        let event = try json(h, 0)
        XCTAssertEqual(event["reason"] as? String, "bad_distinct_id")
        XCTAssertEqual(event["truncated"] as? Bool, true)
        XCTAssertEqual(event["index"] as? Int, 0)
        let payload = try XCTUnwrap(event["payload"] as? String)
        XCTAssertEqual(payload.utf8.count, OutputBuffer.truncatedPayloadBytes)
        XCTAssertTrue(badEvent.hasPrefix(payload))

        let record = try json(h, 1)
        XCTAssertNil(record["index"], "a whole record")
        XCTAssertEqual(record["truncated"] as? Bool, true)
        let b64 = try XCTUnwrap(Data(base64Encoded: try XCTUnwrap(record["payload_b64"] as? String)))
        XCTAssertEqual(Array(b64), Array(badJSON.utf8.prefix(OutputBuffer.truncatedPayloadBytes)))

        // Dead letters that fit are written whole, as before.
        let whole = try json(h, 2)
        XCTAssertNil(whole["truncated"])
        XCTAssertEqual((whole["payload"] as? [String: Any])?["distinct_id"] as? String, String(repeating: "e", count: 300))
    }

    func testTruncationDoesNotSplitACharacter() throws {
        let h = try StageHarness.standard()
        // "é" is 2 bytes: the 64 KiB cut is made to fall inside one of them.
        var id = "x"
        let before = trackEvent(distinctID: id).utf8.count - "\",\"_track_id\":1,\"properties\":{\"$screen_name\":\"HomeViewController\"}}".utf8.count
        if (OutputBuffer.truncatedPayloadBytes - before) % 2 == 0 { id += "x" }
        let event = trackEvent(distinctID: id + String(repeating: "é", count: 500_000))
        try h.feed([TestRecord(json: "[\(event)]")])
        let payload = try XCTUnwrap(try json(h, 0)["payload"] as? String)
        XCTAssertEqual(payload.utf8.count, OutputBuffer.truncatedPayloadBytes - 1)
        XCTAssertTrue(event.hasPrefix(payload))
    }

    /// Diverts what `h.output` holds; the source of every message is offset 7 of events.raw, key k.
    func divert(_ h: StageHarness) -> (diverted: Int, dropped: Int) {
        OutputWriter.divertOversized(&h.output) { _ in .init(topic: "events.raw", partition: 3, offset: 7, key: Array("k".utf8)) }
    }

    func testOutputsTooLargeToProduceBecomeTooLargeDeadLetters() throws {
        let h = try StageHarness.standard()
        // A valid 6 MB event, and one whose 1 MB invalid property name lands in $dropped_properties.
        let list = "[" + Array(repeating: "\"abcdefgh\"", count: 550_000).joined(separator: ",") + "]"
        let big = trackEvent(trackID: 1, properties: "{\"$screen_name\":\"Home\",\"list\":\(list)}")
        let badName = trackEvent(trackID: 2, properties: "{\"\(String(repeating: "bad name ", count: 120_000))\":1}")
        let fine = trackEvent(trackID: 3)
        try h.feed([TestRecord(bytes: ZstdCompressor().compress(Array("[\(big),\(badName),\(fine)]".utf8)))])
        XCTAssertEqual(h.output.messages.count, 3)
        let enrichedTopic = h.output.topicIndex("events.enriched")
        XCTAssertEqual(h.output.messages.filter { size($0) > Self.limit }.count, 2)

        XCTAssertEqual(divert(h).diverted, 2)
        XCTAssertEqual(h.output.messages.count, 3, "each output is replaced in place")
        for m in h.output.messages { XCTAssertLessThanOrEqual(size(m), Self.limit); XCTAssertEqual(m.record, 0) }
        for i in 0..<2 {
            XCTAssertEqual(h.output.messages[i].topic, h.output.deadLetterTopic)
            XCTAssertEqual(h.output.keyString(i), "k")
            let d = try json(h, i)
            XCTAssertEqual(d["reason"] as? String, "too_large")
            XCTAssertEqual(d["topic"] as? String, "events.enriched")
            XCTAssertEqual(d["truncated"] as? Bool, true)
            XCTAssertEqual((d["source"] as? [String: Any])?["offset"] as? Int, 7)
            let payload = try XCTUnwrap(d["payload"] as? String)
            XCTAssertEqual(payload.utf8.count, OutputBuffer.truncatedPayloadBytes)
            XCTAssertTrue(payload.hasPrefix("{\"type\":\"track\""), String(payload.prefix(80)))
            XCTAssertTrue((d["detail"] as? String)?.contains("over the producer's limit of \(Self.limit)") == true)
        }
        XCTAssertEqual(h.output.messages[2].topic, enrichedTopic, "outputs that fit stay")
        XCTAssertEqual((try json(h, 2))["_track_id"] as? Int, 3)
    }

    func testAnyTopicIsGuardedAndBinaryPayloadsAreBase64() throws {
        let h = try StageHarness.standard()
        try h.feed([TestRecord(json: "[\(trackEvent())]")])
        // An output of another stage (an internal partials message, say): not UTF-8, over the limit.
        let t = h.output.topicIndex("maidian.partials")
        let keyStart = h.output.begin()
        let valueStart = h.output.bytes.count
        h.output.bytes.append(contentsOf: (0..<(Self.limit + 1)).map { UInt8(truncatingIfNeeded: $0 | 0x80) })
        h.output.finish(topic: t, record: 0, keyStart: keyStart, valueStart: valueStart, hasKey: false)
        XCTAssertEqual(divert(h).diverted, 1)
        XCTAssertEqual(h.output.messages.count, 2)
        let d = try json(h, 1)
        XCTAssertEqual(d["topic"] as? String, "maidian.partials")
        XCTAssertEqual(Data(base64Encoded: try XCTUnwrap(d["payload_b64"] as? String))?.count, OutputBuffer.truncatedPayloadBytes)

        // Without a dead-letter output, too large outputs are left out (and counted by the worker).
        h.output.deadLetterTopic = -1
        let s2 = h.output.bytes.count
        h.output.bytes.append(contentsOf: [UInt8](repeating: 0x41, count: Self.limit + 1))
        h.output.finish(topic: t, record: 0, keyStart: s2, valueStart: s2, hasKey: false)
        XCTAssertEqual(divert(h).dropped, 1)
        XCTAssertEqual(h.output.messages.count, 2)
    }
}
