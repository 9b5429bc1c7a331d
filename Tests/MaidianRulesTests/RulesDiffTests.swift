import MaidianRules
import XCTest

final class RulesDiffTests: XCTestCase {
    func testAddedRemovedChangedByID() throws {
        let old = try RulesFile.parse("""
        pages:
          - id: home
            screen: HomeViewController
          - id: cart
            screen: CartViewController
        elements:
          - id: buy
            path: "W-V"
            type: UIButton
            index: 2
        actions:
          ACTION:
            "VC/jump": {userDefined: {eventid: "e0"}, pagePara: {}}
            "VC/stay": {userDefined: {eventid: "e1"}, pagePara: {}}
        """)
        // Moved lines (other locations) are no change; a changed index, userDefined value or version range is.
        let new = try RulesFile.parse("""
        ignore_pages: [Debug]
        actions:
          ACTION:
            "VC/stay": {userDefined: {eventid: "e1"}, pagePara: {}}
            "VC/jump": {userDefined: {eventid: "e9"}, pagePara: {}}
        elements:
          - id: buy
            path: "W-V"
            type: UIButton
            index: 3
        pages:

          - id: home
            screen: HomeViewController
          - id: orders
            screen: OrderListViewController
            app_versions: [">=3.2"]
        """)
        let d = RulesDiff(from: old, to: new)
        XCTAssertEqual(d.added, ["orders"])
        XCTAssertEqual(d.removed, ["cart"])
        XCTAssertEqual(d.changed, ["buy", "VC/jump"])
        XCTAssertTrue(d.ignorePagesChanged)
        XCTAssertFalse(d.isEmpty)
        XCTAssertTrue(RulesDiff(from: new, to: new).isEmpty)
        XCTAssertEqual(RulesDiff(from: new, to: old).added, ["cart"])
    }
}
