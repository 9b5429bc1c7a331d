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

    /// A refused value's dead letter must not depend on what the decoder decoded before. Both values end in bytes
    /// that are not a frame, so they take the streaming path; the first declares a size above the liar's, which left
    /// libzstd's stream buffer large enough that the liar (a frame producing more than it declares) failed as
    /// `bad_zstd` ("Destination buffer is too small") after it, and `too_large` alone. FuzzRecord found it
    /// (Fuzz/corpus/record/helper-reason-1, -2: the decoder beside a helper thread had another history).
    func testARefusedValueGetsTheSameDeadLetterWhateverCameBefore() {
        var l = RecordLimits()
        l.maxDecompressedBytes = 1 << 20
        let block = 128 << 10
        let garbage: [UInt8] = [0x01, 0x02, 0x03, 0x04, 0x05]
        let liar = rleFrame(windowLog: 19, declared: UInt32(l.maxDecompressedBytes - 62), blocks: Array(repeating: block, count: 10)) + garbage
        let big = rleFrame(windowLog: 21, declared: UInt32(l.maxDecompressedBytes + 100), blocks: Array(repeating: block, count: 8) + [100]) + garbage
        let alone = decode([liar], limits: l)
        let after = decode([big, liar], limits: l)
        XCTAssertEqual(alone.records[0].reason, .tooLarge)
        XCTAssertEqual(after.records[1].reason, alone.records[0].reason)
        XCTAssertEqual(after.details[Int(after.records[1].detail)], alone.details[Int(alone.records[0].detail)])
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

    /// An event's decoded facts as text (positions replaced by the bytes they point at), to compare decodings.
    func facts(_ b: EventBatch, _ e: Int) -> String {
        let ev = b.events[e]
        func str(_ sp: Span) -> String { b.jsonString(sp) ?? "-" }
        var t = "\(ev.status) \(ev.reason) \(ev.type) \(str(ev.typeName)) \(str(ev.eventName)) \(ev.eventNameEscaped) \(ev.eventNameIsString)"
        t += " \(str(ev.distinctID)) \(ev.distinctIDEscaped) \(ev.distinctIDKind) \(ev.distinctIDLength)"
        t += " \(ev.time) \(ev.clientTime) \(ev.timeKind) \(str(ev.timeValue)) \(ev.flushTime) \(ev.hasFlushTime) \(ev.trackID) \(ev.hasTrackID)"
        t += " \(ev.propertiesKind) \(str(ev.properties)) \(str(ev.project)) \(str(ev.lib)) \(str(ev.bytes))"
        t += " \(ev.propertyCount) \(ev.known) \(ev.propertyIssues) \(ev.longestString)"
        for k in Int(ev.firstProperty)..<Int(ev.firstProperty + ev.propertyCount) {
            let p = b.properties[k]
            t += " [\(str(p.name))=\(str(p.value)) \(p.kind) \(p.nameValid) \(p.nameEscaped) \(p.valueEscaped) \(p.arrayHasNonString) \(p.decodedLength)]"
        }
        return t
    }

    /// Events decoded together (the key cache predicting from earlier events) must decode exactly like each
    /// event alone in a fresh decoder.
    func assertSameAsAlone(_ events: [String], file: StaticString = #filePath, line: UInt = #line) {
        let together = decode([Array(("[" + events.joined(separator: ",") + "]").utf8)])
        XCTAssertEqual(together.records[0].status, .live, file: file, line: line)
        XCTAssertEqual(together.events.count, events.count, file: file, line: line)
        for (i, text) in events.enumerated() where i < together.events.count {
            let alone = decode([Array("[\(text)]".utf8)])
            guard alone.events.count == 1 else { XCTFail("not one event: \(text)", file: file, line: line); continue }
            XCTAssertEqual(facts(together, i), facts(alone, 0), text, file: file, line: line)
        }
    }

    func testKeyPredictionNeverChangesTheResult() {
        let base = "{\"_track_id\":12,\"type\":\"track\",\"event\":\"e\",\"time\":1700000000000,\"distinct_id\":\"u\",\"lib\":{\"$lib\":\"iOS\"},\"properties\":{\"$os\":\"iOS\",\"$model\":\"iPhone14,5\",\"$screen_width\":390,\"$wifi\":true},\"_flush_time\":1700000001000}"
        assertSameAsAlone([
            base, base,
            // A different key where the cache predicts one, a longer key with the predicted one as prefix,
            // whitespace around the colon, an escaped spelling of a known key, a key past the cached length.
            base.replacingOccurrences(of: "\"$model\"", with: "\"$modelx\""),
            base.replacingOccurrences(of: "\"time\"", with: "\"times\""),
            base.replacingOccurrences(of: "\"time\":", with: "\"time\" : "),
            base.replacingOccurrences(of: "\"$os\":", with: "\"$os\"\n:"),
            base.replacingOccurrences(of: "\"time\"", with: "\"\\u0074ime\""),
            base.replacingOccurrences(of: "\"$wifi\"", with: "\"$\\u0077ifi\""),
            base.replacingOccurrences(of: "\"$wifi\"", with: "\"$a_property_name_longer_than_the_cache\""),
            base.replacingOccurrences(of: "\"$wifi\"", with: "\"1bad\""),
            base, base.replacingOccurrences(of: "\"distinct_id\"", with: "\"distinct_iD\""), base,
            // Keys in another order, a missing key, keys that only differ in their last byte.
            "{\"properties\":{\"$wifi\":false,\"$os\":\"Android\"},\"time\":5,\"type\":\"track\",\"event\":\"x\",\"distinct_id\":\"v\"}",
            "{\"type\":\"track\",\"event\":\"x\",\"time\":5,\"properties\":{\"ab\":1,\"ac\":2,\"ab\":3}}",
            "{\"type\":\"track\",\"event\":\"x\",\"time\":5,\"properties\":{\"ac\":1,\"ab\":2,\"ac\":3}}",
            "{}", "{\"properties\":{}}", base,
        ])
    }

    func testKeyPredictionWithGeneratedEvents() {
        var rng = SeededLCG(seed: 7)
        let keys = ["_track_id", "type", "event", "time", "distinct_id", "lib", "properties", "_flush_time", "project", "login_id"]
        let props = ["$os", "$os_version", "$model", "$screen_width", "$wifi", "$element_content", "$app_version",
                     "$resume_from_background", "a", "b c", "$\\u0069p", "n"]
        let values = ["1", "-0", "12.5", "1e3", "\"s\"", "\"\\n\"", "true", "false", "null", "[\"a\",1]", "{\"x\":[1]}",
                      "\"é\"", "1234567890123456789", "1700000000000", "[]", "{}", "-12", "123456789012345",
                      "1234567890123456", "0", "-1.5e5", "\"a string of twenty-three\"", "\"twenty-four bytes long..\"",
                      // Long values (remembered per key): equal, changed at the end, changed in the middle.
                      "{\"$lib\":\"iOS\",\"$lib_version\":\"4.5.0\"}", "{\"$lib\":\"iOS\",\"$lib_version\":\"4.5.1\"}",
                      "{\"$lib\":\"iOX\",\"$lib_version\":\"4.5.0\"}", "\"abcdefghijklmnopqrstuvwxyz0123456789\"",
                      "[\"abcdefghijklmnopqrstuvwxyz\",\"0123\"]", "{\"$lib\":\"iOS\",\"$lib_version\":\"4.5.0\"} ",
                      "\"" + String(repeating: "x", count: 140) + "\""]
        var events: [String] = []
        for _ in 0..<600 {
            var parts: [String] = []
            for k in keys where rng.next() % 8 != 0 {
                var v: String
                if k == "properties" {
                    let ps = props.filter { _ in rng.next() % 3 != 0 }
                    let comma = rng.next() % 16 == 0 ? " ,\n" : ","
                    v = "{" + ps.map { "\"\($0)\":" + values[Int(rng.next() % UInt64(values.count))] }.joined(separator: comma) + "}"
                } else if k == "type" {
                    v = rng.next() % 4 == 0 ? "\"profile_set\"" : "\"track\""
                } else {
                    v = values[Int(rng.next() % UInt64(values.count))]
                }
                let colon = rng.next() % 16 == 0 ? " : " : ":"
                parts.append("\"\(k)\"" + colon + v)
            }
            if rng.next() % 3 == 0 { parts.shuffle(using: &rng) }
            events.append("{" + parts.joined(separator: rng.next() % 16 == 0 ? "\t, " : ",") + "}")
        }
        assertSameAsAlone(events)
    }

    func testRememberedValuesAreComparedInFull() {
        // A long `lib` value is taken without a scan when it has the same bytes as last time: a value that
        // differs anywhere, even without changing its length, must still be scanned (and here rejected).
        let good = "{\"$lib\":\"iOS\",\"$lib_version\":\"4.5.0\",\"$lib_method\":\"code\"}"
        let event = { (lib: String) in "{\"type\":\"track\",\"event\":\"e\",\"time\":1,\"distinct_id\":\"u\",\"lib\":\(lib)}" }
        for bad in [good.dropLast() + "]", "[" + good.dropFirst(), good.replacingOccurrences(of: "\"$lib_version\"", with: "\"$lib_version\u{01}"),
                    good.replacingOccurrences(of: "iOS", with: "i\\S")] {
            XCTAssertEqual(bad.utf8.count, good.utf8.count)
            let b = decode([Array("[\(event(good)),\(event(good)),\(event(bad))]".utf8)])
            XCTAssertEqual(b.records[0].reason, .badJSON, bad)
        }
        let b = decode([Array("[\(event(good)),\(event(good))]".utf8)])
        XCTAssertEqual(b.records[0].status, .live)
        XCTAssertEqual(b.jsonString(b.events[1].lib), good)
    }

    func testNumbersOfEveryLength() {
        for n in 1...21 {
            let digits = String((0..<n).map { Character(String(($0 % 9) + 1)) })
            for sign in ["", "-"] {
                let text = sign + digits
                let b = decode([Array("[{\"time\":\(text),\"_track_id\":\(text)}]".utf8)])
                guard let expected = Int64(text) else {
                    // An integer literal past 64 bits is bad JSON for the record (wire format §2).
                    XCTAssertEqual(b.records[0].reason, .badJSON, text)
                    continue
                }
                XCTAssertEqual(b.events[0].timeKind, .integer, text)
                XCTAssertTrue(b.events[0].hasTrackID, text)
                XCTAssertEqual(b.events[0].time, expected, text)
                XCTAssertEqual(b.events[0].trackID, expected, text)
            }
        }
        XCTAssertEqual(reason(Array("[{\"time\":9223372036854775808}]".utf8)), .badJSON)
        for (text, value, isInt) in [("0", 0, true), ("-0", 0, true), ("9223372036854775807", Int64.max, true),
                                     ("-9223372036854775808", Int64.min, true), ("9223372036854775808.0", 0, false),
                                     ("12.5", 0, false), ("7e2", 0, false), ("1000000000", 1_000_000_000, true)] as [(String, Int64, Bool)] {
            let b = decode([Array("[{\"time\":\(text)}]".utf8)])
            XCTAssertEqual(b.events[0].timeKind, isInt ? .integer : .other, text)
            if isInt { XCTAssertEqual(b.events[0].time, value, text) }
            XCTAssertEqual(b.jsonString(b.events[0].timeValue), text)
        }
        for bad in ["[01]", "[-]", "[1.]", "[1e]", "[1e+]", "[-a]", "[{\"time\":1x}]"] {
            XCTAssertEqual(reason(Array(bad.utf8)), .badJSON, bad)
        }
    }
}

