import Foundation
import XCTest
import MaidianEvents
@testable import MaidianStages

final class ValidateStageTests: XCTestCase {
    func reasons(_ events: [String]) throws -> [String] {
        let h = try StageHarness.standard()
        let r = try h.run([TestRecord(json: "[" + events.joined(separator: ",") + "]")])
        return r.dlq.map { $0.value["reason"] as? String ?? "?" }
    }

    func testEachEventLevelReason() throws {
        XCTAssertEqual(try reasons(["\"just a string\""]), ["not_object"])
        XCTAssertEqual(try reasons(["[1,2]"]), ["not_object"])
        XCTAssertEqual(try reasons(["{\"type\":\"trakc\",\"event\":\"a\",\"time\":1700000000000,\"distinct_id\":\"u\"}"]), ["bad_type"])
        XCTAssertEqual(try reasons(["{\"event\":\"a\",\"time\":1700000000000,\"distinct_id\":\"u\"}"]), ["bad_type"])
        XCTAssertEqual(try reasons(["{\"type\":5,\"event\":\"a\",\"time\":1700000000000,\"distinct_id\":\"u\"}"]), ["bad_type"])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":\"9bad name\",\"time\":1700000000000,\"distinct_id\":\"u\"}"]), ["bad_event_name"])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"time\":1700000000000,\"distinct_id\":\"u\"}"]), ["bad_event_name"])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":7,\"time\":1700000000000,\"distinct_id\":\"u\"}"]), ["bad_event_name"])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":\"a\",\"distinct_id\":\"u\"}"]), ["bad_time"])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":\"a\",\"time\":\"yesterday\",\"distinct_id\":\"u\"}"]), ["bad_time"])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":\"a\",\"time\":1.5,\"distinct_id\":\"u\"}"]), ["bad_time"])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":\"a\",\"time\":null,\"distinct_id\":\"u\"}"]), ["bad_time"])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":\"a\",\"time\":1700000000000}"]), ["bad_distinct_id"])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":\"a\",\"time\":1700000000000,\"distinct_id\":\"\"}"]), ["bad_distinct_id"])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":\"a\",\"time\":1700000000000,\"distinct_id\":12345}"]), ["bad_distinct_id"])
        let long = String(repeating: "x", count: 256)
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":\"a\",\"time\":1700000000000,\"distinct_id\":\"\(long)\"}"]), ["bad_distinct_id"])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":\"a\",\"time\":1700000000000,\"distinct_id\":\"\(String(long.dropLast()))\"}"]), [])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":\"a\",\"time\":1700000000000,\"distinct_id\":\"u\",\"properties\":[\"not\"]}"]), ["bad_properties"])
        XCTAssertEqual(try reasons(["{\"type\":\"track\",\"event\":\"a\",\"time\":1700000000000,\"distinct_id\":\"u\",\"properties\":null}"]), ["bad_properties"])
    }

    func testDeadLetterFormatForEvents() throws {
        let h = try StageHarness.standard()
        let r = try h.run([TestRecord(json: "[" + trackEvent() + ",\"just a string\"]", key: "k1")])
        XCTAssertEqual(r.enriched.count, 1)
        XCTAssertEqual(r.dlq.count, 1)
        let d = r.dlq[0]
        XCTAssertEqual(d.key, "k1")
        XCTAssertEqual(d.value["reason"] as? String, "not_object")
        XCTAssertEqual(d.value["index"] as? Int, 1)
        XCTAssertEqual(d.value["payload"] as? String, "just a string")
        XCTAssertNotNil(d.value["detail"] as? String)
        let source = d.value["source"] as? [String: Any]
        XCTAssertEqual(source?["topic"] as? String, "events.raw")
        XCTAssertEqual(source?["partition"] as? Int, 0)
        XCTAssertEqual(source?["offset"] as? Int, 0)
        XCTAssertNil(d.value["payload_b64"])
    }

    func testProfileEventsPassUntouched() throws {
        let h = try StageHarness.standard()
        let profile = "{\"type\":\"profile_set\",\"time\":1763700000000,\"distinct_id\":\"u1\",\"properties\":{\"bad-name\":null,\"age\":3}}"
        let r = try h.run([TestRecord(json: "[\(profile)]")])
        XCTAssertEqual(r.enriched.count, 1)
        XCTAssertEqual(r.enriched[0].raw, profile)
    }

    func props(_ properties: String) throws -> [String: Any] {
        let h = try StageHarness.standard()
        let r = try h.run([TestRecord(json: "[" + trackEvent(properties: properties) + "]")])
        XCTAssertEqual(r.enriched.count, 1)
        return r.enriched.first?.value["properties"] as? [String: Any] ?? [:]
    }

    func testInvalidNameDropped() throws {
        let p = try props("{\"bad-name\":true,\"ok\":1,\"1bad\":2}")
        XCTAssertNil(p["bad-name"]); XCTAssertNil(p["1bad"])
        XCTAssertEqual(p["ok"] as? Int, 1)
        XCTAssertEqual(p["$dropped_properties"] as? [String], ["bad-name", "1bad"])
    }

    func testNullDropped() throws {
        let p = try props("{\"coupon\":null,\"a\":\"b\"}")
        XCTAssertNil(p["coupon"])
        XCTAssertEqual(p["$dropped_properties"] as? [String], ["coupon"])
        XCTAssertEqual(p["a"] as? String, "b")
    }

    func testObjectDroppedExceptElementContent() throws {
        let p = try props("{\"o\":{\"x\":1},\"$element_content\":{\"UIView-UILabel(0)\":\"Sale\"}}")
        XCTAssertNil(p["o"])
        XCTAssertEqual((p["$element_content"] as? [String: Any])?["UIView-UILabel(0)"] as? String, "Sale")
        XCTAssertEqual(p["$dropped_properties"] as? [String], ["o"])
    }

    func testLongStringCut() throws {
        let long = String(repeating: "a", count: 9000)
        let p = try props("{\"long_text\":\"\(long)\"}")
        let v = p["long_text"] as? String ?? ""
        XCTAssertEqual(v.utf8.count, 8192)
        XCTAssertTrue(v.hasSuffix("a$"))
        XCTAssertNil(p["$dropped_properties"])
    }

    func testLongStringCutAtCharacterBoundary() throws {
        // 8190 ASCII bytes then a 3-byte character: cutting at 8191 would split it.
        let s = String(repeating: "a", count: 8190) + "中文"
        let p = try props("{\"t\":\"\(s)\"}")
        let v = p["t"] as? String ?? ""
        XCTAssertEqual(v, String(repeating: "a", count: 8190) + "$")
    }

    func testLongEscapedStringCut() throws {
        let s = String(repeating: "\\n", count: 8200)
        let p = try props("{\"t\":\"\(s)\"}")
        let v = p["t"] as? String ?? ""
        XCTAssertEqual(v, String(repeating: "\n", count: 8191) + "$")
    }

    func testStringAtLimitKept() throws {
        let s = String(repeating: "b", count: 8191)
        let p = try props("{\"t\":\"\(s)\"}")
        XCTAssertEqual(p["t"] as? String, s)
    }

    func testArrayNonStringsDropped() throws {
        let p = try props("{\"tags\":[\"a\",1,\"b\",null,{\"x\":1},[\"c\"]],\"ok\":[\"x\"]}")
        XCTAssertEqual(p["tags"] as? [String], ["a", "b"])
        XCTAssertEqual(p["ok"] as? [String], ["x"])
        XCTAssertNil(p["$dropped_properties"])
    }

    func testValidEventUnchangedApartFromPresets() throws {
        let h = try StageHarness.standard()
        let ev = trackEvent(properties: "{\"n\":1.5e3,\"b\":false,\"s\":\"x\\u00e9\",\"arr\":[\"q\"]}")
        let r = try h.run([TestRecord(json: "[\(ev)]", ip: "1.2.3.4", receivedAt: 1_763_700_000_000)])
        let expected = String(ev.dropLast(2)) + ",\"$ip\":\"1.2.3.4\",\"$receive_time\":1763700000000,\"$project\":\"default\"}}"
        XCTAssertEqual(r.enriched[0].raw, expected)
        XCTAssertEqual(r.enriched[0].key, "u1")
    }
}

