import MaidianEvents
import XCTest

/// `ByteView` as the one text type of matching: absent versus empty, and JSON members read through the scanner.
final class ByteViewTextTests: XCTestCase {
    func found(_ json: String, _ key: String, depthFirst: Bool = false) -> String? {
        let bytes = Array(json.utf8), k = Array(key.utf8)
        return bytes.withByteView { b in
            let r = k.withByteView { depthFirst ? b.jsonMemberDepthFirst($0) : b.jsonMember($0) }
            if !depthFirst {
                var first: Range<Int>?
                b.forEachJSONMember { key, escaped, value in
                    if (escaped ? key.unescaped : key.array) == k { first = value; return false }
                    return true
                }
                XCTAssertEqual(r, first)
            }
            return r.map { String(decoding: bytes[$0], as: UTF8.self) }
        }
    }

    func testMemberIsTheFirstWithTheDecodedKey() {
        let json = #"{"a": 1, "b\u0063": "x", "bc": "y", "d": {"bc": 2}}"#
        XCTAssertEqual(found(json, "bc"), #""x""#)
        XCTAssertEqual(found(json, "d"), #"{"bc": 2}"#)
        XCTAssertNil(found(json, "e"))
    }

    func testDepthFirstLooksAtTheObjectBeforeItsValues() {
        let json = #"{"x": {"k": {"v": 1}}, "y": {"v": 2}, "v": 3}"#
        XCTAssertEqual(found(json, "v", depthFirst: true), "3")
        XCTAssertEqual(found(json, "k", depthFirst: true), #"{"v": 1}"#)
        XCTAssertEqual(found(#"{"x": {"k": {"v": 1}}, "y": {"v": 2}}"#, "v", depthFirst: true), "1")
        XCTAssertNil(found(json, "z", depthFirst: true))
    }

    func testJSONStringDecodesEscapesAndRefusesOtherValues() {
        XCTAssertEqual(Array(#""a\nb\u00e9""#.utf8).withByteView { $0.jsonString }, "a\nbé")
        XCTAssertNil(Array("12".utf8).withByteView { $0.jsonString })
        XCTAssertNil(ByteView.absent.jsonString)
    }

    func testAbsentIsNotTheEmptyText() {
        let empty = [UInt8]()
        XCTAssertFalse(ByteView.absent.isPresent)
        empty.withByteView { e in
            XCTAssertTrue(e.isPresent)
            XCTAssertTrue(e.sameText([]))
            XCTAssertFalse(ByteView.absent.sameText([]))
            XCTAssertFalse(ByteView.absent.sameText(e))
            XCTAssertFalse(e.sameText(ByteView.absent))
            // `equals` compares bytes only: absent and empty have the same (none).
            XCTAssertTrue(ByteView.absent.equals(e))
        }
        Array("{\"k\":\"\"}".utf8).withByteView { b in
            let r = b.jsonMember(Array("k".utf8))!
            XCTAssertTrue(b[(r.lowerBound + 1)..<(r.upperBound - 1)].isPresent, "an empty string inside an arena is present")
        }
    }
}