/// A seeded linear congruential generator, so that generated tests are the same on every run.
struct SeededLCG: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return state ^ (state >> 29)
    }
}

/// Issue 13, class 7 and wire format §2 (revision 2): integers beyond 64 bits and numbers beyond a double, duplicate
/// member names.
extension RecordDecoderTests {
    func testNumbersBeyondADoubleAreBadJSON() {
        for bad in ["1e400", "-1e400", "1" + String(repeating: "0", count: 400), "1.8e308", "0.5e310", "9e99999999999999999999",
                    // Integer literals past 64 bits (the 30-digit ids of hostile uploads), however small as doubles.
                    "99999999999999999999", "-9223372036854775809", "123456789012345678901234567890"] {
            XCTAssertEqual(reason(Array("[{\"type\":\"track\",\"properties\":{\"n\":\(bad)}}]".utf8)), .badJSON, bad)
            XCTAssertEqual(reason(Array("[{\"time\":\(bad)}]".utf8)), .badJSON, bad)
        }
        // What a double holds (some of it not a 64-bit integer) stays valid.
        for ok in ["1e308", "1.7976931348623157e308", "99999999999999999999.0", "-9223372036854775809e0", "1e-400",
                   "0.000001e300", String(repeating: "9", count: 300) + ".5"] {
            let b = decode([Array("[{\"time\":\(ok),\"properties\":{\"n\":\(ok)}}]".utf8)])
            XCTAssertEqual(b.records[0].status, .live, ok)
            XCTAssertEqual(b.events.count, 1, ok)
        }
    }

