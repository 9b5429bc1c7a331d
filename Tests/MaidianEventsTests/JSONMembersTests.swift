@testable import MaidianEvents
import XCTest

final class JSONMembersTests: XCTestCase {
    /// Every member as (decoded key, value text), read from an array of exactly the object's bytes (no padding).
    func members(_ json: String) -> [(String, String)] {
        let bytes = Array(json.utf8)
        var out: [(String, String)] = []
        bytes.withUnsafeBytes { b in
            JSONMembers.forEach(in: b) { key, escaped, value in
                out.append((String(decoding: escaped ? unescapeJSONString(key) : Array(key), as: UTF8.self), String(decoding: bytes[value], as: UTF8.self)))
                return true
            }
        }
        return out
    }

    func member(_ json: String, _ key: String) -> String? {
        let bytes = Array(json.utf8)
        return bytes.withUnsafeBytes { b in
            Array(key.utf8).withUnsafeBytes { JSONMembers.member($0, in: b) }.map { String(decoding: bytes[$0], as: UTF8.self) }
        }
    }

    func testMembersInOrderWithValueRanges() {
        let json = #" { "a" : 1.5e3, "b\u0063": "x\"y", "n": null, "o": {"k": [1, {"z": "}"}]}, "t": true,"#
            + #" "e": "" } "#
        let got = members(json)
        XCTAssertEqual(got.map(\.0), ["a", "bc", "n", "o", "t", "e"])
        XCTAssertEqual(got.map(\.1), ["1.5e3", #""x\"y""#, "null", #"{"k": [1, {"z": "}"}]}"#, "true", #""""#])
        XCTAssertEqual(members("{}").count, 0)
        XCTAssertEqual(members("[1, 2]").count, 0, "not an object")
        XCTAssertEqual(members(#"{"a": 1, "b": }"#).map(\.0), ["a"], "stops at the first malformed value")
    }

    func testStopsWhenTheBodySaysSo() {
        let bytes = Array(#"{"a": 1, "b": 2, "c": 3}"#.utf8)
        var seen = 0
        bytes.withUnsafeBytes { b in JSONMembers.forEach(in: b) { _, _, _ in seen += 1; return seen < 2 } }
        XCTAssertEqual(seen, 2)
    }

    func testMemberIsTheFirstWithTheDecodedKey() {
        let json = #"{"a": 1, "b\u0063": "x", "bc": "y", "d": {"bc": 2}}"#
        XCTAssertEqual(member(json, "bc"), #""x""#)
        XCTAssertEqual(member(json, "a"), "1")
        XCTAssertEqual(member(json, "d"), #"{"bc": 2}"#)
        XCTAssertNil(member(json, "b"))
        XCTAssertNil(member(json, "e"))
        XCTAssertNil(member("[1]", "a"))
        XCTAssertEqual(member(#"{"$app_version":"3.2.1"}"#, "$app_version"), #""3.2.1""#, "compact, ends at the buffer's end")
    }

    func testStringAndQuoted() {
        func string(_ s: String) -> String? { Array(s.utf8).withUnsafeBytes { JSONMembers.string($0) } }
        XCTAssertEqual(string(#""Phon\u0065s \"x\"""#), #"Phones "x""#)
        XCTAssertEqual(string(#""""#), "")
        XCTAssertNil(string("12"))
        XCTAssertNil(string(#"""#))
        XCTAssertEqual(JSONOut.quoted("a\"b\\\n"), #""a\"b\\\n""#)
    }
}
