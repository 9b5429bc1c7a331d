import MaidianEvents
import MaidianPipeline
@testable import MaidianRules
import XCTest

final class MatcherTests: XCTestCase {
    let rulesText = """
    version: 1
    ignore_pages: [DebugMenuViewController]
    pages:
      - id: home
        screen: HomeViewController
      - id: orders_tab
        page_path: "Tab-Nav(1)-Orders(0)"
        app_versions: [">=3.2.0", "<4.0.0"]
    elements:
      - id: buy_button
        screen: ProductViewController
        path: "W-V"
        type: UIButton
        index: 2
      - id: buy_text
        path: "W-V"
        type: UIButton
        content: "Buy now"
      - id: feed_section
        path: "W-T"
        type: UITableViewCell
        section: 1
      - id: feed_cell
        path: "W-T"
        type: UITableViewCell
        section: 1
        row: 2
      - id: feed_by_title
        path: "W-T"
        type: UITableViewCell
        section: 1
        content_key: "UIView-UILabel(0)"
        group_by_content: true
      - id: raw
        identifier_regex: '^W-.*-UITableViewCell\\(1-\\d+\\)_\\[.*\\]$'
      - id: image
        identifier_regex: '^UIWindow-.*-UIView-UIImageView\\(0\\)_\\[null\\]$'
    actions:
      ACTION:
        "VC/jump": {userDefined: {eventid: "e0"}, pagePara: {}}
        "VC/tagged/3": {userDefined: {eventid: "e3"}, pagePara: {}}
      PAGEPV: {"HomeViewController": {userDefined: {pageid: "234"}, pagePara: {}}}
      TABLEVIEW: {"VC/UITableView/0": {userDefined: {eventid: "e1"}, pagePara: {}}}
      GESTURE: {"VC/tap:": {userDefined: {eventid: "e2"}, pagePara: {}}}
    """

    func matcher() throws -> RuleMatcher { try RuleMatcher(rules: RulesFile.parse(rulesText)) }

    func ids(_ m: RuleMatcher, _ role: EventRole, _ f: EventFacts) -> [String] {
        var hits: [Int] = []
        m.match(role: role, facts: f, into: &hits)
        XCTAssertEqual(rawHits(m, role, f), hits, "matchRaw agrees with match")
        return hits.map { m.id(of: $0) }
    }

    /// `matchRaw` over the same facts as raw bytes.
    func rawHits(_ m: RuleMatcher, _ role: EventRole, _ f: EventFacts) -> [Int] {
        var storage: [UnsafeMutablePointer<UInt8>] = []
        defer { storage.forEach { $0.deallocate() } }
        func raw(_ s: String?) -> ByteView {
            guard let s else { return .absent }
            let bytes = Array(s.utf8)
            let p = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
            p.initialize(from: bytes, count: bytes.count)
            storage.append(p)
            return ByteView(p, bytes.count)
        }
        var r = RawFacts()
        r.screenName = raw(f.screenName); r.currentURL = raw(f.currentURL); r.pagePath = raw(f.pagePath)
        r.appVersion = raw(f.appVersion); r.elementPath = raw(f.elementPath); r.elementType = raw(f.elementType)
        r.elementPosition = raw(f.elementPosition); r.elementIndex = raw(f.elementIndex); r.content = raw(f.content)
        r.elementKind = raw(f.elementKind); r.target = raw(f.target); r.action = raw(f.action)
        r.container = raw(f.container); r.tag = raw(f.tag)
        if !f.contentItems.isEmpty {
            var o: [UInt8] = [0x7B]
            for (n, (k, v)) in f.contentItems.enumerated() {
                if n > 0 { o.append(0x2C) }
                JSONOut.appendString(k, to: &o); o.append(0x3A); JSONOut.appendString(v, to: &o)
            }
            o.append(0x7D)
            r.contentObject = raw(String(decoding: o, as: UTF8.self))
        }
        var hits: [Int] = [], buffer: [UInt8] = []
        m.matchRaw(role: role, facts: r, into: &hits, buffer: &buffer)
        // A two-entry cache shared by the test's events: a miss, then a hit; earlier events' entries get evicted.
        let cache = caches[ObjectIdentifier(m)] ?? MatchCache(matcher: m, slots: 2)
        caches[ObjectIdentifier(m)] = cache
        for pass in 0..<2 {
            var cached: [Int] = []
            cache.match(role: role, facts: r, into: &cached, buffer: &buffer)
            XCTAssertEqual(cached, hits, "MatchCache agrees with matchRaw (pass \(pass))")
        }
        return hits
    }

    var caches: [ObjectIdentifier: MatchCache] = [:]


    func testRoles() {
        XCTAssertEqual(EventRole.of("$AppViewScreen"), .pageEnter)
        XCTAssertEqual(EventRole.of("enter_view"), .pageEnter)
        XCTAssertEqual(EventRole.of("$AppClick"), .click)
        XCTAssertEqual(EventRole.of("$AppStart"), .other)
    }

    func testPageRules() throws {
        let m = try matcher()
        var f = EventFacts()
        f.screenName = "HomeViewController"
        XCTAssertEqual(ids(m, .pageEnter, f), ["home", "HomeViewController"])
        XCTAssertEqual(ids(m, .click, f), [])
        XCTAssertEqual(ids(m, .other, f), [])
        var u = EventFacts()
        u.currentURL = "HomeViewController"
        XCTAssertEqual(ids(m, .pageEnter, u), ["home", "HomeViewController"], "current_url is the page without $screen_name")
        var o = EventFacts()
        o.screenName = "Orders"
        o.pagePath = "Tab-Nav(1)-Orders(0)"
        o.appVersion = "3.2.1"
        XCTAssertEqual(ids(m, .pageEnter, o), ["orders_tab"])
        o.appVersion = "4.0.0"
        XCTAssertEqual(ids(m, .pageEnter, o), [])
        o.appVersion = nil
        XCTAssertEqual(ids(m, .pageEnter, o), [])
    }