    func duplicateReasons(_ events: [String]) -> [DeadLetterReason] {
        let b = decode([Array(("[" + events.joined(separator: ",") + "]").utf8)])
        XCTAssertEqual(b.records[0].status, .live)
        return b.events.map(\.reason)
    }

    func testDuplicateMemberNamesFailTheEvent() {
        let base = "\"type\":\"track\",\"event\":\"e\",\"time\":1700000000000,\"distinct_id\":\"u\""
        XCTAssertEqual(duplicateReasons([
            "{\"type\":\"profile_set\",\(base)}",  // "type" twice: the issue's example
            "{\(base),\"properties\":{\"a\":1,\"b\":2,\"a\":3}}",
            "{\(base),\"properties\":{\"a\":1,\"\\u0061\":2}}",  // the same name, escaped
            "{\(base),\"ev\\u0065nt\":\"f\"}",
            "{\(base),\"properties\":{\"\(String(repeating: "x", count: 40))\":1,\"\(String(repeating: "x", count: 40))\":2}}",
            "{\(base),\"properties\":{\"a\" :1,\"a\":2}}",  // a key the cache does not hold
            "{\(base),\"properties\":{\"a\":1},\"properties\":{\"b\":1}}",
            "{\(base),\"properties\":{\"a\":1,\"b\":{\"c\":1,\"c\":2}}}",  // nested objects are not checked
            "{\(base),\"properties\":{\"a\":1,\"\\u0062\":2,\"\(String(repeating: "x", count: 40))\":1}}",
            "{\(base)}",
        ]), [.duplicateKey, .duplicateKey, .duplicateKey, .duplicateKey, .duplicateKey, .duplicateKey, .duplicateKey,
             .none, .none, .none])
    }