/// Issue 13: wire format §2, revision 2 (time range, duplicate keys, server-owned properties).
extension ValidateStageTests {
    func testTimeOutsideTheSpecRangeIsBadTime() throws {
        func ev(_ time: String) -> String { "{\"type\":\"track\",\"event\":\"a\",\"time\":\(time),\"distinct_id\":\"u\",\"_track_id\":1}" }
        for bad in ["-9223372036854775807", "9223372036854775807", "0", "1420070399999", "4102444800000", "-1"] {
            XCTAssertEqual(try reasons([ev(bad)]), ["bad_time"], bad)
        }
        for ok in ["1420070400000", "4102444799999", "1763700000000"] {
            XCTAssertEqual(try reasons([ev(ok)]), [], ok)
        }
    }

    func testDuplicateKeyIsDeadLettered() throws {
        XCTAssertEqual(try reasons(["{\"type\":\"profile_set\",\"type\":\"track\",\"event\":\"a\",\"time\":1700000000000,\"distinct_id\":\"u\"}"]), ["duplicate_key"])
        XCTAssertEqual(try reasons([trackEvent(properties: "{\"a\":1,\"a\":2}")]), ["duplicate_key"])
    }

    func testServerOwnedPropertiesFromTheClientAreDropped() throws {
        let p = try props("{\"$matched_rules\":[\"spoofed\"],\"$late\":false,\"$dropped_properties\":\"x\",\"$client_time\":1,\"$receive_time\":2,\"ok\":1}")
        XCTAssertNil(p["$matched_rules"])
        XCTAssertNil(p["$late"])
        XCTAssertNil(p["$client_time"])
        XCTAssertEqual(p["ok"] as? Int, 1)
        XCTAssertEqual(p["$receive_time"] as? Int64, 1_763_700_000_000, "the server's, from the header")
        let dropped = p["$dropped_properties"] as? [String] ?? []
        XCTAssertEqual(dropped.count, 5)
        XCTAssertEqual(Set(dropped), ["$matched_rules", "$late", "$dropped_properties", "$client_time", "$receive_time"])
        // Escapes do not hide a server-owned name.
        let escaped = try props("{\"$l\\u0061te\":false,\"ok\":1}")
        XCTAssertNil(escaped["$late"])
        XCTAssertEqual(escaped["$dropped_properties"] as? [String], ["$late"])
    }

