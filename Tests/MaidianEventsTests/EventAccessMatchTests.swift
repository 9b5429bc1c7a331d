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

    /// The other properties listed are every kept one that `Property.known` does not place, in order: unknown
    /// names and escaped known ones; not known ones, not dropped ones. The count goes on past the room.
    func testFirstPropertiesListsTheOtherNames() {
        var b = batch([
            #"{"type":"track","event":"$AppClick","time":1763700000000,"distinct_id":"a","properties":{"$os":"iOS","$ti\u0074le":"esc","pageid":"p","gone":2,"$title":"T","last":1}}"#,
        ])
        let h = b.head(0)
        let lo = Int(h.firstProperty)
        b.properties[lo + 3].fix = .drop
        var found = [0]
        var others = [Int32](repeating: -7, count: 4)
        var n = b.firstProperties(of: h, slotOfKnown: [Int8](repeating: -1, count: 256), extra: "current_url", extraSlot: 0, into: &found, others: &others)
        XCTAssertEqual(n, 3)
        XCTAssertEqual(others, [Int32(lo + 1), Int32(lo + 2), Int32(lo + 5), -7], "escaped $title, pageid, last")
        var small = [Int32](repeating: -7, count: 2)
        n = b.firstProperties(of: h, slotOfKnown: [Int8](repeating: -1, count: 256), extra: "current_url", extraSlot: 0, into: &found, others: &small)
        XCTAssertEqual(n, 3, "counted past the room")
        XCTAssertEqual(small, [Int32(lo + 1), Int32(lo + 2)])
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

    /// A known name found by `Property.known` is the property the byte comparison finds: escaped names (never
    /// equal to the raw bytes), dropped ones and repeats included.
    func testPropertyLookupByKnownAgreesWithTheNameBytes() {
        var b = batch([
            #"{"type":"track","event":"$AppClick","time":1763700000000,"distinct_id":"a","properties":{"$ti\u0074le":"esc","$title":"T1","$title":"T2","$os":"iOS","item":"x"}}"#,
            #"{"type":"track","event":"$AppClick","time":1763700000000,"distinct_id":"a","properties":{"$os":"dropped","$os":"kept"}}"#,
        ])
        b.properties[Int(b.head(1).firstProperty)].fix = .drop
        for i in 0..<2 {
            b.withPropertyLookup(of: b.head(i)) { lookup in
                for known in [KnownProperty.title, .os, .screenName] {
                    let name = known.name.withUTF8Buffer { Array($0) }
                    name.withByteView { n in
                        let byBytes = lookup.first(named: n), byKnown = lookup.first(named: n, known: UInt8(known.rawValue))
                        XCTAssertEqual(byBytes?.value, byKnown?.value, "event \(i), \(known)")
                        XCTAssertEqual(byBytes.map { lookup.value(of: $0).string }, byKnown.map { lookup.value(of: $0).string })
                    }
                }
            }
        }
        b.withPropertyLookup(of: b.head(0)) { lookup in
            Array("$title".utf8).withByteView { XCTAssertEqual(lookup.first(named: $0).map { lookup.value(of: $0).string }, "\"T1\"") }
            Array("item".utf8).withByteView { XCTAssertEqual(lookup.first(named: $0, known: KnownProperty.none).map { lookup.value(of: $0).string }, "\"x\"") }
        }
        b.withPropertyLookup(of: b.head(1)) { lookup in
            Array("$os".utf8).withByteView { XCTAssertEqual(lookup.first(named: $0).map { lookup.value(of: $0).string }, "\"kept\"") }
        }
    }

    /// One growth writes what the separate appends wrote.
    func testAppendJoinedToScratchWritesWhatSeparateAppendsWrite() {
        var b = batch([#"{"type":"track","event":"e","time":1763700000000,"distinct_id":"abc","properties":{}}"#])
        let pieces = Array("\"a\"\"bb\"\"\"\"cccc\"".utf8)
        let starts: [Int32] = [0, 3, 7, 9, 15]
        for list in [[], [0], [2], [3, 0, 1], [1, 1]] {
            var expected = Array("\"$matched_rules\":[".utf8)
            for (k, n) in list.enumerated() {
                if k > 0 { expected.append(0x2C) }
                expected.append(contentsOf: pieces[Int(starts[n])..<Int(starts[n + 1])])
            }
            expected.append(0x5D)
            let start = b.scratchEnd
            Array("\"$matched_rules\":[".utf8).withByteView { head in
                pieces.withByteView {
                    b.appendJoinedToScratch(head: head, pieces: $0, list: list, separator: 0x2C, tail: 0x5D) { Int(starts[$0])..<Int(starts[$0 + 1]) }
                }
            }
            XCTAssertEqual(Array(b.scratch[start...]), expected, "\(list)")
            XCTAssertEqual(b.scratchEnd, start + expected.count)
        }
    }

    /// A hint: any index, in range or not, leaves the batch as it was.
    func testPrefetchIsOnlyAHint() {
        let b = batch([#"{"type":"track","event":"e","time":1763700000000,"distinct_id":"abc","properties":{"a":1}}"#])
        for i in [-1, 0, 1, 1000] { b.prefetch(event: i) }
        XCTAssertEqual(b.eventCount, 1)
        XCTAssertEqual(b.head(0).properties.count, 1)
    }
}