    func testDuplicateCheckSurvivesCacheEvictions() {
        // More distinct names than the key cache has slots: slots are reused within one object, which must
        // neither hide a duplicate nor invent one.
        let names = (0..<2000).map { "k\($0)" }
        let distinct = "{\"properties\":{" + names.map { "\"\($0)\":1" }.joined(separator: ",") + "}}"
        let repeated = "{\"properties\":{" + (names + ["k7"]).map { "\"\($0)\":1" }.joined(separator: ",") + "}}"
        XCTAssertEqual(duplicateReasons([distinct, repeated, distinct]), [.none, .duplicateKey, .none])
    }
}

/// Issue 13, class 2: a batch's decoded bytes are bounded; the records past the bound move to the next batch.
extension RecordDecoderTests {
    func testBatchIsCutAtTheByteBound() {
        var limits = RecordLimits()
        limits.maxBatchBytes = 200_000
        let events = (0..<300).map { "{\"type\":\"track\",\"event\":\"e\",\"time\":1700000000000,\"distinct_id\":\"u\",\"_track_id\":\($0),\"properties\":{\"p\":\"\(String(repeating: "x", count: 60))\"}}" }
        let value = Array(("[" + events.joined(separator: ",") + "]").utf8)
        var batch = EventBatch()
        let t = batch.topicIndex("raw")
        for i in 0..<20 {
            value.withUnsafeBytes { v in
                Array("k\(i)".utf8).withUnsafeBytes { k in
                    batch.appendRecord(topic: t, partition: 1, offset: Int64(i), timestamp: 5, key: k, value: v, ip: nil, receivedAt: nil, ua: nil, project: nil)
                }
            }
        }
        let decoder = RecordDecoder(limits: limits)
        var seen: [Int64] = []
        var total = 0
        var rest = EventBatch()
        var batches = 0
        while !batch.records.isEmpty {
            let done = decoder.decodeAll(&batch)
            XCTAssertGreaterThan(done, 0)
            let perRecord = value.count + 300 * (MemoryLayout<Event>.stride + MemoryLayout<Property>.stride) + 32
            XCTAssertLessThan(batch.decodedBytes, limits.maxBatchBytes + perRecord)
            batch.moveRecords(from: done, to: &rest)
            XCTAssertEqual(batch.records.count, done)
            seen += batch.records.map(\.offset)
            total += batch.events.count
            for r in batch.records { XCTAssertEqual(batch.inputString(r.key), "k\(r.offset)") }
            batches += 1
            batch.reset()
            rest.moveRecords(from: 0, to: &batch)
            rest.reset()
        }
        XCTAssertGreaterThan(batches, 3)
        XCTAssertEqual(seen, Array(0..<20))
        XCTAssertEqual(total, 20 * 300)
    }
}

