import Foundation
import MaidianPipeline
@testable import MaidianRules
import XCTest

final class RulesWatchdogTests: XCTestCase {
    static let rulesText = """
    pages:
      - {id: product, screen: ProductViewController}
    elements:
      - {id: buy, screen: ProductViewController, path: "UIWindow-UIView-UIButton", type: UIButton, index: 0}
      - {id: label, path: "UIWindow-UIView-UILabel", type: UILabel}
    """

    /// A click on ProductViewController on `version`; the release 4.0 moved the button into a stack view.
    static func click(_ version: String, button: Bool) -> EventFacts {
        var f = EventFacts()
        f.screenName = "ProductViewController"
        f.appVersion = version
        f.elementPath = button ? (version < "4.0" ? "UIWindow-UIView-UIButton" : "UIWindow-UIView-UIStackView-UIButton") : "UIWindow-UIView-UILabel"
        f.elementType = button ? "UIButton" : "UILabel"
        f.elementIndex = "0"
        return f
    }

    /// Feeds `n` clicks per version (3 in 4 on the button) and `n` page views, as the match stage would.
    static func feed(_ w: RulesWatchdog, versions: [String], n: Int) -> [EventFacts] {
        var misses: [EventFacts] = []
        for v in versions {
            for i in 0..<n {
                let f = click(v, button: i % 4 != 0)
                var hits: [Int] = []
                w.matcher.match(role: .click, facts: f, into: &hits)
                w.observe(role: .click, page: f.page, version: f.appVersion, hits: hits)
                if v == "4.0" && !hits.contains(1) { misses.append(f) }
                var page = EventFacts()
                page.screenName = "ProductViewController"
                page.appVersion = v
                hits = []
                w.matcher.match(role: .pageEnter, facts: page, into: &hits)
                w.observe(role: .pageEnter, page: page.page, version: page.appVersion, hits: hits)
            }
        }
        return misses
    }

    func testARuleThatStopsMatchingOnAReleaseRaisesOneAlert() throws {
        let w = RulesWatchdog(matcher: try RuleMatcher(rules: RulesFile.parse(Self.rulesText)), options: .init(minEvents: 50))
        _ = Self.feed(w, versions: ["3.9", "3.10", "4.0"], n: 200)
        let alerts = w.alerts()
        XCTAssertEqual(alerts.map(\.rule), ["buy"], "the label's and the page's rules still match")
        let a = try XCTUnwrap(alerts.first)
        XCTAssertEqual(a.appVersion, "4.0")
        XCTAssertEqual(a.page, "ProductViewController")
        XCTAssertEqual(a.events, 200)
        XCTAssertEqual(a.matched, 0)
        XCTAssertEqual(a.previousVersion, "3.10", "versions compare as dotted numbers")
        XCTAssertEqual(a.previousMatched, 150)
        XCTAssertEqual(a.reason, "stopped")
        XCTAssertEqual(a.key, "buy|4.0")
        let json = try JSONSerialization.jsonObject(with: Data(a.json.utf8)) as! [String: Any]
        XCTAssertEqual(json["rule"] as? String, "buy")
        XCTAssertEqual(json["app_version"] as? String, "4.0")
        XCTAssertEqual(json["kind"] as? String, "element")
        XCTAssertEqual(json["events"] as? Int, 200)
        XCTAssertEqual(json["previous_matched"] as? Int, 150)
        XCTAssertEqual(w.alerts(), [], "raised once")
    }

    func testNoAlertWithoutNormalTraffic() throws {
        let w = RulesWatchdog(matcher: try RuleMatcher(rules: RulesFile.parse(Self.rulesText)), options: .init(minEvents: 100))
        _ = Self.feed(w, versions: ["3.9"], n: 200)
        _ = Self.feed(w, versions: ["4.0"], n: 99)
        XCTAssertEqual(w.alerts(), [], "99 clicks on 4.0: not judged yet")
        _ = Self.feed(w, versions: ["4.0"], n: 1)
        XCTAssertEqual(w.alerts().map(\.key), ["buy|4.0"])
    }

    func testLearnedPageForRulesWithoutScreen() throws {
        let w = RulesWatchdog(matcher: try RuleMatcher(rules: RulesFile.parse(Self.rulesText)), options: .init(minEvents: 10))
        _ = Self.feed(w, versions: ["3.9"], n: 40)
        XCTAssertEqual(w.scope(of: 2)?.page, "ProductViewController", "the page the label rule matched on")
        XCTAssertEqual(w.scope(of: 2)?.role, .click)
        XCTAssertEqual(w.scope(of: 0)?.role, .pageEnter)
    }

    func testDoctorProposesTheMovedPath() throws {
        let m = try RuleMatcher(rules: RulesFile.parse(Self.rulesText))
        let w = RulesWatchdog(matcher: m, options: .init(minEvents: 50))
        let misses = Self.feed(w, versions: ["3.9", "4.0"], n: 200)
        let alert = try XCTUnwrap(w.alerts().first)
        let p = try XCTUnwrap(RulesDoctor().propose(alert, matcher: m, nearMisses: misses))
        XCTAssertEqual(p.oldPath, "UIWindow-UIView-UIButton")
        XCTAssertEqual(p.newPath, "UIWindow-UIView-UIStackView-UIButton")
        XCTAssertEqual(p.repaired, 150)
        // The fragment loads, and the repaired rule matches the old element on 3.9 and the moved one on 4.0, once each.
        let repaired = try RuleMatcher(rules: RulesFile.parse(p.fragment, file: "fragment.yaml"))
        XCTAssertEqual(repaired.rules.elements.first?.drawings.count, 2)
        for (version, want) in [("3.9", ["buy"]), ("4.0", ["buy"])] {
            var hits: [Int] = []
            repaired.match(role: .click, facts: Self.click(version, button: true), into: &hits)
            XCTAssertEqual(hits.map { repaired.id(of: $0) }, want, version)
        }
        var hits: [Int] = []
        var moved = Self.click("4.0", button: true)
        moved.elementPath = "UIWindow-UIView-UIButton"
        repaired.match(role: .click, facts: moved, into: &hits)
        XCTAssertEqual(hits, [], "the old path is kept for the versions before the release only")
    }
}
