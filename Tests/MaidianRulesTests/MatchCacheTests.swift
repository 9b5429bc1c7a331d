import MaidianEvents
@testable import MaidianRules
import XCTest

final class MatchCacheTests: XCTestCase {
    let rules = """
    version: 1
    pages:
      - {id: new_home, screen: Home, app_versions: [">=3.0"]}
      - {id: any_home, screen: Home}
    elements:
      - {id: empty_content, path: "W-V", type: UIButton, content: ""}
      - {id: any_button, path: "W-V", type: UIButton}
    """

    /// Matches `fields` (nil: absent) through `cache` and directly; returns the hits' ids.
    func hits(_ cache: MatchCache, _ role: EventRole, _ fields: [WritableKeyPath<RawFacts, ByteView>: String?]) -> [String] {
        var storage: [[UInt8]] = fields.values.map { Array(($0 ?? "").utf8) + [0] }
        var direct: [Int] = [], cached: [Int] = [], buffer: [UInt8] = []
        return storage.withUnsafeMutableBufferPointer { s -> [String] in
            var f = RawFacts()
            for (n, (path, value)) in fields.enumerated() where value != nil {
                f[keyPath: path] = s[n].withUnsafeBufferPointer { ByteView($0.baseAddress!, $0.count - 1) }
            }
            cache.matcher.matchRaw(role: role, facts: f, into: &direct, buffer: &buffer)
            cache.match(role: role, facts: f, into: &cached, buffer: &buffer)
            XCTAssertEqual(cached, direct)
            return cached.map { cache.matcher.id(of: $0) }
        }
    }

    func testVersionFromLibOnlyWithoutAppVersion() throws {
        let cache = MatchCache(matcher: try RuleMatcher(rules: RulesFile.parse(rules)), slots: 64)
        for _ in 0..<2 {
            XCTAssertEqual(hits(cache, .pageEnter, [\.screenName: "Home", \.lib: #"{"$app_version":"3.1"}"#]), ["new_home", "any_home"])
            XCTAssertEqual(hits(cache, .pageEnter, [\.screenName: "Home", \.lib: #"{"$app_version":"2.9"}"#]), ["any_home"])
            XCTAssertEqual(hits(cache, .pageEnter, [\.screenName: "Home", \.appVersion: "2.0", \.lib: #"{"$app_version":"3.1"}"#]), ["any_home"])
            XCTAssertEqual(hits(cache, .pageEnter, [\.screenName: "Home", \.appVersion: "3.0", \.lib: #"{"$app_version":"1.0"}"#]), ["new_home", "any_home"])
        }
    }

    func testAbsentAndEmptyFieldsAreDifferentKeys() throws {
        let cache = MatchCache(matcher: try RuleMatcher(rules: RulesFile.parse(rules)), slots: 64)
        for _ in 0..<2 {
            XCTAssertEqual(hits(cache, .click, [\.elementPath: "W-V", \.elementType: "UIButton", \.content: ""]), ["empty_content", "any_button"])
            XCTAssertEqual(hits(cache, .click, [\.elementPath: "W-V", \.elementType: "UIButton"]), ["any_button"])
            XCTAssertEqual(hits(cache, .click, [\.elementPath: "W-V", \.elementType: "UIButto"]), [])
            XCTAssertEqual(hits(cache, .pageEnter, [\.elementPath: "W-V", \.elementType: "UIButton"]), [])
        }
    }

    func testWithoutSlotsEveryEventIsMatched() throws {
        let cache = MatchCache(matcher: try RuleMatcher(rules: RulesFile.parse(rules)), slots: 0)
        XCTAssertEqual(hits(cache, .pageEnter, [\.screenName: "Home", \.appVersion: "3.0"]), ["new_home", "any_home"])
        XCTAssertEqual(hits(cache, .pageEnter, [\.screenName: "Home", \.appVersion: "3.0"]), ["new_home", "any_home"])
    }

    /// The cache reads the fields where they are (no copy): keys that differ only in a field's last byte, at
    /// every length from 1 to 40 (the word-wise hash's tail), or only in where one field ends and the next
    /// begins, are different keys. Each field is in an allocation of exactly its size (no slack after it).
    /// Every answer through the cache must equal the matcher's own, hits and misses alike.
    func testKeysReadInPlaceDifferInTheLastByteAndAtFieldBoundaries() throws {
        var yaml = "version: 1\npages:\n"
        for n in 1...40 { yaml += "  - {id: p\(n), screen: \"\(String(repeating: "a", count: n - 1))b\"}\n" }
        yaml += "  - {id: split, screen: xy, page_path: z}\n"
        let cache = MatchCache(matcher: try RuleMatcher(rules: RulesFile.parse(yaml)), slots: 64)
        var allocations: [UnsafeMutablePointer<UInt8>] = []
        defer { allocations.forEach { $0.deallocate() } }
        func exact(_ s: String) -> ByteView {
            let b = Array(s.utf8)
            let p = UnsafeMutablePointer<UInt8>.allocate(capacity: max(b.count, 1))
            p.initialize(from: b, count: b.count)
            allocations.append(p)
            return ByteView(p, b.count)
        }
        func ids(_ screen: String, _ path: String? = nil) -> [String] {
            var f = RawFacts()
            f.screenName = exact(screen)
            if let path { f.pagePath = exact(path) }
            var direct: [Int] = [], cached: [Int] = [], buffer: [UInt8] = []
            cache.matcher.matchRaw(role: .pageEnter, facts: f, into: &direct, buffer: &buffer)
            cache.match(role: .pageEnter, facts: f, into: &cached, buffer: &buffer)
            XCTAssertEqual(cached, direct, screen)
            return cached.map { cache.matcher.id(of: $0) }
        }
        for _ in 0..<2 {
            for n in 1...40 {
                let stem = String(repeating: "a", count: n - 1)
                XCTAssertEqual(ids(stem + "b"), ["p\(n)"])
                XCTAssertEqual(ids(stem + "c"), [])
                XCTAssertEqual(ids(stem + "b"), ["p\(n)"])
            }
            XCTAssertEqual(ids("xy", "z"), ["split"])
            XCTAssertEqual(ids("x", "yz"), [])
            XCTAssertEqual(ids("xyz", ""), [])
            XCTAssertEqual(ids("xy", "z"), ["split"])
        }
    }
}
