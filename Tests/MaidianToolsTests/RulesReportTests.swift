import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import XCTest
import MaidianStages
@testable import MaidianTools

final class RulesReportTests: XCTestCase {
    func testMarkDifference() {
        func mark(_ a: String, _ b: String?) -> String { RulesReport.markDifference(expected: a, actual: b) }
        XCTAssertEqual(mark("same", "same"), "same")
        XCTAssertEqual(mark("ProductViewController", "CartViewController"), "[-Product-]{+Cart+}ViewController")
        XCTAssertEqual(mark("ProductViewController", "ProductListViewController"), "Product{+List+}ViewController")
        XCTAssertEqual(mark("UIButton", "UIImageView"), "[-UIButton-]{+UIImageView+}")
        XCTAssertEqual(mark("1", "13"), "[-1-]{+13+}", "digit runs are words")
        XCTAssertEqual(mark("Search", "Scan"), "[-Search-]{+Scan+}")
        XCTAssertEqual(mark("Buy now", "Buy later"), "Buy [-now-]{+later+}")
        XCTAssertEqual(mark("Tab-Nav(3)-Profile(0)", "Tab-Nav(2)-Profile(0)"), "Tab-Nav([-3-]{+2+})-Profile(0)")
        XCTAssertEqual(mark("A/checkoutTapped:", "A/editTapped:"), "A/[-checkout-]{+edit+}Tapped:")
        XCTAssertEqual(mark("abc", "abc-x"), "abc{+-x+}")
        XCTAssertEqual(mark("abc-x", "abc"), "abc[--x-]")
        XCTAssertEqual(mark("Tab-Nav(3)", nil), "[-Tab-Nav(3)-]{+(none)+}")
        XCTAssertEqual(mark("购物车", "购物"), "[-购物车-]{+购物+}")
    }

