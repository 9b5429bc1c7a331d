import MaidianPipeline
@testable import MaidianRules
import XCTest

final class RulesLoaderTests: XCTestCase {
    func error(_ yaml: String) -> String { rulesError(yaml) }

    func testSampleLoads() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../data/rules-sample.yaml").standardized.path
        let rules = try RulesFile.load(path: path)
        XCTAssertEqual(rules.pages.map(\.id), ["home_pv", "product_pv", "cart_v32", "profile_tab"])
        XCTAssertEqual(rules.elements.count, 6)
        XCTAssertEqual(rules.actions.map(\.id), [
            "CartViewController/checkoutTapped:", "OrderListViewController", "HomeViewController/UITableView/0",
            "ProfileViewController/avatarTapped:",
        ])
        XCTAssertEqual(rules.actions[2].pagePara.map(\.output), ["title", "sku"])
        XCTAssertEqual(rules.ignorePages, ["DebugMenuViewController"])
    }

    func testJSONLoads() throws {
        let rules = try RulesFile.parse(#"{"version": 1, "pages": [{"id": "a", "screen": "A"}]}"#, file: "r.json")
        XCTAssertEqual(rules.pages.first?.screen, "A")
    }

    func testUnknownKey() {
        let e = error("pages:\n  - id: a\n    screen: A\n    scren: A\n")
        XCTAssertTrue(e.hasPrefix("r.yaml:4:5: unknown key 'scren'"), e)
        XCTAssertTrue(error("actions:\n  CLICK: {}\n").hasPrefix("r.yaml:2:3: unknown key 'CLICK'"))
    }

    func testDuplicateIDs() {
        let e = error("pages:\n  - id: a\n    screen: A\nelements:\n  - id: a\n    path: P\n    type: T\n")
        XCTAssertEqual(e, "r.yaml:5:9: duplicate rule id 'a' (first defined at r.yaml:2:9)")
    }

    func testBadRegex() {
        let e = error("elements:\n  - id: r\n    identifier_regex: 'a(b'\n")
        XCTAssertTrue(e.hasPrefix("r.yaml:3:23: bad regex in 'identifier_regex'"), e)
    }

    func testBadVersionRange() {
        let e = error("pages:\n  - id: a\n    screen: A\n    app_versions: ['>=3.2.0', '=>4']\n")
        XCTAssertTrue(e.hasPrefix("r.yaml:4:31: bad version range '=>4'"), e)
    }

    func testContradictions() {
        XCTAssertEqual(error("elements:\n  - id: e\n    path: P\n    type: T\n    row: 2\n"),
                       "r.yaml:5:10: 'row' needs 'section' (a row is counted within a section)")
        XCTAssertTrue(error("elements:\n  - id: e\n    path: P\n    type: T\n    section: 1\n    index: 2\n")
            .hasPrefix("r.yaml:6:12: 'index' and 'section' contradict each other"))
        XCTAssertEqual(error("elements:\n  - id: e\n    path: P\n    type: T\n    content_key: K\n"),
                       "r.yaml:5:18: 'content_key' needs 'content' or 'group_by_content'")
    }

    func testVersionConditions() {
        XCTAssertEqual(VersionCondition(">=3.2.0"), VersionCondition(">= 3.2.0"))
        XCTAssertEqual(VersionCondition("3.2")?.op, .eq)
        XCTAssertNil(VersionCondition("3..2"))
        XCTAssertNil(VersionCondition(">=x"))
        XCTAssertTrue(VersionCondition("<4.0.0")!.holds([3, 9, 9]))
        XCTAssertFalse(VersionCondition("<4.0.0")!.holds([4]))
        XCTAssertTrue(VersionCondition(">3.2")!.holds([3, 2, 1]))
        XCTAssertTrue(VersionCondition("<=3.2.0")!.holds([3, 2]))
        XCTAssertTrue(VersionCondition("3.2.0")!.holds([3, 2]))
    }
}
