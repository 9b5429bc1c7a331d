import MaidianEvents
import MaidianPipeline
@testable import MaidianRules
import XCTest

final class AnyOfTests: XCTestCase {
    let rulesText = """
    pages:
      - id: checkout
        any_of:
          - {screen: CheckoutViewController, app_versions: ["<4.0"]}
          - {page_path: {regex: '^Tab-Checkout\\(\\d+\\)$'}}
        where: {channel: [store, web]}
    elements:
      - id: buy
        screen: ProductViewController
        type: UIButton
        any_of:
          - {path: "W-V-Buy", app_versions: ["<4.0"]}
          - {path: "W-V-Container-Buy"}
          - {path: "W-V-Container-Buy", index: 0}
          - {identifier_regex: '^W-V-.*Buy-UIButton'}
      - id: titles
        type: UITableViewCell
        content_key: "UIView-UILabel(0)"
        group_by_content: true
        any_of:
          - {path: "W-T", section: 1}
          - {path: "W-C", section: 2}
    """

    func ids(_ m: RuleMatcher, _ role: EventRole, _ f: EventFacts) -> [String] {
        var hits: [Int] = []
        m.match(role: role, facts: f, into: &hits)
        var raw: [Int] = []
        var cached: [Int] = []
        Self.rawMatch(m, role, f, &raw, &cached)
        XCTAssertEqual(raw, cached, "MatchCache agrees with matchRaw")
        return hits.map { m.id(of: $0) }
    }

    static func rawMatch(_ m: RuleMatcher, _ role: EventRole, _ f: EventFacts, _ out: inout [Int], _ cached: inout [Int]) {
        let strings = [f.screenName, f.pagePath, f.elementPath, f.elementType, f.elementIndex, f.appVersion]
        let bytes = strings.map { $0.map { Array($0.utf8) } }
        var storage: [UnsafeMutablePointer<UInt8>] = []
        defer { storage.forEach { $0.deallocate() } }
        func raw(_ b: [UInt8]?) -> ByteView {
            guard let b else { return .absent }
            let p = UnsafeMutablePointer<UInt8>.allocate(capacity: max(b.count, 1))
            p.initialize(from: b, count: b.count)
            storage.append(p)
            return ByteView(p, b.count)
        }
        var r = RawFacts()
        r.screenName = raw(bytes[0]); r.pagePath = raw(bytes[1]); r.elementPath = raw(bytes[2]); r.elementType = raw(bytes[3])
        r.elementIndex = raw(bytes[4]); r.appVersion = raw(bytes[5])
        var buffer: [UInt8] = []
        m.matchRaw(role: role, facts: r, into: &out, buffer: &buffer)
        let cache = MatchCache(matcher: m, slots: 4)
        var first: [Int] = []
        cache.match(role: role, facts: r, into: &first, buffer: &buffer)
        cache.match(role: role, facts: r, into: &cached, buffer: &buffer)
        if first != cached { cached = [-1] }
    }

    func testAnEventMatchingSeveralDrawingsCountsOnce() throws {
        let m = try RuleMatcher(rules: RulesFile.parse(rulesText))
        var f = EventFacts()
        f.screenName = "ProductViewController"
        f.elementType = "UIButton"
        f.elementPath = "W-V-Container-Buy"
        f.elementIndex = "0"
        f.appVersion = "4.1"
        // Three drawings match (the plain path, the path with index 0, the regex): the rule once.
        XCTAssertEqual(ids(m, .click, f), ["buy"])
        var hits: [Int] = []
        m.match(role: .click, facts: f, into: &hits)
        XCTAssertEqual(hits.count, 1)

        f.elementPath = "W-V-Buy"
        f.elementIndex = nil
        f.appVersion = "3.9"
        XCTAssertEqual(ids(m, .click, f), ["buy"], "the old drawing on its versions (and the regex)")
        f.elementPath = "W-X-Buy"
        XCTAssertEqual(ids(m, .click, f), [], "no drawing")
        f.elementPath = "W-V-Container-Buy"
        f.screenName = "Other"
        XCTAssertEqual(ids(m, .click, f), [], "the rule's screen applies to every drawing")
    }