/// `source.decode_threads`: helper threads decompress zstd values while the decoding thread scans. The outcome
/// must be the one of decoding on one thread, record for record, for every kind of value and every batch bound.
final class RecordDecoderHelperThreadsTests: XCTestCase {
    /// Values of every kind the decoder tells apart, in a seeded random order.
    func mixedValues(count: Int, seed: UInt64) -> [[UInt8]] {
        var rng = SeededLCG(seed: seed)
        let c = ZstdCompressor()
        func events(_ n: Int, _ tag: Int) -> String {
            "[" + (0..<n).map { i in
                "{\"type\":\"track\",\"event\":\"e\(tag % 7)\",\"time\":\(1_700_000_000_000 + tag),\"distinct_id\":\"u\(tag)\",\"_track_id\":\(i),\"properties\":{\"$screen_name\":\"S\(i % 3)\",\"p\":\"\(String(repeating: "x", count: Int(rng.next() % 200)))\"}}"
            }.joined(separator: ",") + "]"
        }
        var values: [[UInt8]] = []
        for tag in 0..<count {
            let json = Array(events(1 + Int(rng.next() % 12), tag).utf8)
            switch rng.next() % 20 {
            case 0: values.append(json)  // raw JSON
            case 1: values.append(c.compress(Array(json.prefix(json.count / 2))) + c.compress(Array(json.dropFirst(json.count / 2))))  // two frames
            case 2:  // corrupt payload behind a valid header
                var z = c.compress(json)
                for i in stride(from: z.count / 2, to: z.count - 2, by: 3) { z[i] ^= 0x5A }
                values.append(z)
            case 3: values.append(Array(c.compress(json).dropLast(3)))  // truncated
            case 4: values.append(c.compress(Array("[{\"type\":\"track\",".utf8)))  // bad JSON inside good zstd
            case 5: values.append(c.compress(Array("{\"not\":\"an array\"}".utf8)))
            case 6: values.append(Array("GET / HTTP/1.1".utf8))  // bad encoding
            case 7: values.append(c.compress(Array(events(40, tag).utf8)))  // over the events limit below
            default: values.append(c.compress(json))
            }
        }
        return values
    }

    /// Decodes `values` in polls of `poll` records, cutting at the byte bound as a worker does, and describes
    /// every decoded batch: which records it took, and each record's and event's outcome and bytes.
    func decodeAll(_ values: [[UInt8]], threads: Int, limits: RecordLimits, poll: Int) -> [String] {
        var shared = 0
        return decodeAll(values, threads: threads, limits: limits, poll: poll, sharedBatches: &shared)
    }