    func testIgnoredPages() throws {
        let m = try matcher()
        XCTAssertTrue(m.isIgnored(page: "UINavigationController"))
        XCTAssertTrue(m.isIgnored(page: "DebugMenuViewController"))
        var f = EventFacts()
        f.screenName = "DebugMenuViewController"
        f.elementPath = "W-V"
        f.elementType = "UIButton"
        f.content = "Buy now"
        XCTAssertEqual(ids(m, .click, f), [])
        f.screenName = "ProductViewController"
        XCTAssertEqual(ids(m, .click, f), ["buy_text"])
    }

    func testIndependentElements() throws {
        let m = try matcher()
        var f = EventFacts()
        f.screenName = "ProductViewController"
        f.elementPath = "W-V"
        f.elementType = "UIButton"
        f.elementIndex = "2"
        XCTAssertEqual(ids(m, .click, f), ["buy_button"])
        f.content = "Buy now"
        XCTAssertEqual(ids(m, .click, f), ["buy_button", "buy_text"])
        f.screenName = "Other"
        XCTAssertEqual(ids(m, .click, f), ["buy_text"], "page scope")
        f.elementIndex = "1"
        f.content = "Buy"
        XCTAssertEqual(ids(m, .click, f), [])
    }

    func testRepeatedElementsAndRegex() throws {
        let m = try matcher()
        var f = EventFacts()
        f.elementPath = "W-T"
        f.elementType = "UITableViewCell"
        f.elementPosition = "1-2"
        f.contentItems = [("UIView-UILabel(0)", "Sale")]
        XCTAssertEqual(f.elementIdentifier, "W-T-UITableViewCell(1-2)_[null]")
        XCTAssertEqual(ids(m, .click, f), ["feed_section", "feed_cell", "feed_by_title", "raw"])
        f.contentItems = []
        f.elementPosition = "1-3"
        XCTAssertEqual(ids(m, .click, f), ["feed_section", "raw"])
        f.elementPosition = "2-2"
        XCTAssertEqual(ids(m, .click, f), [])
    }

    func testSampleRegex() throws {
        let m = try matcher()
        var f = EventFacts()
        f.elementPath = "UIWindow-UITransitionView-UIView"
        f.elementType = "UIImageView"
        f.elementIndex = "0"
        XCTAssertEqual(f.elementIdentifier, "UIWindow-UITransitionView-UIView-UIImageView(0)_[null]")
        XCTAssertEqual(ids(m, .click, f), ["image"])
        f.content = "x"
        XCTAssertEqual(ids(m, .click, f), [])
        XCTAssertTrue(try RegexSet([#"^a\d+$"#]).matches("a12"))
        XCTAssertFalse(try RegexSet([#"^a\d+$"#]).matches("ab"))
    }

    func testActionIdentifiers() throws {
        let m = try matcher()
        var f = EventFacts()
        f.elementKind = "control"
        f.target = "VC"
        f.action = "jump"
        XCTAssertEqual(f.actionIdentifiers.map(\.1), ["VC/jump/0", "VC/jump"])
        XCTAssertEqual(ids(m, .click, f), ["VC/jump"])
        f.action = "tagged"
        f.tag = "3"
        XCTAssertEqual(ids(m, .click, f), ["VC/tagged/3"])
        f.elementKind = "gesture"
        f.action = "tap:"
        XCTAssertEqual(f.actionIdentifiers.map(\.1), ["VC/tap:"])
        XCTAssertEqual(ids(m, .click, f), ["VC/tap:"])
        f.elementKind = "table"
        f.container = "UITableView"
        f.tag = nil
        XCTAssertEqual(f.actionIdentifiers.map(\.1), ["VC/UITableView/0"])
        XCTAssertEqual(ids(m, .click, f), ["VC/UITableView/0"])
        f.elementKind = "control"
        f.action = "tap:"
        XCTAssertEqual(ids(m, .click, f), [], "a GESTURE key does not match a control click")
    }

    func testExactMeansSameBytes() throws {
        let m = try RuleMatcher(rules: RulesFile.parse("""
            elements:
              - {id: precomposed, path: P, type: T, content: "caf\\u00e9"}
              - {id: item, path: P, type: T, content_key: "k\\u00e9", content: "v"}
              - {id: quoted, path: P, type: T, content_key: "a\\"b", content: "x"}
            """))
        var f = EventFacts()
        f.elementPath = "P"
        f.elementType = "T"
        f.content = "caf\u{E9}"
        XCTAssertEqual(ids(m, .click, f), ["precomposed"])
        f.content = "cafe\u{301}"
        XCTAssertEqual(f.content, "caf\u{E9}", "equal as Swift Strings")
        XCTAssertEqual(ids(m, .click, f), [], "but not the same bytes")
        f.content = nil
        f.contentItems = [("k\u{E9}", "v"), ("k\u{E9}", "w")]
        XCTAssertEqual(ids(m, .click, f), ["item"])
        f.contentItems = [("k\u{E9}", "w"), ("k\u{E9}", "v")]
        XCTAssertEqual(ids(m, .click, f), [], "the first of duplicate keys counts")
        f.contentItems = [("a\"b", "x"), ("k\u{E9}", "v")]
        XCTAssertEqual(ids(m, .click, f), ["item", "quoted"], "escaped keys are decoded")
    }
}