    func testDrawingsWithVersionsAndRuleConditions() throws {
        let m = try RuleMatcher(rules: RulesFile.parse(rulesText))
        var f = EventFacts()
        f.screenName = "CheckoutViewController"
        f.appVersion = "3.0"
        f.properties = [("channel", #""store""#)]
        XCTAssertEqual(ids(m, .pageEnter, f), ["checkout"])
        f.appVersion = "4.0"
        XCTAssertEqual(ids(m, .pageEnter, f), [], "the first drawing's versions")
        f.pagePath = "Tab-Checkout(3)"
        XCTAssertEqual(ids(m, .pageEnter, f), ["checkout"], "the second drawing, by page path regex")
        f.appVersion = "3.0"
        XCTAssertEqual(ids(m, .pageEnter, f), ["checkout"], "both drawings: once")
        f.properties = [("channel", #""app""#)]
        XCTAssertEqual(ids(m, .pageEnter, f), [], "the rule's where: applies to every drawing")
    }

    func testGroupingKeyIsTheRules() throws {
        let m = try RuleMatcher(rules: RulesFile.parse(rulesText))
        var f = EventFacts()
        f.elementType = "UITableViewCell"
        f.elementPath = "W-C"
        f.elementPosition = "2-7"
        f.contentItems = [("UIView-UILabel(0)", "Sale")]
        var hits: [Int] = []
        m.match(role: .click, facts: f, into: &hits)
        XCTAssertEqual(hits.map { m.id(of: $0) }, ["titles"])
        XCTAssertEqual(m.groupingKey(of: hits[0]), "UIView-UILabel(0)")
        f.elementPath = "W-T"
        XCTAssertEqual(ids(m, .click, f), [], "section 2 is the other drawing's")
        f.elementPosition = "1-0"
        XCTAssertEqual(ids(m, .click, f), ["titles"])
    }

    func error(_ yaml: String) -> String { rulesError(yaml) }

    func testLocatedErrors() {
        XCTAssertTrue(error("elements:\n  - id: e\n    type: T\n    path: P\n    any_of:\n      - {path: Q}\n").hasPrefix("r.yaml:6:10: 'path' is both on the rule and in 'any_of'"),
                      error("elements:\n  - id: e\n    type: T\n    path: P\n    any_of:\n      - {path: Q}\n"))
        XCTAssertTrue(error("elements:\n  - id: e\n    any_of:\n      - {path: Q}\n").hasPrefix("r.yaml:4:9: a drawing of 'e' needs 'path' and 'type'"),
                      error("elements:\n  - id: e\n    any_of:\n      - {path: Q}\n"))
        XCTAssertTrue(error("elements:\n  - id: e\n    type: T\n    any_of:\n      - {path: Q, row: 1}\n").hasPrefix("r.yaml:5:19: 'row' needs 'section'"),
                      error("elements:\n  - id: e\n    type: T\n    any_of:\n      - {path: Q, row: 1}\n"))
        XCTAssertTrue(error("elements:\n  - id: e\n    type: T\n    any_of: []\n").hasPrefix("r.yaml:4:13: 'any_of' needs at least one drawing"))
        XCTAssertTrue(error("elements:\n  - id: e\n    type: T\n    any_of:\n      - {path: Q, wher: 1}\n").hasPrefix("r.yaml:5:19: unknown key 'wher'"),
                      error("elements:\n  - id: e\n    type: T\n    any_of:\n      - {path: Q, wher: 1}\n"))
        XCTAssertTrue(error("pages:\n  - id: p\n    screen: S\n    any_of: [{screen: T}]\n").hasPrefix("r.yaml:4:13: with 'any_of', 'screen' and 'page_path' go in each drawing"))
        XCTAssertTrue(error("pages:\n  - id: p\n    any_of: [{screen: T, page_path: {regex: x}}]\n").hasPrefix("r.yaml:3:37: in 'any_of', a 'page_path' regex goes without 'screen'"),
                      error("pages:\n  - id: p\n    any_of: [{screen: T, page_path: {regex: x}}]\n"))
    }

    func testDiffSeesDrawings() throws {
        let a = try RulesFile.parse("elements:\n  - {id: e, type: T, any_of: [{path: A}]}\n")
        let b = try RulesFile.parse("elements:\n  - {id: e, type: T, any_of: [{path: A}, {path: B}]}\n")
        XCTAssertEqual(RulesDiff(from: a, to: b).changed, ["e"])
    }
}
