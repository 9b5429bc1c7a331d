@testable import MaidianRules
import XCTest

/// The adapter MaidianStages still calls: the same answers as `JSONMembers`, plus the depth-first search.
final class MiniJSONTests: XCTestCase {
    func found(_ json: String, _ key: String, depthFirst: Bool = false) -> String? {
        let bytes = Array(json.utf8), k = Array(key.utf8)
        return bytes.withUnsafeBytes { b in
            let r = k.withUnsafeBytes { depthFirst ? MiniJSON.findDepthFirst($0, in: b) : MiniJSON.member($0, in: b) }
            if !depthFirst { XCTAssertEqual(r, MiniJSON.members(b).first { $0.key == k }?.value) }
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
}