    func decodeAll(_ values: [[UInt8]], threads: Int, limits: RecordLimits, poll: Int, sharedBatches: inout Int) -> [String] {
        let decoder = RecordDecoder(limits: limits, threads: threads)
        var out: [String] = []
        var batch = EventBatch()
        var rest = EventBatch()
        var i = 0
        while i < values.count || !rest.records.isEmpty {
            batch.reset()
            if !rest.records.isEmpty {
                rest.moveRecords(from: 0, to: &batch)
                rest.reset()
            } else {
                let t = batch.topicIndex("raw")
                for k in i..<min(i + poll, values.count) {
                    values[k].withUnsafeBytes { batch.appendRecord(topic: t, partition: 0, offset: Int64(k), timestamp: 0, key: nil, value: $0, ip: nil, receivedAt: nil, ua: nil, project: nil) }
                }
                i = min(i + poll, values.count)
            }
            let done = decoder.decodeAll(&batch)
            out.append("batch of \(batch.records.count), done \(done), properties \(batch.properties.count)")
            for r in 0..<done {
                let rec = batch.records[r]
                out.append("record \(rec.offset) \(rec.status) \(rec.reason) \(rec.status == .failed ? batch.details[Int(rec.detail)] : "") events \(rec.eventCount) json \(batch.jsonString(rec.json) ?? "-")")
                for e in 0..<Int(rec.eventCount) {
                    let ev = batch.events[Int(rec.firstEvent) + e]
                    out.append("  event \(ev.index) \(ev.status) \(ev.reason) \(ev.type) \(ev.time) \(batch.jsonString(ev.distinctID) ?? "-") \(batch.jsonString(ev.bytes) ?? "-")")
                }
            }
            batch.moveRecords(from: done, to: &rest)
        }
        sharedBatches = decoder.sharedBatches
        return out
    }

    func testHelperThreadsDecodeEveryKindOfValueLikeOneThread() {
        var limits = RecordLimits()
        limits.maxEventsPerRecord = 30
        for seed in [1, 2, 3] as [UInt64] {
            let values = mixedValues(count: 700, seed: seed)
            let one = decodeAll(values, threads: 1, limits: limits, poll: 250)
            for reason in ["bad_zstd", "bad_json", "too_large", "not_array", "bad_encoding"] {
                XCTAssertTrue(one.contains { $0.hasPrefix("record") && $0.contains(reason) }, "seed \(seed): a record fails with \(reason)")
            }
            for threads in [2, 3] {
                var shared = 0
                XCTAssertEqual(decodeAll(values, threads: threads, limits: limits, poll: 250, sharedBatches: &shared), one, "seed \(seed), \(threads) threads")
                XCTAssertGreaterThan(shared, 0, "the helpers' path ran")
            }
        }
    }

    func testHelperThreadsCutBatchesWhereOneThreadCuts() {
        let values = mixedValues(count: 400, seed: 9)
        // Many bounds: where a batch is cut depends on every byte counted, padding included.
        for bound in [3_000, 100_000] + Array(stride(from: 20_000, through: 60_000, by: 650)) {
            var limits = RecordLimits()
            limits.maxBatchBytes = bound
            let one = decodeAll(values, threads: 1, limits: limits, poll: 120)
            XCTAssertGreaterThan(one.filter { $0.hasPrefix("batch") }.count, 4, "the bound \(bound) cuts polls")
            var shared = 0
            XCTAssertEqual(decodeAll(values, threads: 2, limits: limits, poll: 120, sharedBatches: &shared), one, "bound \(bound)")
            // Under a small bound too few values are planned to share (the decoder then decodes them alone).
            if bound >= 20_000 { XCTAssertGreaterThan(shared, 0, "the helpers' path ran under the bound \(bound)") }
        }
    }

    func testHelperThreadsRespectTheDecompressedLimit() {
        var limits = RecordLimits()
        limits.maxDecompressedBytes = 900  // some single frames declare more: never planned, failed by the general path
        let values = mixedValues(count: 300, seed: 4)
        let one = decodeAll(values, threads: 1, limits: limits, poll: 100)
        XCTAssertTrue(one.contains { $0.contains("declare") || $0.contains("passes the limit") })
        XCTAssertEqual(decodeAll(values, threads: 2, limits: limits, poll: 100), one)
    }
}
