import XCTest
@testable import MaidianEvents

/// The access layer stages program against: fields as `BatchText`, lookups in a `TextSet`, properties by
/// name and by their `KnownProperty` byte, typed additions, roles by event name.
final class EventAccessTests: XCTestCase {
    /// A batch decoded from one record holding `events` (JSON objects).
    func batch(_ events: [String]) -> EventBatch { decodedBatch(events, partition: 3) }

    func added(_ b: EventBatch, _ i: Int, _ name: String) -> String? {
        let n = Array(name.utf8)
        guard let (span, _) = n.withUnsafeBufferPointer({ b.addedProperty(event: i, name: $0) }) else { return nil }
        return String(decoding: b.scratch[Int(span.start)..<Int(span.end)], as: UTF8.self)
    }

    func testFieldsAndTextSetLookupDecodeEscapes() {
        let b = batch([
            #"{"type":"track","event":"MyScreen","time":1763700000000,"distinct_id":"qa\u002d1","properties":{}}"#,
            #"{"type":"track","event":"x","time":1763700000000,"distinct_id":"qa-2","properties":{}}"#,
            #"{"type":"track","event":"x","time":1763700000000,"distinct_id":7,"properties":{}}"#,
        ])
        XCTAssertEqual(b.eventCount, 3)
        XCTAssertTrue(b.isLiveTrack(0))
        XCTAssertEqual(b.partition(of: 0), 3)
        XCTAssertTrue(b.distinctID(0).escaped)
        XCTAssertEqual(b.string(b.distinctID(0)), "qa-1", "decoded")
        XCTAssertFalse(b.distinctID(2).isPresent, "not a string")
        let ids = TextSet(["qa-2", "qa-1", "qa-2"])
        XCTAssertEqual(b.index(of: b.distinctID(0), in: ids), 1, "an escaped id is compared decoded")
        XCTAssertEqual(b.index(of: b.distinctID(1), in: ids), 0, "a repeated member keeps its first number")
        XCTAssertNil(b.index(of: b.distinctID(2), in: ids))
        XCTAssertNil(ids.index(of: "qa-"))
        XCTAssertEqual(ids.count, 3)
    }

    func testPropertiesByNameAndByKnownByte() {
        var b = batch([
            #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"u","properties":{"$model":"iPhone12,1","team":"a","$screen_width":390}}"#,
        ])
        let model = b.propertyIndex(event: 0, .model)
        XCTAssertNotNil(model)
        XCTAssertEqual(model, b.propertyIndex(event: 0, name: Array("$model".utf8)))
        XCTAssertEqual(b.string(b.stringValue(ofProperty: model!)), "iPhone12,1")
        XCTAssertNil(b.propertyIndex(event: 0, .manufacturer))
        XCTAssertTrue(b.hasProperty(event: 0, name: Array("team".utf8)))
        var seen: [UInt8] = []
        b.forEachKnownProperty(event: 0) { _, known in seen.append(known); return true }
        XCTAssertEqual(seen, [UInt8(KnownProperty.model.rawValue), UInt8(KnownProperty.screenWidth.rawValue)])
        // A dropped property is not found, by name or by byte.
        b.dropProperty(model!)
        b.markFixed(0)
        XCTAssertNil(b.propertyIndex(event: 0, .model))
        XCTAssertFalse(b.hasProperty(event: 0, name: Array("$model".utf8)))
    }

