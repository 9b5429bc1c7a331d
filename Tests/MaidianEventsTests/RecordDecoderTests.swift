import Foundation
import XCTest
@testable import MaidianEvents

final class RecordDecoderTests: XCTestCase {
    func decode(_ values: [[UInt8]], limits: RecordLimits = RecordLimits()) -> EventBatch {
        var batch = EventBatch()
        let t = batch.topicIndex("raw")
        for (i, v) in values.enumerated() {
            v.withUnsafeBytes { vb in
                batch.appendRecord(topic: t, partition: 0, offset: Int64(i), timestamp: 0, key: nil, value: vb, ip: nil, receivedAt: nil, ua: nil, project: nil)
            }
        }
        RecordDecoder(limits: limits).decodeAll(&batch)
        return batch
    }

    func reason(_ v: [UInt8], limits: RecordLimits = RecordLimits()) -> DeadLetterReason {
        decode([v], limits: limits).records[0].reason
    }

    let event = "{\"type\":\"track\",\"event\":\"e\",\"time\":1,\"distinct_id\":\"u\"}"

    func testRawJSONArray() {
        let b = decode([Array("  [\(event),\(event)]".utf8)])
        XCTAssertEqual(b.records[0].status, .live)
        XCTAssertEqual(b.events.count, 2)
        XCTAssertEqual(b.events[1].index, 1)
        XCTAssertEqual(b.events[0].time, 1)
        XCTAssertEqual(b.jsonString(b.events[0].distinctID), "u")
    }

    func testZstdSeveralFrames() {
        let c = ZstdCompressor()
        let v = c.compress(Array("[\(event),".utf8)) + c.compress(Array("\(event)]".utf8))
        let b = decode([v])
        XCTAssertEqual(b.records[0].status, .live)
        XCTAssertEqual(b.events.count, 2)
    }

    func testEmptyArray() {
        let b = decode([Array("[]".utf8)])
        XCTAssertEqual(b.records[0].status, .live)
        XCTAssertEqual(b.events.count, 0)
    }

    func testBadEncoding() {
        XCTAssertEqual(reason(Array("GET /sa?data_list=abc HTTP/1.1".utf8)), .badEncoding)
        XCTAssertEqual(reason(Array("{\"not\":\"zstd\"}".utf8)), .badEncoding)
        XCTAssertEqual(reason([]), .badEncoding)
    }

    func testBadZstd() {
        XCTAssertEqual(reason([0x28, 0xB5, 0x2F, 0xFD, 0x4A, 0x98, 0x07, 0x20, 0x0F, 0x13]), .badZstd)
        let c = ZstdCompressor()
        let whole = c.compress(Array("[\(event)]".utf8))
        XCTAssertEqual(reason(Array(whole.dropLast(3))), .badZstd, "truncated frame")
    }

    func testNotArray() {
        let c = ZstdCompressor()
        XCTAssertEqual(reason(c.compress(Array("{\"not\":\"an array\"}".utf8))), .notArray)
        XCTAssertEqual(reason(c.compress(Array("\"x\"".utf8))), .notArray)
    }

    func testBadJSON() {
        for text in [
            "[\(event)", "[\(event),]", "[{\"a\":}]", "[{\"a\":1,}]", "[tru]", "[01]", "[1.]", "[\"\\x\"]",
            "[\"\\ud800\"]", "[\"a\u{01}\"]", "[] []", "[{\"a\" 1}]", "[-]", "[1e]",
            String(repeating: "[", count: 300) + String(repeating: "]", count: 300),
        ] {
            XCTAssertEqual(reason(Array(text.utf8)), .badJSON, text)
        }
        // Invalid UTF-8 inside a string.
        XCTAssertEqual(reason(Array("[\"".utf8) + [0xC3, 0x28] + Array("\"]".utf8)), .badJSON)
        XCTAssertEqual(reason(Array("[\"".utf8) + [0xED, 0xA0, 0x80] + Array("\"]".utf8)), .badJSON, "surrogate in UTF-8")
        // Zstd content that is malformed JSON.
        XCTAssertEqual(reason(ZstdCompressor().compress(Array("[{\"a\":".utf8))), .badJSON)
    }

