import XCTest
import MaidianEvents
@testable import MaidianStages

final class RecordPresetsStageTests: XCTestCase {
    func testPresetsFromHeaders() throws {
        let h = try StageHarness.standard()
        let r = try h.run([TestRecord(json: "[" + trackEvent() + "]", ip: "2001:da8::150:185", receivedAt: 1_763_700_000_123, project: "shop")])
        let p = r.enriched[0].value["properties"] as? [String: Any]
        XCTAssertEqual(p?["$ip"] as? String, "2001:da8::150:185")
        XCTAssertEqual(p?["$receive_time"] as? Int64, 1_763_700_000_123)
        XCTAssertEqual(p?["$project"] as? String, "shop")
    }

    func testEventProjectWinsAndDefault() throws {
        let h = try StageHarness.standard()
        var ev = trackEvent()
        ev.removeLast()
        ev += ",\"project\":\"other\"}"
        let r = try h.run([TestRecord(json: "[\(ev)]", project: "shop"), TestRecord(json: "[" + trackEvent(trackID: 2) + "]", ip: nil, receivedAt: nil, project: nil)])
        XCTAssertEqual((r.enriched[0].value["properties"] as? [String: Any])?["$project"] as? String, "other")
        let p2 = r.enriched[1].value["properties"] as? [String: Any]
        XCTAssertEqual(p2?["$project"] as? String, "default")
        XCTAssertNil(p2?["$ip"])
        XCTAssertNil(p2?["$receive_time"])
    }

    func testNeverOverwritesClientProperty() throws {
        let h = try StageHarness.standard()
        let r = try h.run([TestRecord(json: "[" + trackEvent(properties: "{\"$ip\":\"9.9.9.9\"}") + "]", ip: "1.1.1.1")])
        let p = r.enriched[0].value["properties"] as? [String: Any]
        XCTAssertEqual(p?["$ip"] as? String, "9.9.9.9")
        XCTAssertTrue(r.enriched[0].raw.components(separatedBy: "$ip").count == 2, "one $ip only")
    }

    func testMissingPropertiesObjectIsCreated() throws {
        let h = try StageHarness.standard()
        let ev = "{\"type\":\"track\",\"event\":\"e\",\"time\":1700000000000,\"distinct_id\":\"u\"}"
        let r = try h.run([TestRecord(json: "[\(ev)]", ip: "1.0.1.3", receivedAt: 5)])
        XCTAssertEqual(r.enriched[0].raw, "{\"type\":\"track\",\"event\":\"e\",\"time\":1700000000000,\"distinct_id\":\"u\",\"properties\":{\"$ip\":\"1.0.1.3\",\"$receive_time\":5,\"$project\":\"default\"}}")
    }

    func testEmptyPropertiesObject() throws {
        let h = try StageHarness.standard()
        let r = try h.run([TestRecord(json: "[" + trackEvent(properties: "{ }") + "]", ip: nil, receivedAt: nil)])
        XCTAssertEqual((r.enriched[0].value["properties"] as? [String: Any])?["$project"] as? String, "default")
    }

    func testHeaderValueEscaped() throws {
        let h = try StageHarness.standard()
        let r = try h.run([TestRecord(json: "[" + trackEvent() + "]", project: "a\"b")])
        XCTAssertEqual((r.enriched[0].value["properties"] as? [String: Any])?["$project"] as? String, "a\"b")
    }
}