    func testTypedAdditions() {
        var b = batch([#"{"type":"track","event":"e","time":1763700000000,"distinct_id":"u","properties":{}}"#])
        b.addProperty(event: 0, name: Array("s".utf8), string: "say \"hi\"\n")
        b.addProperty(event: 0, name: Array("n".utf8), integer: -12)
        b.addProperty(event: 0, name: Array("t".utf8), bool: true)
        b.addProperty(event: 0, name: Array("j".utf8), json: Array("[1,{\"a\":2}]".utf8))
        b.addProperty(event: 0, .clientTime, integer: 5)
        XCTAssertEqual(added(b, 0, "s"), #""say \"hi\"\n""#)
        XCTAssertEqual(added(b, 0, "n"), "-12")
        XCTAssertEqual(added(b, 0, "t"), "true")
        XCTAssertEqual(added(b, 0, "j"), "[1,{\"a\":2}]")
        XCTAssertEqual(added(b, 0, "$client_time"), "5")
        b.setTime(0, 1763700001000)
        XCTAssertEqual(b.time(0), 1763700001000)
        b.setFlag(0, EventFlag.late)
        XCTAssertTrue(b.hasFlag(0, EventFlag.late))
        XCTAssertFalse(b.hasFlag(0, EventFlag.tooLate))
    }

    func testRolesByEventName() {
        var roles = EventRoles()
        roles.pageEnter = ["MyScreen"]
        let table = roles.table
        let b = batch([
            #"{"type":"track","event":"MyScreen","time":1763700000000,"distinct_id":"u"}"#,
            #"{"type":"track","event":"$AppViewScreen","time":1763700000000,"distinct_id":"u"}"#,
            #"{"type":"track","event":"$AppClick","time":1763700000000,"distinct_id":"u"}"#,
        ])
        XCTAssertEqual(table.role(ofEvent: 0, in: b), .pageEnter)
        XCTAssertNil(table.role(ofEvent: 1, in: b), "replaced by the custom name")
        XCTAssertEqual(table.role(ofEvent: 2, in: b), .click, "a default kept")
        XCTAssertEqual(EventRoles().problems().count, 0)
        roles.click = ["MyScreen", ""]
        roles.pageLeave = []
        XCTAssertEqual(roles.problems().map(\.role), [.click, .click])
    }

    /// The accessors for the fields windows, match and the tools read (they replace reading `Event`'s storage).
    func testFieldAccessorsAgreeWithTheDecodedEvent() {
        let b = batch([
            #"{"type":"track","event":"Ev","time":1763700000000,"_track_id":77,"distinct_id":"u1","anonymous_id":"dev","lib":{"$lib":"iOS"},"properties":{"$model":"m","x":1}}"#,
            #"{"type":"profile_set","time":1763700000000,"distinct_id":"u2","properties":{}}"#,
        ])
        XCTAssertEqual(b.eventType(0), .track)
        XCTAssertEqual(b.eventType(1), .profileSet)
        XCTAssertEqual(b.trackID(0), 77)
        XCTAssertNil(b.trackID(1))
        XCTAssertEqual(b.eventNameHash(0), b.withBytes(of: b.eventName(0)) { $0.hash })
        XCTAssertEqual(b.eventNameHash(1), 0, "no name")
        XCTAssertEqual(b.distinctIDHash(1), b.withBytes(of: b.distinctID(1)) { $0.hash })
        XCTAssertEqual(b.anonymousIDHash(0), "dev".withByteView { $0.hash })
        XCTAssertEqual(b.anonymousIDHash(1), 0)
        XCTAssertEqual(b.string(b.lib(0)), #"{"$lib":"iOS"}"#)
        XCTAssertFalse(b.lib(1).isPresent)
        XCTAssertEqual(b.propertyRange(0).count, 2)
        XCTAssertEqual(b.propertyRange(0).first, b.propertyIndex(event: 0, .model))
        XCTAssertTrue(b.propertyRange(1).isEmpty)
        XCTAssertTrue(b.sent(0, .model))
        XCTAssertFalse(b.sent(0, .manufacturer))
        var m = b
        XCTAssertFalse(m.hasFixes(0))
        m.markFixed(0)
        XCTAssertTrue(m.hasFixes(0))
        XCTAssertFalse(m.hasFixes(1))
        m.hits.append(MatchHit(id: .absent, metric: .pv))
        m.hits.append(MatchHit(id: .absent, metric: .click))
        m.setHitRange(1, 0 ..< 2)
        XCTAssertEqual(m.hitRange(1), 0 ..< 2)
        XCTAssertEqual(m.hitRange(0).count, 0)
    }

    /// The readers and writers stages use instead of the arenas: entries by index, property fixes, byte
    /// compares and copies of JSON spans, scratch fragments, match hits.
    func testStageReadersAndWritersWorkThroughTheLayer() {
        var b = batch([
            #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"u","project":"p-q","properties":{"a\u0062":"xyz","n":390,"l":[1,"s"]}}"#,
        ])
        XCTAssertEqual(b.recordCount, 1)
        XCTAssertEqual(b.record(0).partition, 3)
        XCTAssertEqual(b.event(0).time, 1763700000000)
        let r = b.propertyRange(0)
        XCTAssertEqual(r.count, 3)
        let ab = r.lowerBound, n = r.lowerBound + 1, l = r.lowerBound + 2
        XCTAssertEqual(b.string(b.name(ofProperty: ab)), "ab", "the name decoded")
        XCTAssertEqual(b.withBytes(of: b.value(ofProperty: ab)) { $0.string }, #""xyz""#, "the value as written")
        XCTAssertTrue(b.jsonEqual(b.property(ab).value, #""xyz""#))
        XCTAssertTrue(b.jsonEqual(b.property(ab).value, Array(#""xyz""#.utf8)))
        XCTAssertFalse(b.jsonEqual(b.property(ab).value, #""xyw""#))
        XCTAssertFalse(b.jsonEqual(b.property(ab).value, "\"xy"), "a prefix is not equal")
        XCTAssertEqual(b.jsonByte(at: Int(b.property(n).value.start)), UInt8(ascii: "3"))
        var copy: [UInt8] = [0x5B]
        b.appendJSONBytes(b.property(n).value, to: &copy)
        XCTAssertEqual(copy, Array("[390".utf8))

        // Fixes: a replacement written into the scratch arena, a drop.
        let start = b.scratchEnd
        b.appendScratch(0x5B)
        b.appendScratch(json: b.stringValue(ofProperty: ab).span)
        b.appendScratch(bytesOf: Array(",9]".utf8), 1 ..< 3)
        b.appendScratch(Array("]".utf8))
        b.replaceProperty(l, with: Span(start, b.scratchEnd))
        b.dropProperty(n)
        b.markFixed(0)
        XCTAssertTrue(b.hasFixes(0))
        XCTAssertEqual(b.property(l).fix, .replace)
        XCTAssertEqual(b.withBytes(of: b.value(ofProperty: l)) { $0.string }, "[xyz9]]")
        XCTAssertFalse(b.value(ofProperty: n).isPresent, "a dropped property has no value")
        XCTAssertNil(b.propertyIndex(event: 0, name: Array("n".utf8)))

        // A fragment from a JSON string's raw content keeps its escapes.
        let project = b.fragment("$project", jsonStringContent: b.event(0).project)
        XCTAssertEqual(b.withScratch { $0[project].string }, #""$project":"p-q""#)
        let escaped = b.fragment("$x", jsonStringContent: b.property(ab).name)
        XCTAssertEqual(b.withScratch { $0[escaped].string }, #""$x":"a\u0062""#)

        // Match hits: ids in the scratch arena, contents in either arena.
        let id = b.scratchEnd
        b.appendScratch(Array(#""r1""#.utf8))
        let content = b.property(ab).value
        b.hits.append(MatchHit(id: Span(id, b.scratchEnd), metric: .click, content: content))
        b.hits.append(MatchHit(id: Span(id, b.scratchEnd), metric: .pv))
        b.setHitRange(0, 0 ..< 2)
        XCTAssertEqual(b.hitRange(0), 0 ..< 2)
        XCTAssertEqual(b.hit(1).metric, .pv)
        XCTAssertEqual(b.withBytes(of: b.id(ofHit: 0)) { $0.string }, #""r1""#)
        XCTAssertEqual(b.withBytes(of: b.content(ofHit: 0)) { $0.jsonString }, "xyz")
        XCTAssertFalse(b.content(ofHit: 1).isPresent)
    }

    /// What tools use to keep decoded batches and reuse copies of them: counts, room, and the arenas a kept
    /// batch still reads.
    func testKeptBatchReadsAsBeforeAndCountsWhatStagesAdd() {
        var b = batch([#"{"type":"track","event":"e","time":1763700000000,"distinct_id":"u","properties":{"team":"a"}}"#])
        XCTAssertEqual(b.addedPropertyCount, 0)
        b.addProperty(event: 0, name: Array("n".utf8), integer: 1)
        b.addProperty(event: 0, name: Array("m".utf8), integer: 2)
        XCTAssertEqual(b.addedPropertyCount, 2)
        var kept = b
        kept.keepDecodedOnly()
        XCTAssertEqual(kept.json.count, b.jsonCount, "the JSON arena's spare room is gone")
        XCTAssertTrue(kept.input.isEmpty)
        XCTAssertEqual(kept.string(kept.eventName(0)), "e")
        XCTAssertEqual(kept.string(kept.stringValue(ofProperty: kept.propertyIndex(event: 0, name: Array("team".utf8))!)), "a")
        kept.reserveRoom(events: 100, added: 50, scratchBytes: 1000)
        XCTAssertGreaterThanOrEqual(kept.events.capacity, 100)
        XCTAssertGreaterThanOrEqual(kept.added.capacity, 50)
        XCTAssertGreaterThanOrEqual(kept.scratch.capacity, b.scratch.count + 1000)
        XCTAssertEqual(b.json.count, kept.json.count + (b.json.count - b.jsonCount), "the original is untouched")
    }
}
