import XCTest
@testable import MaidianEvents

/// `EventHead`, the role of a head, `firstProperties` and the scratch appenders (EventAccess+Match.swift).
final class EventAccessMatchTests: XCTestCase {
    func batch(_ events: [String]) -> EventBatch {
        var batch = EventBatch()
        let t = batch.topicIndex("raw")
        let value = Array(("[" + events.joined(separator: ",") + "]").utf8)
        value.withUnsafeBytes { v in
            batch.appendRecord(topic: t, partition: 0, offset: 0, timestamp: 0, key: nil, value: v, ip: nil, receivedAt: nil, ua: nil, project: nil)
        }
        RecordDecoder().decodeAll(&batch)
        return batch
    }

    func testHeadRoleAndFirstPropertiesOfEachSlot() {
        let b = batch([
            #"{"type":"track","event":"$AppClick","time":1763700000000,"distinct_id":"a","properties":{"x":1,"current_url":"u1","$screen_name":"S","current_url":"u2","$screen_name":"T"}}"#,
            #"{"type":"track","event":7,"time":1763700000000,"distinct_id":"a","properties":{}}"#,
        ])
        let h = b.head(0)
        XCTAssertTrue(h.isTrack)
        XCTAssertEqual(h.isLive, b.isLive(0))
        XCTAssertEqual(h.properties.count, 5)
        XCTAssertEqual(EventRoles().table.role(of: h, in: b), .click)
        XCTAssertFalse(b.head(1).eventName.isPresent, "a name that is no string is absent")
        XCTAssertNil(EventRoles().table.role(of: b.head(1), in: b))

        var slotOfKnown = [Int8](repeating: -1, count: 256)
        slotOfKnown[KnownProperty.screenName.rawValue] = 0
        var found = [5, 5, 5]
        b.firstProperties(of: h, slotOfKnown: slotOfKnown, extra: "current_url", extraSlot: 1, into: &found)
        let lo = Int(h.firstProperty)
        XCTAssertEqual(found, [lo + 2, lo + 1, -1], "the first of each; an unused slot is reset")
    }

    func testScratchAppendersCopyFromEveryArena() {
        var b = batch([#"{"type":"track","event":"e","time":1763700000000,"distinct_id":"abc","properties":{}}"#])
        let start = b.scratch.count
        Array("xy".utf8).withByteView { b.appendToScratch($0) }
        b.appendToScratch(0x2C)
        b.appendToScratch(json: b.events[0].distinctID)
        b.appendToScratch(scratch: Span(start, start + 2))
        XCTAssertEqual(String(decoding: b.scratch[start...], as: UTF8.self), "xy,abcxy")
    }
}
