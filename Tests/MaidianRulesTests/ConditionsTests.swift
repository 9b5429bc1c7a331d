import MaidianEvents
import MaidianPipeline
@testable import MaidianRules
import XCTest

final class ConditionsTests: XCTestCase {
    let rulesText = """
    version: 1
    pages:
      - id: sale_page
        screen: ProductViewController
        where: {$title: {regex: "^Sale"}}
      - id: product_by_path
        page_path: {regex: '^Tab-Nav\\(\\d\\)-Product'}
      - id: product_v32
        screen: ProductViewController
        where: {$app_version: ["3.2.0", "3.2.1"]}
    elements:
      - id: buy_phones
        path: "W-V"
        type: UIButton
        where: {item_name: Phones}
      - id: buy_expensive
        path: "W-V"
        type: UIButton
        where: {price: {">": 100}}
      - id: buy_cheap_or_free
        path: "W-V"
        type: UIButton
        where: {price: {"<=": 10, ">=": 0}}
      - id: buy_not_phones
        path: "W-V"
        type: UIButton
        where: {item_name: {"!=": Phones}}
      - id: buy_in_shop
        path: "W-V"
        type: UIButton
        page_path: {regex: "^Shop-"}
      - id: sale_cells
        path: "W-T"
        type: UITableViewCell
        content_key: "UIView-UILabel(0)"
        content: {regex: "^Sale "}
      - id: sale_text
        path: "W-T"
        type: UITableViewCell
        content: {regex: "(?i)sale"}
      - id: flagged
        path: "W-V"
        type: UIButton
        where: {vip: "true", qty: 3}
    actions:
      ACTION:
        "VC/buy:": {userDefined: {eventid: "e0"}, pagePara: {}, app_versions: [">=4.0"]}
        "VC/old:": {userDefined: {eventid: "e1"}, pagePara: {}, app_versions: ["<4.0"], where: {item_name: [Phones, Tablets]}}
      PAGEPV:
        "HomeViewController": {userDefined: {pageid: "1"}, pagePara: {}, app_versions: ["=3.2.1"]}
    """

    func matcher() throws -> RuleMatcher { try RuleMatcher(rules: RulesFile.parse(rulesText)) }

    func ids(_ m: RuleMatcher, _ role: EventRole, _ f: EventFacts) -> [String] {
        var hits: [Int] = []
        m.match(role: role, facts: f, into: &hits)
        return hits.map { m.id(of: $0) }
    }

    func button(_ properties: [(String, String)], pagePath: String? = nil) -> EventFacts {
        var f = EventFacts()
        f.screenName = "ProductViewController"
        f.elementPath = "W-V"
        f.elementType = "UIButton"
        f.pagePath = pagePath
        f.properties = properties
        return f
    }