    func testTimeAndShortElement() {
        XCTAssertEqual(RulesReport.utcText(1_763_700_011_951), "2025-11-21T04:40:11.951Z")
        XCTAssertEqual(RulesReport.utcText(0), "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(RulesReport.utcText(-1), "1969-12-31T23:59:59.999Z")
        XCTAssertEqual(RulesReport.utcText(951_782_400_000), "2000-02-29T00:00:00.000Z")
        XCTAssertEqual(RulesReport.shortElement("W-A-B-C-UITableViewCell(1-2)_[x-y(1)]"), "…-C-UITableViewCell(1-2)_[x-y(1)]")
        XCTAssertEqual(RulesReport.shortElement("W-UIButton(0)_[null]"), "W-UIButton(0)_[null]")
    }

    // MARK: - a run over a few events

    static let rules = """
    pages:
      - id: home
        screen: HomeViewController
      - id: profile_tab
        page_path: "Tab-Nav(3)-ProfileViewController(0)"
      - id: never
        screen: NowhereViewController
    elements:
      - id: buy
        screen: ProductViewController
        path: "W-V"
        type: UIButton
        index: 0
      - id: titles
        path: "W-T"
        type: UITableViewCell
        section: 1
        content_key: "L"
        group_by_content: true
    actions:
      ACTION:
        "ProductViewController/buyTapped:": {userDefined: {eventid: "b"}, pagePara: {}}
    """

    func event(_ name: String, _ trackID: Int64, _ props: String, user: String = "u1") -> String {
        #"{"type":"track","event":"\#(name)","time":\#(1_763_700_000_000 + trackID),"distinct_id":"\#(user)","_track_id":\#(trackID),"properties":\#(props)}"#
    }

    func button(_ index: Int, _ screen: String = "ProductViewController", action: String = "buyTapped:") -> String {
        #"{"$screen_name":"\#(screen)","$element_path":"W-V","$element_type":"UIButton","$element_index":\#(index),"$element_kind":"control","$element_target":"ProductViewController","$element_action":"\#(action)"}"#
    }

    func cell(_ position: String, _ title: String?) -> String {
        let content = title.map { #"{"L":"\#($0)"}"# } ?? #""x""#
        return #"{"$screen_name":"HomeViewController","$element_path":"W-T","$element_type":"UITableViewCell","$element_position":"\#(position)","$element_content":\#(content)}"#
    }

    /// Runs `rules test` over one batch made of one record per list of events.
    func run(_ records: [[String]], focus: String? = nil, examples: Int = 3) throws -> RulesReport {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-rulesreport-\(getpid())-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let rulesPath = dir.appendingPathComponent("rules.yaml").path
        try Self.rules.write(toFile: rulesPath, atomically: true, encoding: .utf8)
        // The pipeline's own rules file does not exist: it is replaced. Stages after match must not run.
        let spec = try PipelineSpec.parse(yaml: """
            stages:
              - kind: validate
              - kind: dedup
              - kind: noise_filter
              - kind: match
                rules: missing.yaml
              - kind: record_presets
            outputs:
              - kind: enriched
            """, file: dir.appendingPathComponent("p.yaml").path)
        let test = try RulesTestRun(spec: spec, registry: BuiltinStages.registry, rules: rulesPath,
                                    options: .init(examples: examples, nearMissesOf: focus), logger: Logger(label: "test"))
        XCTAssertEqual(test.engine.stageNames, ["validate", "dedup", "noise_filter"])
        var batch = EventBatch()
        let topic = batch.topicIndex("events.raw")
        for (n, events) in records.enumerated() {
            let value = Array(("[" + events.joined(separator: ",") + "]").utf8)
            value.withUnsafeBytes { v in
                batch.appendRecord(topic: topic, partition: 0, offset: Int64(n), timestamp: 0, key: nil, value: v, ip: nil, receivedAt: nil, ua: nil, project: nil)
            }
        }
        try test.process(&batch)
        let added = batch.withScratch { $0.string }
        XCTAssertFalse(added.contains("\"$project\""), "record_presets, after match, did not run")
        return test.result
    }

    func testPerRuleCountsExamplesAndUnmatched() throws {
        let r = try run([[
            event("$AppViewScreen", 1, #"{"$screen_name":"HomeViewController"}"#),
            event("$AppViewScreen", 2, #"{"$screen_name":"HomeViewController"}"#, user: "u2"),
            event("$AppViewScreen", 1, #"{"$screen_name":"HomeViewController"}"#),  // duplicate: not counted
            event("$AppClick", 3, button(0)),
            event("$AppClick", 4, cell("1-2", "Sale")),
            event("$AppClick", 5, cell("1-3", "Sale")),
            event("$AppClick", 6, cell("1-4", "Toys")),
            #"{"type":"track","event":"$AppClick","time":"late"}"#,                   // rejected
        ], [
            event("$AppViewScreen", 7, #"{"$screen_name":"HomeViewController"}"#, user: "u3"),
            event("$AppClick", 8, button(0, action: "_buttonDown:")),
        ]], examples: 2)
        XCTAssertEqual(r.rules.map(\.id), ["home", "profile_tab", "never", "buy", "titles", "ProductViewController/buyTapped:"])
        XCTAssertEqual(r.rules.map(\.matches), [3, 0, 0, 2, 3, 1])
        XCTAssertEqual(r.unmatched, ["profile_tab", "never"])
        XCTAssertEqual(r.rule("home")?.examples.map(\.distinctID), ["u1", "u2"], "the first two")
        XCTAssertEqual(r.rule("home")?.examples.first?.trackID, 1)
        XCTAssertEqual(r.rule("home")?.examples.first?.page, "HomeViewController")
        XCTAssertEqual(r.rule("buy")?.examples.first?.element, "W-V-UIButton(0)_[null]")
        XCTAssertEqual(r.rule("titles")?.contents, ["Sale": 2, "Toys": 1])
        XCTAssertEqual(r.rule("titles")?.examples.map(\.content), ["Sale", "Sale"])
        XCTAssertEqual(r.rule("titles")?.metric, .click)
        XCTAssertEqual(r.rule("ProductViewController/buyTapped:")?.kind, "ACTION")
        XCTAssertEqual(r.totals, RulesReport.Totals(
            records: 2, events: 10, kept: 8, dropped: 1, rejected: 1, late: 0, pageViews: 3, clicks: 5, matchedEvents: 8))

        let json = try JSONSerialization.jsonObject(with: Data(r.json.utf8)) as! [String: Any]
        let rules = json["rules"] as! [String: [String: Any]]
        XCTAssertEqual(rules["home"]?["matches"] as? Int, 3)
        XCTAssertEqual(rules["titles"]?["contents"] as? [String: Int], ["Sale": 2, "Toys": 1])
        XCTAssertEqual((rules["buy"]?["examples"] as? [[String: Any]])?.first?["_track_id"] as? Int, 3)
        XCTAssertEqual(json["unmatched"] as? [String], ["profile_tab", "never"])
        XCTAssertNil(json["near_misses"])
        XCTAssertTrue(r.text().contains("matched nothing (2): profile_tab, never"), r.text())
    }

    func testNearMissesOfAnElementRule() throws {
        let r = try run([[
            event("$AppClick", 1, button(0)),
            event("$AppClick", 2, button(2)),
            event("$AppClick", 3, button(2)),
            event("$AppClick", 4, button(0, "CartViewController")),
            event("$AppClick", 5, cell("1-2", "Sale")),                // another path: out of scope
        ]], focus: "buy")
        let nm = try XCTUnwrap(r.nearMisses)
        XCTAssertEqual(nm.total, 3)
        XCTAssertEqual(nm.groups.map(\.diff), ["…-UIButton([-0-]{+2+})_[null]", "…-UIButton(0)_[null]  screen [-Product-]{+Cart+}ViewController"])
        XCTAssertEqual(nm.groups.map(\.count), [2, 1])
        XCTAssertEqual(nm.groups.first?.example.trackID, 2)
        let json = try JSONSerialization.jsonObject(with: Data(r.json.utf8)) as! [String: Any]
        let groups = (json["near_misses"] as? [String: Any])?["groups"] as? [[String: Any]]
        XCTAssertEqual(groups?.first?["count"] as? Int, 2)
        XCTAssertEqual(groups?.first?["differences"] as? Int, 1)
        XCTAssertTrue(r.text(only: "buy").contains("      2  …-UIButton([-0-]{+2+})_[null]"), r.text(only: "buy"))
    }

    func testNearMissesOfPageGroupingAndActionRules() throws {
        let records = [[
            event("$AppViewScreen", 1, #"{"$screen_name":"ProfileViewController","$page_path":"Tab-Nav(3)-ProfileViewController(0)"}"#),
            event("$AppViewScreen", 2, #"{"$screen_name":"ProfileViewController","$page_path":"Tab-Nav(2)-ProfileViewController(0)"}"#),
            event("$AppViewScreen", 3, #"{"$screen_name":"ProfileViewController"}"#),
            event("$AppClick", 4, cell("2-2", "Sale")),
            event("$AppClick", 5, cell("1-2", nil)),
            event("$AppClick", 6, button(1, action: "favoriteTapped:")),
        ]]
        let page = try XCTUnwrap(try run(records, focus: "profile_tab").nearMisses)
        XCTAssertEqual(page.groups.map(\.diff).sorted(), [
            "page_path Tab-Nav([-3-]{+2+})-ProfileViewController(0)",
            "page_path [-Tab-Nav(3)-ProfileViewController(0)-]{+(none)+}",
        ].sorted())
        let titles = try XCTUnwrap(try run(records, focus: "titles").nearMisses)
        XCTAssertEqual(titles.groups.map(\.diff).sorted(), ["…-UITableViewCell(1-2)_[L=[-<any>-]{+(none)+}]", "…-UITableViewCell([-1-]{+2+}-2)_[L=Sale]"])
        let action = try XCTUnwrap(try run(records, focus: "ProductViewController/buyTapped:").nearMisses)
        XCTAssertEqual(action.groups.map(\.diff), ["ProductViewController/[-buy-]{+favorite+}Tapped:"])
        XCTAssertThrowsError(try run(records, focus: "nope")) { error in
            XCTAssertEqual((error as? PipelineError)?.code, .badValue)
            XCTAssertTrue("\(error)".contains("no rule 'nope'"), "\(error)")
        }
    }

    func testPipelineWithoutMatchStage() throws {
        let spec = try PipelineSpec.parse(yaml: "stages:\n  - kind: validate\n", file: "p.yaml")
        XCTAssertThrowsError(try RulesTestRun(spec: spec, registry: BuiltinStages.registry, rules: "r.yaml", logger: Logger(label: "test"))) { error in
            XCTAssertTrue("\(error)".contains("has no 'match' stage"), "\(error)")
        }
    }
}