    func testValidJSONEdgeCases() {
        let text = "[{\"type\":\"track\",\"event\":\"e\",\"time\":-5,\"distinct_id\":\"\\u4e2d\\ud83d\\ude00\",\"properties\":{\"n\":[1,2.5e-3,true,false,null,{}],\"s\":\"é中😀\"}}]"
        let b = decode([Array(text.utf8)])
        XCTAssertEqual(b.records[0].status, .live)
        XCTAssertEqual(b.events[0].time, -5)
        XCTAssertEqual(b.events[0].distinctIDLength, 7)
        XCTAssertTrue(b.events[0].distinctIDEscaped)
        XCTAssertEqual(b.events[0].propertyCount, 2)
        XCTAssertTrue(b.properties[0].arrayHasNonString)
        XCTAssertEqual(b.properties[1].decodedLength, 9)
    }

    func testLimits() {
        var l = RecordLimits()
        l.maxCompressedBytes = 10
        XCTAssertEqual(reason(Array("[\(event)]".utf8), limits: l), .tooLarge)
        l = RecordLimits()
        l.maxEventsPerRecord = 2
        XCTAssertEqual(reason(Array("[\(event),\(event),\(event)]".utf8), limits: l), .tooLarge)
        XCTAssertEqual(reason(Array("[\(event),\(event)]".utf8), limits: l), .none)
        l = RecordLimits()
        l.maxDecompressedBytes = 1000
        let big = "[" + Array(repeating: event, count: 100).joined(separator: ",") + "]"
        XCTAssertEqual(reason(ZstdCompressor().compress(Array(big.utf8)), limits: l), .tooLarge)
        XCTAssertEqual(reason(Array(big.utf8), limits: l), .tooLarge)
    }

    func testDecompressionBombStopsEarly() {
        // 40 frames of 1 MiB of spaces each (frames may be concatenated): a few KiB that would inflate to
        // 40 MiB; the 16 MiB default stops it.
        let c = ZstdCompressor()
        let spaces = [UInt8](repeating: 0x20, count: 1 << 20)
        let middle = c.compress(spaces)
        var bomb = c.compress([0x5B] + spaces)
        for _ in 0..<38 { bomb += middle }
        bomb += c.compress(spaces + [0x5D])
        XCTAssertLessThan(bomb.count, 1 << 20)
        let b = decode([bomb])
        XCTAssertEqual(b.records[0].reason, .tooLarge)
        XCTAssertLessThan(b.json.count, 40 << 20)
    }

    func testMalformedRecordRollsBackItsEvents() {
        let b = decode([Array("[\(event)]".utf8), Array("[\(event),{\"properties\":{\"a\":1}},".utf8), Array("[\(event)]".utf8)])
        XCTAssertEqual(b.records.map(\.reason), [.none, .badJSON, .none])
        XCTAssertEqual(b.events.count, 2)
        XCTAssertEqual(b.events.map(\.record), [0, 2])
        XCTAssertEqual(b.properties.count, 0)
    }

    func testRecordDeadLetterFormat() throws {
        let v = Array("GET /x".utf8)
        var b = EventBatch()
        let t = b.topicIndex("events.raw")
        let key = Array("k9".utf8)
        v.withUnsafeBytes { vb in key.withUnsafeBytes { kb in
            b.appendRecord(topic: t, partition: 3, offset: 77, timestamp: 0, key: kb, value: vb, ip: nil, receivedAt: nil, ua: nil, project: nil)
        } }
        RecordDecoder().decodeAll(&b)
        var out = OutputBuffer()
        let topic = out.topicIndex("events.dlq")
        OutputWriter.writeDeadLetters(b, topic: topic, into: &out)
        XCTAssertEqual(out.messages.count, 1)
        XCTAssertEqual(out.keyString(0), "k9")
        let obj = try JSONSerialization.jsonObject(with: Data(out.valueString(0).utf8)) as! [String: Any]
        XCTAssertEqual(obj["reason"] as? String, "bad_encoding")
        XCTAssertEqual(obj["payload_b64"] as? String, Data(v).base64EncodedString())
        XCTAssertNil(obj["index"])
        XCTAssertEqual((obj["source"] as? [String: Any])?["offset"] as? Int, 77)
        XCTAssertEqual((obj["source"] as? [String: Any])?["partition"] as? Int, 3)
    }

    func testBase64MatchesFoundation() {
        for n in 0..<10 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            var out: [UInt8] = []
            bytes.withUnsafeBytes { Base64.encode($0, into: &out) }
            XCTAssertEqual(String(decoding: out, as: UTF8.self), Data(bytes).base64EncodedString())
        }
    }
}
