import Foundation
import MaidianPipeline
@testable import MaidianRules
import XCTest

final class RegexSetTests: XCTestCase {
    let cell = "UIWindow-UITransitionView-UIView-UITableView-UITableViewCell(1-2)_[null]"

    func testSeveralPatternsMatchOneIdentifier() throws {
        let set = try RegexSet([
            #"^UIWindow-.*-UITableViewCell\(1-\d+\)_\[.*\]$"#,   // 0: matches
            #"UIButton"#,                                          // 1: no
            #"-UITableView-"#,                                     // 2: matches, unanchored
            #"\(\d+-2\)"#,                                         // 3: matches
            #"^UITableView"#,                                      // 4: no, anchored
            #"_\[null\]$"#,                                        // 5: matches
        ])
        XCTAssertEqual(set.count, 6)
        XCTAssertEqual(set.matching(cell), [0, 2, 3, 5])
        XCTAssertEqual(set.matching("W-UIButton(0)_[Buy]"), [1])
    }

    func testNoPatternMatches() throws {
        let set = try RegexSet([#"^UIWindow-.*-UIImageView\(0\)_\[null\]$"#, "UICollectionViewCell", #"\(2-\d+\)"#])
        XCTAssertEqual(set.matching(cell), [])
        XCTAssertFalse(set.matches(cell))
        XCTAssertEqual(try RegexSet([]).matching(cell), [], "an empty set scans nothing")
        XCTAssertEqual(set.matching(""), [])
    }

    func testDialect() throws {
        XCTAssertTrue(try RegexSet([#"^a\d+$"#]).matches("a12"))
        XCTAssertFalse(try RegexSet([#"^a\d+$"#]).matches("a1b"))
        XCTAssertTrue(try RegexSet([#"^\w+\s\S$"#]).matches("ab_1 x"))
        XCTAssertTrue(try RegexSet(["^[[:digit:]]{2,3}$"]).matches("123"))
        XCTAssertTrue(try RegexSet(["^a.b$"]).matches("a\nb"), "dot matches a newline")
        XCTAssertTrue(try RegexSet(["^(Sale|Books)$"]).matches("Books"))
        XCTAssertFalse(try RegexSet(["sale"]).matches("Sale"), "case-sensitive")
        XCTAssertTrue(try RegexSet(["x*"]).matches("abc"), "a pattern that can match empty matches anything")
        XCTAssertTrue(try RegexSet([".*"]).matches(""))
        XCTAssertTrue(try RegexSet(["^.{2}$"]).matches("é"), "bytes, not characters: é is two")
        XCTAssertTrue(try RegexSet(["手机壳"]).matches("x_[手机壳]"))
        XCTAssertTrue(try RegexSet([#"\x00"#]).matches("a\u{0}b"), "the whole identifier is scanned, NUL included")
    }

    func testRejectedPatterns() {
        func message(_ p: String) -> String? {
            do {
                try RegexSet.check(p)
                return nil
            } catch {
                return "\(error)"
            }
        }
        XCTAssertEqual(message("a(b"), "Missing close parenthesis for group started at index 1.")
        XCTAssertEqual(message(#"(a)\1"#), "Back-references are unsupported.")
        XCTAssertEqual(message("(?<=a)b"), "Zero-width assertions are not supported.")
        XCTAssertNotNil(message("a\u{0}b"))
        XCTAssertNil(message(#"^UIWindow-.*-UITableViewCell\(1-\d+\)_\[.*\]$"#))
        do {
            _ = try RegexSet(["a", "b", "c[", "d"])
            XCTFail("compiled")
        } catch let e as RegexSet.CompileError {
            XCTAssertEqual(e.index, 2, "the bad pattern is named")
        } catch {
            XCTFail("\(error)")
        }
    }

    func testBadRegexLocatedInRulesFile() {
        let text = "elements:\n  - id: ok\n    identifier_regex: '^a\\d+$'\n  - id: bad\n    identifier_regex: '(a)\\1'\n"
        do {
            _ = try RulesFile.parse(text, file: "r.yaml")
            XCTFail("loaded")
        } catch {
            XCTAssertEqual("\(error)", "r.yaml:5:23: bad regex in 'identifier_regex': Back-references are unsupported.")
        }
    }

    func testConcurrentScans() throws {
        let set = try RegexSet([#"^a\d+$"#, "b", #"\d$"#])
        let texts = ["a1", "b", "a12b", "x"], expected: [[Int]] = [[0, 2], [1], [1], []]
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for n in 0..<2_000 {
                let k = (n + t) % texts.count
                XCTAssertEqual(set.matching(texts[k]), expected[k])
            }
        }
    }

    func testMatcherReportsEveryMatchingRegexRule() throws {
        let m = try RuleMatcher(rules: RulesFile.parse(#"""
            elements:
              - {id: a, identifier_regex: '^UIWindow-.*-UITableViewCell\(1-\d+\)_\[.*\]$'}
              - {id: b, identifier_regex: 'UITableView-'}
              - {id: c, identifier_regex: 'UIButton'}
              - {id: d, identifier_regex: '\(1-2\)', screen: Home}
              - {id: e, identifier_regex: '_\[null\]$', app_versions: [">=3.0"]}
              - {id: f, path: "UIWindow-UITransitionView-UIView-UITableView", type: UITableViewCell, section: 1}
            """#))
        var f = EventFacts()
        f.elementPath = "UIWindow-UITransitionView-UIView-UITableView"
        f.elementType = "UITableViewCell"
        f.elementPosition = "1-2"
        XCTAssertEqual(f.elementIdentifier, cell)
        func ids() -> [String] {
            var hits: [Int] = []
            m.match(role: .click, facts: f, into: &hits)
            return hits.map { m.id(of: $0) }
        }
        XCTAssertEqual(ids(), ["a", "b", "f"])
        f.screenName = "Home"
        f.appVersion = "3.1"
        XCTAssertEqual(ids(), ["a", "b", "d", "e", "f"])
        f.elementType = "UIButton"
        f.elementPosition = nil
        f.elementIndex = "0"
        XCTAssertEqual(ids(), ["b", "c", "e"], "b: the path holds UITableView-")
        var page = EventFacts()
        page.screenName = "Home"
        page.elementPath = f.elementPath
        page.elementType = "UIButton"
        var hits: [Int] = []
        m.match(role: .pageEnter, facts: page, into: &hits)
        XCTAssertEqual(hits, [], "regexes are for clicks only")
    }
}
