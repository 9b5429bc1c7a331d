import XCTest
@testable import MaidianEvents

/// `BatchView`: the hot-path readers of a batch (texts of properties and of added properties, `lib`'s
/// `$app_version`, the user's hash, byte views of fields), checked against the decoded text.
final class BatchViewTests: XCTestCase {
    func batch(_ events: [String]) -> EventBatch { decodedBatch(events, partition: 1) }

    func decoded(_ t: BatchView.Text?) -> String? {
        guard let t else { return nil }
        var out: [UInt8] = []
        t.append(to: &out)
        let viaBody = t.withDecoded { $0.array }
        XCTAssertEqual(out, viaBody, "append and withDecoded agree")
        return String(decoding: out, as: UTF8.self)
    }

    func index(_ b: EventBatch, _ name: String) -> Int { b.propertyIndex(event: 0, name: Array(name.utf8)) ?? -1 }

    func testTextsOfPropertiesByKind() {
        var b = batch([
            #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"u","properties":{"s":"plain","e":"a\"b\u00e9","n":-12.5,"t":true,"z":null,"o":{"x":1},"empty":""}}"#,
        ])
        b.withView { v in
            XCTAssertEqual(decoded(v.text(ofProperty: index(b, "s"))), "plain")
            XCTAssertFalse(v.text(ofProperty: index(b, "s"))!.escaped)
            XCTAssertTrue(v.text(ofProperty: index(b, "e"))!.escaped)
            XCTAssertEqual(decoded(v.text(ofProperty: index(b, "e"))), "a\"bé")
            XCTAssertEqual(decoded(v.text(ofProperty: index(b, "n"))), "-12.5", "a number's JSON text")
            XCTAssertEqual(decoded(v.text(ofProperty: index(b, "t"))), "true")
            XCTAssertNil(v.text(ofProperty: index(b, "z")))
            XCTAssertNil(v.text(ofProperty: index(b, "o")))
            XCTAssertNil(v.text(ofProperty: -1))
            XCTAssertEqual(decoded(v.text(ofProperty: index(b, "empty"))), "")
            var out: [UInt8] = [0x3E]
            XCTAssertTrue(v.appendText(ofProperty: index(b, "s"), to: &out))
            XCTAssertFalse(v.appendText(ofProperty: index(b, "o"), to: &out))
            XCTAssertEqual(String(decoding: out, as: UTF8.self), ">plain")
        }
        // A replaced value is read from the scratch arena.
        let k = index(b, "s")
        let start = b.scratchEnd
        b.appendScratch(Array(#""fixed\n""#.utf8))
        b.replaceProperty(k, with: Span(start, b.scratchEnd))
        b.withView { v in XCTAssertEqual(decoded(v.text(ofProperty: k)), "fixed\n") }
    }

    func testTextsOfAddedProperties() {
        var b = batch([
            #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"u","properties":{}}"#,
            #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"u","properties":{}}"#,
        ])
        b.addProperty(event: 0, name: Array("$province".utf8), string: "Zhe\"jiang")
        b.addProperty(event: 0, name: Array("level".utf8), integer: 42)
        b.addProperty(event: 0, name: Array("vip".utf8), bool: false)
        b.addProperty(event: 0, name: Array("tags".utf8), json: Array(#"["a"]"#.utf8))
        b.withView { v in
            func added(_ name: String, _ i: Int) -> String? {
                Array(name.utf8).withByteView { decoded(v.text(ofAdded: $0, event: i)) }
            }
            XCTAssertEqual(added("$province", 0), "Zhe\"jiang")
            XCTAssertEqual(added("level", 0), "42")
            XCTAssertEqual(added("vip", 0), "false")
            XCTAssertNil(added("tags", 0), "an array has no text")
            XCTAssertNil(added("$city", 0))
            XCTAssertNil(added("level", 1), "added to event 0 only")
        }
    }

    func testLibAppVersionDistinctIDAndUserHash() {
        let b = batch([
            #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"qa\u002d1","lib":{"$lib":"iOS", "$app_version" : "3.2\u002e0"},"properties":{}}"#,
            #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"qa-1","lib":{"$lib":"iOS","v":"$app_version"},"properties":{}}"#,
            #"{"type":"track","event":"e","time":1763700000000,"distinct_id":"other","properties":{}}"#,
        ])
        b.withView { v in
            var out: [UInt8] = []
            XCTAssertTrue(v.appendLibAppVersion(event: 0, to: &out))
            XCTAssertEqual(String(decoding: out, as: UTF8.self), "3.2.0")
            out = []
            XCTAssertFalse(v.appendLibAppVersion(event: 1, to: &out), "the name as a value is no key")
            XCTAssertFalse(v.appendLibAppVersion(event: 2, to: &out), "no lib")
            XCTAssertEqual(out, [])
            var id: [UInt8] = []
            v.appendDistinctID(event: 0, to: &id)
            XCTAssertEqual(String(decoding: id, as: UTF8.self), "qa-1")
            XCTAssertEqual(v.userHash(event: 0), v.userHash(event: 1), "an escaped id hashes as its decoded text")
            XCTAssertEqual(v.userHash(event: 1), Array("qa-1".utf8).withByteView { $0.hash })
            XCTAssertNotEqual(v.userHash(event: 1), v.userHash(event: 2))
            XCTAssertEqual(v.libBytes(0).string, #"{"$lib":"iOS", "$app_version" : "3.2\u002e0"}"#)
            XCTAssertTrue(v.libBytes(2).isEmpty)
        }
    }

    func testEventFieldsByIndexMatchTheBatchAccessors() {
        let b = batch([
            #"{"type":"track","event":"MyScreen","time":1763700000001,"distinct_id":"u","anonymous_id":"dev","properties":{"a":1,"b":2}}"#,
            #"{"type":"profile_set","time":1763700000002,"distinct_id":"u","properties":{"c":3}}"#,
        ])
        b.withView { v in
            XCTAssertEqual(v.eventCount, b.eventCount)
            XCTAssertEqual(v.recordCount, 1)
            XCTAssertEqual(v.record(0).partition, 1)
            for i in 0..<b.eventCount {
                XCTAssertEqual(v.isLiveTrack(i), b.isLiveTrack(i))
                XCTAssertEqual(v.time(i), b.time(i))
                XCTAssertEqual(v.hitRange(i), b.hitRange(i))
                XCTAssertEqual(v.propertyRange(i).count, Int(b.events[i].propertyCount))
                XCTAssertEqual(v.eventNameHash(i), v.eventNameBytes(i).hash)
            }
            XCTAssertEqual(v.eventNameBytes(0).string, "MyScreen")
            XCTAssertTrue(v.eventNameBytes(1).isEmpty)
            XCTAssertEqual(v.anonymousIDHash(0), Array("dev".utf8).withByteView { $0.hash })
            XCTAssertEqual(v.anonymousIDHash(1), 0)
            let a = v.propertyRange(0).lowerBound
            XCTAssertEqual(v.jsonBytes(v.property(a).name).string, "a")
        }
    }
}
