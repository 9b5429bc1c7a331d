import XCTest
@testable import MaidianEvents

final class OutputWriterTests: XCTestCase {
    /// Every kind of edit `writeEnriched` splices (time rewrite before and after the properties, added
    /// properties into an object, into an empty object and as a new object, replaced and dropped
    /// properties, an escaped key, a profile event, a dropped event), written after bytes already in the
    /// buffer: the storage is reserved up front and cut to what was written.
    func testEnrichedEditsIntoReservedStorage() {
        var b = decodedBatch([
            #"{"type":"track","event":"a","distinct_id":"u\"1","time":5,"properties":{"x":1}}"#,
            #"{"type":"track","event":"b","distinct_id":"u2","properties":{},"time":7}"#,
            #"{"type":"track","event":"c","distinct_id":"u3","time":8}"#,
            #"{"type":"track","event":"d","distinct_id":"u4","time":9,"properties":{"x":"long","y":2,"z":true}}"#,
            #"{"type":"profile_set","distinct_id":"u5","time":10,"properties":{"p":1}}"#,
            #"{"type":"track","event":"f","distinct_id":"u6","time":11}"#,
            #"{"type":"track","event":"g","distinct_id":"u7","time":12}"#,
        ])
        XCTAssertEqual(b.events.count, 7)
        b.events[0].calibrated = true
        b.events[0].time = Int64.min
        b.addProperty(event: 0, name: "k") { JSONOut.appendInt(7, to: &$0) }
        b.addProperty(event: 0, name: "m") { $0.append(contentsOf: Array(#""é""#.utf8)) }
        b.events[1].calibrated = true
        b.events[1].time = 1_700_000_000_123
        b.addProperty(event: 1, name: "k") { JSONOut.appendInt(-3, to: &$0) }
        b.addProperty(event: 2, name: "n") { JSONOut.appendInt(Int64.max, to: &$0) }
        // Event 3: x replaced by a longer value, y dropped, z kept, and one added.
        let lo = b.propertyRange(3).lowerBound
        let r = b.scratchEnd
        b.appendScratch(Array(#""a much longer replacement value""#.utf8))
        b.replaceProperty(lo, with: Span(r, b.scratchEnd))
        b.dropProperty(lo + 1)
        b.markFixed(3)
        b.addProperty(event: 3, name: "q") { $0.append(contentsOf: Array("null".utf8)) }
        b.drop(5)

        var out = OutputBuffer()
        out.bytes.append(contentsOf: Array("earlier".utf8))
        let topic = out.topicIndex("events.enriched")
        OutputWriter.writeEnriched(b, topic: topic, into: &out)

        XCTAssertEqual(out.messages.count, 6)
        XCTAssertEqual(String(decoding: out.bytes[0..<7], as: UTF8.self), "earlier")
        let expected: [(String, String)] = [
            (#"u"1"#, #"{"type":"track","event":"a","distinct_id":"u\"1","time":-9223372036854775808,"properties":{"x":1,"k":7,"m":"é"}}"#),
            ("u2", #"{"type":"track","event":"b","distinct_id":"u2","properties":{"k":-3},"time":1700000000123}"#),
            ("u3", #"{"type":"track","event":"c","distinct_id":"u3","time":8,"properties":{"n":9223372036854775807}}"#),
            ("u4", #"{"type":"track","event":"d","distinct_id":"u4","time":9,"properties":{"x":"a much longer replacement value","z":true,"q":null}}"#),
            ("u5", #"{"type":"profile_set","distinct_id":"u5","time":10,"properties":{"p":1}}"#),
            ("u7", #"{"type":"track","event":"g","distinct_id":"u7","time":12}"#),
        ]
        for (i, (key, value)) in expected.enumerated() {
            XCTAssertEqual(out.keyString(i), key, "message \(i)")
            XCTAssertEqual(out.valueString(i), value, "message \(i)")
            XCTAssertEqual(out.messages[i].topic, topic)
        }
        // Nothing past the last message: the reserved tail was cut off.
        XCTAssertEqual(Int(out.messages[5].value.end), out.bytes.count)
        XCTAssertEqual(out.messages[0].key.start, 7)
    }

    /// A batch with no live event writes nothing and leaves the buffer as it was.
    func testEnrichedWithNoLiveEvents() {
        var b = decodedBatch([#"{"type":"track","event":"a","distinct_id":"u","time":5}"#])
        b.drop(0)
        var out = OutputBuffer()
        OutputWriter.writeEnriched(b, topic: out.topicIndex("e"), into: &out)
        XCTAssertEqual(out.messages.count, 0)
        XCTAssertEqual(out.bytes.count, 0)
    }
}