    func testEqualityAndAnyOf() throws {
        let m = try matcher()
        XCTAssertEqual(ids(m, .click, button([("item_name", #""Phones""#)])), ["buy_phones"])
        XCTAssertEqual(ids(m, .click, button([("item_name", #""Tablets""#)])), ["buy_not_phones"])
        XCTAssertEqual(ids(m, .click, button([("item_name", #""Phon\u0065s""#)])), ["buy_phones"], "escapes decoded")
        XCTAssertEqual(ids(m, .click, button([])), [], "an absent property satisfies no condition, != included")

        var page = EventFacts()
        page.screenName = "ProductViewController"
        page.appVersion = "3.2.1"
        XCTAssertEqual(ids(m, .pageEnter, page), ["product_v32"], "$app_version from the facts (lib fallback)")
        page.appVersion = "3.2.2"
        XCTAssertEqual(ids(m, .pageEnter, page), [])
        page.properties = [("$app_version", #""3.2.0""#)]
        XCTAssertEqual(ids(m, .pageEnter, page), ["product_v32"], "the property wins over the facts")
    }

    func testNumericComparisons() throws {
        let m = try matcher()
        XCTAssertEqual(ids(m, .click, button([("price", "150")])), ["buy_expensive"])
        XCTAssertEqual(ids(m, .click, button([("price", "100")])), [], "> is strict")
        XCTAssertEqual(ids(m, .click, button([("price", "100.5")])), ["buy_expensive"])
        XCTAssertEqual(ids(m, .click, button([("price", #""1e3""#)])), ["buy_expensive"], "a string holding a number")
        XCTAssertEqual(ids(m, .click, button([("price", "10")])), ["buy_cheap_or_free"], "both bounds hold")
        XCTAssertEqual(ids(m, .click, button([("price", "-1")])), [], "one bound fails")
        XCTAssertEqual(ids(m, .click, button([("price", #""cheap""#)])), [], "not a number")
        XCTAssertEqual(ids(m, .click, button([("price", "true")])), [])
        XCTAssertEqual(ids(m, .click, button([("price", #""-""#)])), [], "a sign alone is no number")
        XCTAssertEqual(ids(m, .click, button([("price", "-5")])), [], "negative")
        XCTAssertEqual(ids(m, .click, button([("price", "0")])), ["buy_cheap_or_free"])
        XCTAssertEqual(numberValue(ByteView(nil, 0)), nil)
        for text in ["12", "-12", "007", "1e2", "12.50", "-0.5", "9007199254740993"] {
            let bytes = Array(text.utf8)
            let got = bytes.withUnsafeBufferPointer { numberValue(ByteView($0.baseAddress, $0.count)) }
            XCTAssertEqual(got, Double(text), text)
        }
    }

    func testTypedEquality() throws {
        let m = try matcher()
        XCTAssertEqual(ids(m, .click, button([("vip", "true"), ("qty", "3")])), ["flagged"])
        XCTAssertEqual(ids(m, .click, button([("vip", #""true""#), ("qty", "3.0")])), ["flagged"], "numbers compare as numbers")
        XCTAssertEqual(ids(m, .click, button([("vip", "true"), ("qty", #""3.0""#)])), [], "a string compares as text")
        XCTAssertEqual(ids(m, .click, button([("vip", "false"), ("qty", "3")])), [])
    }

    func testRegexOnPropertiesPagePathAndContent() throws {
        let m = try matcher()
        var page = EventFacts()
        page.screenName = "ProductViewController"
        page.properties = [("$title", #""Sale: phones""#)]
        XCTAssertEqual(ids(m, .pageEnter, page), ["sale_page"])
        page.properties = [("$title", #""Phones on Sale""#)]
        XCTAssertEqual(ids(m, .pageEnter, page), [], "anchored")

        var byPath = EventFacts()
        byPath.screenName = "X"
        byPath.pagePath = "Tab-Nav(2)-Product(0)"
        XCTAssertEqual(ids(m, .pageEnter, byPath), ["product_by_path"], "a page rule found by its page path regex alone")
        byPath.pagePath = "Tab-Nav(x)-Product(0)"
        XCTAssertEqual(ids(m, .pageEnter, byPath), [])

        XCTAssertEqual(ids(m, .click, button([], pagePath: "Shop-Home")), ["buy_in_shop"])
        XCTAssertEqual(ids(m, .click, button([], pagePath: "Home-Shop")), [])

        var cell = EventFacts()
        cell.elementPath = "W-T"
        cell.elementType = "UITableViewCell"
        cell.contentItems = [("UIView-UILabel(0)", "Sale 20%"), ("UIView-UILabel(1)", "x")]
        XCTAssertEqual(ids(m, .click, cell), ["sale_cells"], "regex on the content item")
        cell.contentItems = [("UIView-UILabel(0)", "Big Sale"), ("UIView-UILabel(1)", "Sale 1")]
        XCTAssertEqual(ids(m, .click, cell), [], "only the content_key item counts")
        cell.contentItems = []
        cell.content = "Spring SALE"
        XCTAssertEqual(ids(m, .click, cell), ["sale_text"], "regex on the string content, (?i)")
    }

    func testAppVersionsAndConditionsOnActions() throws {
        let m = try matcher()
        var f = EventFacts()
        f.screenName = "VC"
        f.elementKind = "control"
        f.target = "VC"
        f.action = "buy:"
        f.appVersion = "4.1"
        XCTAssertEqual(ids(m, .click, f), ["VC/buy:"])
        f.appVersion = "3.9"
        XCTAssertEqual(ids(m, .click, f), [])
        f.appVersion = nil
        XCTAssertEqual(ids(m, .click, f), [], "no version satisfies no range")
        f.action = "old:"
        f.appVersion = "3.9"
        f.properties = [("item_name", #""Tablets""#)]
        XCTAssertEqual(ids(m, .click, f), ["VC/old:"])
        f.properties = [("item_name", #""Laptops""#)]
        XCTAssertEqual(ids(m, .click, f), [])

        var pv = EventFacts()
        pv.screenName = "HomeViewController"
        pv.appVersion = "3.2.1"
        XCTAssertEqual(ids(m, .pageEnter, pv), ["HomeViewController"])
        pv.appVersion = "3.2.0"
        XCTAssertEqual(ids(m, .pageEnter, pv), [])
    }

    /// Conditions are a post-filter: the cached candidates by facts stay right whatever the other properties.
    func testConditionsAfterTheCache() throws {
        let m = try matcher()
        let cache = MatchCache(matcher: m, slots: 16)
        let path = Array("W-V".utf8), type = Array("UIButton".utf8)
        func run(_ props: [(String, String)]) -> [String] {
            path.withUnsafeBufferPointer { p in
                type.withUnsafeBufferPointer { t in
                    var f = RawFacts()
                    f.elementPath = ByteView(p.baseAddress!, p.count)
                    f.elementType = ByteView(t.baseAddress!, t.count)
                    var hits: [Int] = [], buffer: [UInt8] = []
                    cache.match(role: .click, facts: f, into: &hits, buffer: &buffer)
                    var reader = FactsProperties(pairs: props)
                    var scratch = ConditionScratch()
                    m.applyConditions(&hits, from: 0, properties: &reader, lib: .absent, scratch: &scratch)
                    return hits.map { m.id(of: $0) }
                }
            }
        }
        XCTAssertEqual(run([("item_name", #""Phones""#)]), ["buy_phones"])
        XCTAssertEqual(run([("price", "500")]), ["buy_expensive"])
        XCTAssertEqual(run([("item_name", #""Phones""#)]), ["buy_phones"])
    }

    func testLibVersionFallback() throws {
        let m = try RuleMatcher(rules: RulesFile.parse("""
        pages:
          - {id: v, screen: S, where: {$app_version: {regex: "^3\\\\."}}}
        """))
        var hits = [0]
        let lib = Array(#"{"$lib":"iOS","$app_version":"3.4.0"}"#.utf8)
        lib.withUnsafeBufferPointer { b in
            var reader = FactsProperties(pairs: [])
            var scratch = ConditionScratch()
            m.applyConditions(&hits, from: 0, properties: &reader, lib: ByteView(b.baseAddress!, b.count), scratch: &scratch)
        }
        XCTAssertEqual(hits, [0])
        hits = [0]
        let other = Array(#"{"$app_version":"4.0"}"#.utf8)
        other.withUnsafeBufferPointer { b in
            var reader = FactsProperties(pairs: [])
            var scratch = ConditionScratch()
            m.applyConditions(&hits, from: 0, properties: &reader, lib: ByteView(b.baseAddress!, b.count), scratch: &scratch)
        }
        XCTAssertEqual(hits, [])
    }

    func error(_ yaml: String) -> String { rulesError(yaml) }

    func testLocatedErrors() {
        let head = "elements:\n  - id: e\n    path: P\n    type: T\n"
        XCTAssertTrue(error(head + "    where: {price: {\">>\": 3}}\n").hasPrefix("r.yaml:5:21: unknown condition '>>' on 'price'"),
                      error(head + "    where: {price: {\">>\": 3}}\n"))
        XCTAssertTrue(error(head + "    where: {price: {\">\": ten}}\n").hasPrefix("r.yaml:5:26: '>' of 'price' needs a number"))
        XCTAssertTrue(error(head + "    where: {t: {regex: 'a(b'}}\n").hasPrefix("r.yaml:5:24: bad regex for 't'"))
        XCTAssertTrue(error(head + "    where: [a]\n").hasPrefix("r.yaml:5:12: 'where' must be a mapping"))
        XCTAssertTrue(error(head + "    where: {a: }\n").hasPrefix("r.yaml:5:16: condition on 'a' has no value"), error(head + "    where: {a: }\n"))
        XCTAssertTrue(error(head + "    where: {a: []}\n").hasPrefix("r.yaml:5:16: condition on 'a' needs a value or a non-empty list"))
        XCTAssertTrue(error(head + "    content: {regex: 'x', other: 1}\n").hasPrefix("r.yaml:5:14: 'content' takes a string or {regex"))
        XCTAssertTrue(error(head + "    page_path: {regex: '(('}\n").hasPrefix("r.yaml:5:24: bad regex in 'page_path'"))
        XCTAssertTrue(error("actions:\n  ACTION:\n    \"a/b\": {app_versions: ['=>4']}\n").hasPrefix("r.yaml:3:28: bad version range '=>4'"),
                      error("actions:\n  ACTION:\n    \"a/b\": {app_versions: ['=>4']}\n"))
        XCTAssertTrue(error("actions:\n  ACTION:\n    \"a/b\": {wher: {}}\n").hasPrefix("r.yaml:3:13: unknown key 'wher'"),
                      error("actions:\n  ACTION:\n    \"a/b\": {wher: {}}\n"))
    }

    func testDiffSeesConditions() throws {
        let a = try RulesFile.parse("pages:\n  - {id: p, screen: S, where: {x: 1}}\n")
        let b = try RulesFile.parse("pages:\n  - {id: p, screen: S, where: {x: 2}}\n")
        let c = try RulesFile.parse("pages:\n  - {id: p, screen: S, where: {x: 1}}\n# moved\n")
        XCTAssertEqual(RulesDiff(from: a, to: b).changed, ["p"])
        XCTAssertTrue(RulesDiff(from: a, to: c).isEmpty)
    }
}
