import XCTest
@testable import MaidianEvents

/// `PropertyFinder` finds what `EventBatch.propertyIndex(event:name:)` finds, name by name, in one pass:
/// known names by their byte, others by length and bytes, dropped properties skipped, and an event without
/// a known name's bit not searched for it.
final class PropertyFinderTests: XCTestCase {
    func batch(_ events: [String]) -> EventBatch { decodedBatch(events, partition: 0) }

    let events = [
        #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"u","properties":{"$screen_name":"Home","current_url":"/h","team":"a","$app_version":"1.0","t":1}}"#,
        #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"u","properties":{"team":"b","tea":"c","teams":"d","$element_path":"x/y"}}"#,
        #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"u","properties":{"current_url":"/only"}}"#,
        #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"u"}"#,
    ]

    /// Every name's index as the one-name lookup gives it, or -1.
    func expected(_ b: EventBatch, _ i: Int, _ names: [String]) -> [Int] {
        names.map { b.propertyIndex(event: i, name: Array($0.utf8)) ?? -1 }
    }

    func found(_ f: PropertyFinder, _ b: EventBatch, _ i: Int, wanted: UInt64 = .max) -> [Int] {
        b.withView { v in
            f.find(v, event: i, wanted: wanted)
            return (0..<f.count).map { f.found[$0] }
        }
    }

    func testFindsWhatTheOneNameLookupFinds() {
        // Known and other names, one asked twice, one no event has.
        let names = ["$screen_name", "current_url", "team", "$app_version", "$element_path", "team", "nope", "t"]
        let f = PropertyFinder(names)
        let b = batch(events)
        for i in 0..<b.eventCount {
            XCTAssertEqual(found(f, b, i), expected(b, i, names), "event \(i)")
        }
    }

    func testSkipsDroppedPropertiesAndTakesALaterCopy() {
        var b = batch([
            #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"u","properties":{"$screen_name":"A","team":"a","x":1}}"#,
        ])
        let names = ["$screen_name", "team"]
        let f = PropertyFinder(names)
        XCTAssertEqual(found(f, b, 0), expected(b, 0, names))
        let s = b.propertyIndex(event: 0, name: Array("$screen_name".utf8))!, t = b.propertyIndex(event: 0, name: Array("team".utf8))!
        b.dropProperty(s)
        b.dropProperty(t)
        b.markFixed(0)
        XCTAssertEqual(found(f, b, 0), [-1, -1])
        XCTAssertEqual(expected(b, 0, names), [-1, -1])
    }

    func testWantedAndAlternatives() {
        let names = ["$screen_name", "current_url", "team"]
        // current_url is read only when $screen_name has no text.
        let f = PropertyFinder(names, alternatives: [(0, 1)])
        let b = batch(events)
        let all = expected(b, 0, names)
        // Only what is wanted must be found; the alternative of a found name may be left.
        let r = found(f, b, 0, wanted: 0b101)
        XCTAssertEqual(r[0], all[0])
        XCTAssertEqual(r[2], all[2])
        XCTAssertEqual(found(f, b, 0, wanted: 0b010)[1], all[1])
        // Without $screen_name, current_url is found.
        XCTAssertEqual(found(f, b, 2, wanted: 0b011)[1], expected(b, 2, names)[1])
        XCTAssertEqual(found(f, b, 3, wanted: .max), [-1, -1, -1], "no properties")
    }

    func testMoreThan64NamesAreAllLookedFor() {
        var names = (0..<70).map { "p\($0)" }
        names[3] = "$screen_name"
        names[66] = "team"
        let f = PropertyFinder(names)
        let b = batch(events)
        for i in 0..<b.eventCount {
            XCTAssertEqual(found(f, b, i, wanted: 0), expected(b, i, names), "event \(i)")
        }
    }
}