    func testInvalidHeadersAreTakenAsAbsent() throws {
        let h = try StageHarness.standard()
        h.batch.reset()
        h.output.reset()
        let t = h.batch.topicIndex("events.raw")
        let value = Array(("[" + trackEvent() + "]").utf8)
        let headers: [[UInt8]] = [[0x31, 0x2E, 0x30, 0xFF], Array("12x".utf8), [0xC3, 0x28], [0x70, 0xED, 0xA0, 0x80]]
        value.withUnsafeBytes { v in headers[0].withUnsafeBytes { ip in headers[1].withUnsafeBytes { rat in
            headers[2].withUnsafeBytes { ua in headers[3].withUnsafeBytes { project in
                h.batch.appendRecord(topic: t, partition: 0, offset: 0, timestamp: 0, key: nil, value: v, ip: ip, receivedAt: rat, ua: ua, project: project)
            } }
        } } }
        XCTAssertEqual(h.batch.invalidHeaders, 4)
        h.decoder.decodeAll(&h.batch)
        for s in h.stages { try s.process(&h.batch, output: &h.output) }
        try h.enriched.process(&h.batch, output: &h.output)
        XCTAssertEqual(h.output.messages.count, 1)
        let raw = h.output.valueString(0)
        XCTAssertFalse(raw.contains("\u{FFFD}"), raw)
        let obj = try JSONSerialization.jsonObject(with: Data(raw.utf8)) as? [String: Any]
        let props = obj?["properties"] as? [String: Any] ?? [:]
        XCTAssertNil(props["$ip"])
        XCTAssertNil(props["$receive_time"])
        XCTAssertEqual(props["$project"] as? String, "default")
    }
}
