import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import MaidianRules
import Synchronization
import XCTest
@testable import MaidianStages

final class MatchStageTests: XCTestCase {
    static let rulesText = """
    version: 1
    ignore_pages: [DebugMenuViewController]
    pages:
      - id: home
        screen: HomeViewController
    elements:
      - id: buy
        path: "UIWindow-UIView"
        type: UIButton
        index: 2
      - id: titles
        path: "UIWindow-UITableView"
        type: UITableViewCell
        section: 1
        content_key: "UIView-UILabel(0)"
        group_by_content: true
    actions:
      ACTION:
        "HomeViewController/buyTapped:":
          userDefined: {eventid: "e1", pageid: "p1"}
          pagePara:
            ver: {propertyName: "$app_version", propertyPath: "", containIn: "0"}
      PAGEPV:
        "HomeViewController": {userDefined: {pageid: "234"}, pagePara: {}}
      TABLEVIEW:
        "HomeViewController/UITableView/0":
          userDefined: {eventid: "cell"}
          pagePara:
            title: {propertyName: "UIView-UILabel(0)", propertyPath: "", containIn: "1"}
    """

    static let button = #"{"$screen_name":"HomeViewController","$element_path":"UIWindow-UIView","$element_type":"UIButton","$element_index":2,"$element_content":"Buy","$element_kind":"control","$element_target":"HomeViewController","$element_action":"buyTapped:","$app_version":"3.2.1"}"#
    static let cell = #"{"$screen_name":"HomeViewController","$element_path":"UIWindow-UITableView","$element_type":"UITableViewCell","$element_position":"1-4","$element_content":{"UIView-UILabel(0)":"Sale","UIView-UIImageView(1)":"icon"},"$element_kind":"table","$element_target":"HomeViewController","$element_container":"UITableView"}"#

    func harness(_ stage: MatchStage) throws -> StageHarness {
        let ctx = StageHarness.context()
        return try StageHarness(stages: [ValidateStage(config: .init(), context: ctx), DedupStage(config: .init(), context: ctx), stage])
    }

    func props(_ r: StageHarness.Result, _ i: Int) -> [String: Any] {
        r.enriched[i].value["properties"] as? [String: Any] ?? [:]
    }

    /// `batch.hits` of event `i`: (id, metric, grouping content).
    func hits(_ h: StageHarness, _ i: Int) -> [(String, MatchMetric, String?)] {
        return h.batch.hitRange(i).map { k in
            let hit = h.batch.hit(k)
            let id = h.batch.string(h.batch.id(ofHit: k)) ?? ""
            let content = h.batch.string(h.batch.content(ofHit: k))
            return (id, hit.metric, content)
        }
    }

    func testMatchedRulesParametersAndHits() throws {
        let stage = MatchStage(matcher: try RuleMatcher(rules: RulesFile.parse(Self.rulesText)), context: StageHarness.context())
        let h = try harness(stage)
        let events = [
            trackEvent(event: "$AppViewScreen", trackID: 1),
            trackEvent(event: "$AppClick", trackID: 2, properties: Self.button),
            trackEvent(event: "$AppClick", trackID: 3, properties: Self.cell),
            trackEvent(event: "$AppClick", trackID: 4, properties: #"{"$screen_name":"HomeViewController","$element_path":"UIWindow-UIView","$element_type":"UIButton","$element_index":1}"#),
            trackEvent(event: "$AppViewScreen", trackID: 5, properties: #"{"$screen_name":"HomeViewController","pageid":"client"}"#),
            trackEvent(event: "$AppViewScreen", trackID: 6, properties: #"{"$screen_name":"DebugMenuViewController"}"#),
            trackEvent(event: "$AppViewScreen", trackID: 1),  // a duplicate of the first: dropped before matching
        ]
        let r = try h.run([TestRecord(json: "[" + events.joined(separator: ",") + "]")])
        XCTAssertEqual(r.enriched.count, 6)

        XCTAssertEqual(props(r, 0)["$matched_rules"] as? [String], ["home", "HomeViewController"])
        XCTAssertEqual(props(r, 0)["pageid"] as? String, "234")
        XCTAssertEqual(props(r, 1)["$matched_rules"] as? [String], ["buy", "HomeViewController/buyTapped:"])
        XCTAssertEqual(props(r, 1)["eventid"] as? String, "e1")
        XCTAssertEqual(props(r, 1)["pageid"] as? String, "p1")
        XCTAssertEqual(props(r, 1)["ver"] as? String, "3.2.1", "pagePara from a property")
        XCTAssertEqual(props(r, 2)["$matched_rules"] as? [String], ["titles", "HomeViewController/UITableView/0"])
        XCTAssertEqual(props(r, 2)["eventid"] as? String, "cell")
        XCTAssertEqual(props(r, 2)["title"] as? String, "Sale", "pagePara from inside $element_content")
        XCTAssertNil(props(r, 3)["$matched_rules"], "index 1 is not the rule's index 2")
        XCTAssertEqual(props(r, 4)["pageid"] as? String, "client", "a client property is never overwritten")
        XCTAssertNil(props(r, 5)["$matched_rules"], "ignored page")

        XCTAssertEqual(hits(h, 0).map(\.0), ["\"home\"", "\"HomeViewController\""])
        XCTAssertEqual(hits(h, 0).map(\.1), [.pv, .pv])
        XCTAssertEqual(hits(h, 1).map(\.0), ["\"buy\"", "\"HomeViewController/buyTapped:\""])
        XCTAssertEqual(hits(h, 1).map(\.1), [.click, .click])
        XCTAssertEqual(hits(h, 1).map(\.2), [nil, nil])
        XCTAssertEqual(hits(h, 2).map(\.0), ["\"titles\"", "\"HomeViewController/UITableView/0\""])
        XCTAssertEqual(hits(h, 2).map(\.2), ["\"Sale\"", nil], "grouping content of the group_by_content rule only")
        XCTAssertEqual(hits(h, 3).count, 0)
        XCTAssertEqual(hits(h, 5).count, 0)
        XCTAssertEqual(h.batch.event(6).status, .dropped)
        XCTAssertEqual(h.batch.event(6).hitCount, 0, "duplicates are not matched")
        XCTAssertEqual(h.batch.matchHitCount, 8)
        XCTAssertEqual(stage.matchedCounter.value, 4)
    }

    /// Rules whose entries write only names that are no known property's (`eventid`, `pageid`): the pass over an
    /// event's properties that finds a client's own values runs only when some name has an entry name's length,
    /// and a client value is still never overwritten, whatever else the event carries.
    func testClientValuesAreKeptWhenEntriesNameNoKnownProperty() throws {
        let rules = """
        version: 1
        actions:
          PAGEPV:
            "HomeViewController": {userDefined: {pageid: "234", eventid: "pv"}, pagePara: {}}
        """
        let matcher = try RuleMatcher(rules: RulesFile.parse(rules))
        XCTAssertFalse(matcher.outputs.hasKnownNames)
        let h = try harness(MatchStage(matcher: matcher, context: StageHarness.context()))
        let events = [
            #"{"$screen_name":"HomeViewController"}"#,
            #"{"$screen_name":"HomeViewController","pageid":"client"}"#,
            #"{"$screen_name":"HomeViewController","pagexx":"other","$os":"iOS"}"#,
            #"{"$screen_name":"HomeViewController","$os":"iOS","eventid":"mine","item":"x"}"#,
            // More other names than the stage lists: it looks at every property.
            "{\"$screen_name\":\"HomeViewController\"," + (0..<20).map { "\"x\($0)\":\($0)," }.joined() + "\"pageid\":\"late\"}",
        ].enumerated().map { trackEvent(event: "$AppViewScreen", trackID: Int64($0.offset + 1), properties: $0.element) }
        let r = try h.run([TestRecord(json: "[" + events.joined(separator: ",") + "]")])
        XCTAssertEqual(r.enriched.count, 5)
        guard r.enriched.count == 5 else { return }
        XCTAssertEqual((0..<5).map { props(r, $0)["pageid"] as? String }, ["234", "client", "234", "234", "late"])
        XCTAssertEqual((0..<5).map { props(r, $0)["eventid"] as? String }, ["pv", "pv", "pv", "mine", "pv"])
        XCTAssertEqual(props(r, 2)["pagexx"] as? String, "other")
    }

    /// A `pagePara` reading a known property the stage finds anyway (`$app_version`): its value is taken from that
    /// pass, unless the first such property has an escaped name (never equal to the name's bytes, as before).
    func testPageParaOfAKnownPropertyComesFromTheFirstUnescapedOne() throws {
        let rules = """
        version: 1
        actions:
          PAGEPV:
            "HomeViewController":
              userDefined: {eventid: "pv"}
              pagePara:
                ver: {propertyName: "$app_version", propertyPath: "", containIn: "0"}
        """
        let matcher = try RuleMatcher(rules: RulesFile.parse(rules))
        XCTAssertTrue(matcher.outputs.hasKnownNames)
        XCTAssertEqual(matcher.outputs.otherNameLengths, 1 << 7 | 1 << 3, "eventid and ver; not $app_version")
        let h = try harness(MatchStage(matcher: matcher, context: StageHarness.context()))
        let events = [
            #"{"$screen_name":"HomeViewController","$os":"iOS","$app_version":"1.0"}"#,
            #"{"$screen_name":"HomeViewController","$app_v\u0065rsion":"2.0"}"#,
            #"{"$screen_name":"HomeViewController"}"#,
            #"{"$screen_name":"HomeViewController","ver":"mine","$app_version":"3.0"}"#,
            #"{"$screen_name":"HomeViewController","$lib_version":"9","$app_version":"4.0"}"#,
        ].enumerated().map { trackEvent(event: "$AppViewScreen", trackID: Int64($0.offset + 1), properties: $0.element) }
        let r = try h.run([TestRecord(json: "[" + events.joined(separator: ",") + "]")])
        XCTAssertEqual(r.enriched.count, 5)
        guard r.enriched.count == 5 else { return }
        XCTAssertEqual(props(r, 0)["ver"] as? String, "1.0")
        XCTAssertNil(props(r, 1)["ver"], "an escaped name is not the entry's property")
        XCTAssertNil(props(r, 2)["ver"])
        XCTAssertEqual(props(r, 3)["ver"] as? String, "mine", "a client value is never overwritten")
        XCTAssertEqual(props(r, 4)["ver"] as? String, "4.0", "a name of $app_version's length is no reason to look again")
        XCTAssertEqual((0..<5).map { props(r, $0)["eventid"] as? String }, ["pv", "pv", "pv", "pv", "pv"])
    }

    /// `where:` conditions read the batch's kept properties (escaped values decoded), after the cached match.
    func testConditionsOnBatchProperties() throws {
        let rules = """
        pages:
          - {id: sale, screen: HomeViewController, where: {$title: {regex: "^Sale"}}}
        elements:
          - id: phones
            path: "UIWindow-UIView"
            type: UIButton
            where: {item_name: [Phones, Tablets], price: {">=": 100}}
          - id: cells_on_sale
            path: "UIWindow-UITableView"
            type: UITableViewCell
            content_key: "UIView-UILabel(0)"
            content: {regex: "^Sa"}
        """
        let stage = MatchStage(matcher: try RuleMatcher(rules: RulesFile.parse(rules)), context: StageHarness.context())
        let h = try harness(stage)
        func click(_ id: Int64, _ extra: String) -> String {
            trackEvent(event: "$AppClick", trackID: id, properties:
                #"{"$screen_name":"HomeViewController","$element_path":"UIWindow-UIView","$element_type":"UIButton","# + extra + "}")
        }
        let events = [
            click(1, #""item_name":"Phones","price":120"#),
            click(2, #""item_name":"Phones","price":99.5"#),
            click(3, #""item_name":"Tab\u006cets","price":"100""#),
            click(4, #""item_name":"Laptops","price":500"#),
            click(5, #""price":500"#),
            trackEvent(event: "$AppViewScreen", trackID: 6, properties: #"{"$screen_name":"HomeViewController","$title":"Sale now"}"#),
            trackEvent(event: "$AppViewScreen", trackID: 7, properties: #"{"$screen_name":"HomeViewController","$title":"New"}"#),
            trackEvent(event: "$AppClick", trackID: 8, properties: Self.cell),
            trackEvent(event: "$AppClick", trackID: 9, properties: Self.cell.replacingOccurrences(of: "Sale", with: "New")),
        ]
        let r = try h.run([TestRecord(json: "[" + events.joined(separator: ",") + "]")])
        let matched = (0..<9).map { props(r, $0)["$matched_rules"] as? [String] ?? [] }
        XCTAssertEqual(matched, [["phones"], [], ["phones"], [], [], ["sale"], [], ["cells_on_sale"], []])
        XCTAssertEqual(hits(h, 0).map(\.0), ["\"phones\""])
        XCTAssertEqual(hits(h, 1).count, 0, "no hit for a candidate whose conditions fail")
        XCTAssertEqual(stage.matchedCounter.value, 4)
    }

    /// The release watchdog writes one `rules.health` record when a version's clicks on the rule's page stop
    /// matching it (the button moved into a stack view on 4.0).
    func testWatchdogWritesRulesHealth() throws {
        let rules = """
        elements:
          - {id: buy, screen: ProductViewController, path: "UIWindow-UIView-UIButton", type: UIButton}
        """
        let context = StageHarness.context()
        let stage = MatchStage(matcher: try RuleMatcher(rules: RulesFile.parse(rules)), context: context,
                               health: ("rules.health", .init(minEvents: 20), .zero))
        let h = try harness(stage)
        func click(_ id: Int, _ version: String, _ path: String) -> String {
            trackEvent(event: "$AppClick", trackID: Int64(id), properties:
                #"{"$screen_name":"ProductViewController","$element_path":"\#(path)","$element_type":"UIButton","$app_version":"\#(version)"}"#)
        }
        let old = (0..<30).map { click($0, "3.9", "UIWindow-UIView-UIButton") }
        let moved = (30..<60).map { click($0, "4.0", "UIWindow-UIView-UIStackView-UIButton") }
        _ = try h.run([TestRecord(json: "[" + old.joined(separator: ",") + "]")])
        XCTAssertEqual(h.output.topics.firstIndex(of: "rules.health"), nil, "nothing to report on one version")
        _ = try h.run([TestRecord(json: "[" + moved.joined(separator: ",") + "]")])
        let topic = try XCTUnwrap(h.output.topics.firstIndex(of: "rules.health"))
        let health = h.output.messages.indices.filter { h.output.messages[$0].topic == Int32(topic) }
        XCTAssertEqual(health.count, 1)
        XCTAssertEqual(h.output.keyString(health[0]), "buy|4.0")
        let record = try JSONSerialization.jsonObject(with: Data(h.output.valueString(health[0]).utf8)) as! [String: Any]
        XCTAssertEqual(record["rule"] as? String, "buy")
        XCTAssertEqual(record["app_version"] as? String, "4.0")
        XCTAssertEqual(record["events"] as? Int, 30)
        XCTAssertEqual(record["matched"] as? Int, 0)
        XCTAssertEqual(record["previous_version"] as? String, "3.9")
        XCTAssertEqual(record["previous_matched"] as? Int, 30)
        XCTAssertEqual(stage.healthAlerts?.value, 1)
        _ = try h.run([TestRecord(json: "[" + (60..<70).map { click($0, "4.0", "x") }.joined(separator: ",") + "]")])
        XCTAssertEqual(stage.healthAlerts?.value, 1, "once per rule and version")
    }

    func testConfigFromYAML() throws {
        let dir = try tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.rulesText.write(to: dir.appendingPathComponent("rules.yaml"), atomically: true, encoding: .utf8)
        func engine(_ keys: String) throws -> PipelineEngine {
            let spec = try PipelineSpec.parse(yaml: "stages:\n  - kind: match\n\(keys)", file: dir.appendingPathComponent("p.yaml").path)
            return try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Logger(label: "test"))
        }
        XCTAssertNoThrow(try engine("    rules: rules.yaml\n    reload: false\n    reload_check: 2s"))
        XCTAssertThrowsError(try engine("    rules: rules.yaml\n    reload_every: 2s")) { error in
            XCTAssertEqual((error as? PipelineError)?.code, .unknownKey, "\(error)")
            XCTAssertEqual((error as? PipelineError)?.location?.line, 4, "\(error)")
        }
        XCTAssertThrowsError(try engine("    rules: rules.yaml\n    reload_check: soon")) { error in
            XCTAssertEqual((error as? PipelineError)?.code, .badValue, "\(error)")
        }
        XCTAssertNoThrow(try engine("    rules: rules.yaml\n    health_topic: rules.health\n    health_min_events: 50\n    health_drop_ratio: 0.2\n    health_check: 10s"))
        XCTAssertThrowsError(try engine("    rules: rules.yaml\n    health_topic: rules.health\n    health_drop_ratio: 2")) { error in
            XCTAssertEqual((error as? PipelineError)?.code, .badValue, "\(error)")
            XCTAssertEqual((error as? PipelineError)?.location?.line, 5, "\(error)")
        }
        // A backfill's match stage: only the rules added or changed since the older file.
        let older = Self.rulesText.replacingOccurrences(of: "  - id: home\n    screen: HomeViewController\n", with: "")
        try older.write(to: dir.appendingPathComponent("older.yaml"), atomically: true, encoding: .utf8)
        let backfill = try engine("    rules: rules.yaml\n    rules_changed_since: older.yaml")
        let stage = try XCTUnwrap(backfill.stages.compactMap { $0 as? MatchStage }.first)
        XCTAssertEqual(stage.matcher.rules.pages.map(\.id), ["home"])
        XCTAssertTrue(stage.matcher.rules.elements.isEmpty && stage.matcher.rules.actions.isEmpty)
    }

    // MARK: - reloading

    static let v1 = """
    pages:
      - id: home
        screen: HomeViewController
      - id: cart
        screen: CartViewController
    """
    static let v2 = """
    pages:
      - id: home
        screen: HomeViewController
        app_versions: [">=1.0"]
      - id: home_again
        screen: HomeViewController
    """

    func tempDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-match-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A match stage over a rules file in a fresh directory, logging into `log`.
    func reloadingStage(_ text: String, log: LogCapture, reloadCheck: ConfigDuration = .zero) throws -> (MatchStage, String, URL) {
        let dir = try tempDirectory()
        let path = dir.appendingPathComponent("rules.yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let ctx = StageContext(logger: log.logger, baseDirectory: "", position: "0")
        let stage = try MatchStage(config: .init(rules: path, reloadCheck: reloadCheck), context: ctx)
        return (stage, path, dir)
    }

    /// One batch of `n` page views of HomeViewController (app version 3.2.1); each event's `$matched_rules`.
    func homeViews(_ h: StageHarness, _ n: Int, first: Int64) throws -> [[String]] {
        let events = (0..<n).map { k in
            trackEvent(event: "$AppViewScreen", trackID: first + Int64(k), properties: #"{"$screen_name":"HomeViewController","$app_version":"3.2.1"}"#)
        }
        let r = try h.run([TestRecord(json: "[" + events.joined(separator: ",") + "]")])
        XCTAssertEqual(r.enriched.count, n)
        return r.enriched.map { ($0.value["properties"] as? [String: Any])?["$matched_rules"] as? [String] ?? [] }
    }

    /// Runs batches until `done` holds or 5 seconds pass (the reload promise); returns the last batch's result.
    func runUntil(_ h: StageHarness, first: inout Int64, _ done: () -> Bool) throws -> [[String]] {
        let deadline = ContinuousClock.now + .seconds(5)
        var last: [[String]] = []
        repeat {
            last = try homeViews(h, 3, first: first)
            first += 3
            if done() { return last }
            usleep(5_000)
        } while ContinuousClock.now < deadline
        XCTFail("not done within 5 s")
        return last
    }

    func testValidReloadSwapsBetweenBatchesAndLogsWhatChanged() throws {
        let log = LogCapture()
        let (stage, path, dir) = try reloadingStage(Self.v1, log: log)
        defer { try? FileManager.default.removeItem(at: dir) }
        let h = try harness(stage)
        var first: Int64 = 1
        XCTAssertEqual(try homeViews(h, 3, first: first), Array(repeating: ["home"], count: 3))
        first += 3
        XCTAssertEqual(stage.version, 1)

        try LocationStageTests.replaceAtomically(path, with: Data(Self.v2.utf8))
        let after = try runUntil(h, first: &first) { stage.version == 2 }
        XCTAssertEqual(after, Array(repeating: ["home", "home_again"], count: 3), "the batch after the swap uses the new rules")
        XCTAssertEqual(stage.reloads.value, 1)
        XCTAssertEqual(stage.reloadFailures.value, 0)
        XCTAssertEqual(stage.versionCounter.value, 2)
        let entry = try XCTUnwrap(log.entries.first { $0.message == "rules reloaded" })
        XCTAssertEqual(entry.metadata["added"], "home_again")
        XCTAssertEqual(entry.metadata["removed"], "cart")
        XCTAssertEqual(entry.metadata["changed"], "home")
        XCTAssertEqual(entry.metadata["version"], "2")
        XCTAssertEqual(entry.metadata["pages"], "2")

        // An unchanged file is not loaded again.
        for _ in 0..<5 { _ = try homeViews(h, 1, first: first); first += 1 }
        XCTAssertEqual(stage.reloads.value, 1)
    }

    func testInvalidFileKeepsTheOldRulesAndLogsALocatedError() throws {
        let log = LogCapture()
        let (stage, path, dir) = try reloadingStage(Self.v1, log: log)
        defer { try? FileManager.default.removeItem(at: dir) }
        let h = try harness(stage)
        var first: Int64 = 1
        let broken = Self.v1 + "\n    index: two\n"  // line 6: a key page rules do not have
        try LocationStageTests.replaceAtomically(path, with: Data(broken.utf8))
        let during = try runUntil(h, first: &first) { stage.reloadFailures.value == 1 }
        XCTAssertEqual(during, Array(repeating: ["home"], count: 3), "the old rules stay in use")
        XCTAssertEqual(stage.version, 1)
        XCTAssertEqual(stage.reloads.value, 0)
        let entry = try XCTUnwrap(log.entries.first { $0.level == .error })
        XCTAssertEqual(entry.metadata["rules"], path)
        XCTAssertTrue(entry.metadata["error"]?.hasPrefix("\(path):6:5: unknown key 'index'") == true, "\(entry.metadata)")

        // Not retried while the file stays the same; picked up once fixed.
        for _ in 0..<5 { _ = try homeViews(h, 1, first: first); first += 1 }
        XCTAssertEqual(stage.reloadFailures.value, 1)
        try LocationStageTests.replaceAtomically(path, with: Data(Self.v2.utf8))
        let fixed = try runUntil(h, first: &first) { stage.version == 2 }
        XCTAssertEqual(fixed, Array(repeating: ["home", "home_again"], count: 3))

        // A deleted file keeps the loaded rules too.
        try FileManager.default.removeItem(atPath: path)
        XCTAssertEqual(try homeViews(h, 2, first: first), Array(repeating: ["home", "home_again"], count: 2))
        XCTAssertTrue(log.entries.contains { $0.message.hasPrefix("rules file is gone") })
    }

    /// Issue 13, class 5: a rules file nested 5,000 deep overflowed the stack of a running worker on reload.
    func testReloadOfADeeplyNestedRulesFileKeepsTheOldRules() throws {
        let log = LogCapture()
        let (stage, path, dir) = try reloadingStage(Self.v1, log: log)
        defer { try? FileManager.default.removeItem(at: dir) }
        let h = try harness(stage)
        var first: Int64 = 1
        let deep = "pages: " + String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000) + "\n"
        try LocationStageTests.replaceAtomically(path, with: Data(deep.utf8))
        let during = try runUntil(h, first: &first) { stage.reloadFailures.value == 1 }
        XCTAssertEqual(during, Array(repeating: ["home"], count: 3), "the old rules stay in use")
        XCTAssertEqual(stage.version, 1)
        let entry = try XCTUnwrap(log.entries.first { $0.level == .error })
        XCTAssertTrue(entry.metadata["error"]?.hasPrefix("\(path):1:") == true, "\(entry.metadata)")
        XCTAssertTrue(entry.metadata["error"]?.contains("nested more than") == true, "\(entry.metadata)")
    }

    func testEveryBatchSeesOneRuleSetWhileTheFileChanges() throws {
        let log = LogCapture()
        let (stage, path, dir) = try reloadingStage(Self.v1, log: log)
        defer { try? FileManager.default.removeItem(at: dir) }
        let h = try harness(stage)
        let writer = DispatchGroup()
        DispatchQueue.global().async(group: writer) {
            for k in 0..<30 {
                usleep(4_000)
                try? LocationStageTests.replaceAtomically(path, with: Data((k % 2 == 0 ? Self.v2 : Self.v1).utf8))
            }
            try? LocationStageTests.replaceAtomically(path, with: Data(Self.v2.utf8))
        }
        var first: Int64 = 1
        var seen = Set<[String]>()
        var batches = 0
        while writer.wait(timeout: .now()) == .timedOut || batches < 5 {
            let rules = try homeViews(h, 6, first: first)
            first += 6
            XCTAssertEqual(Set(rules).count, 1, "batch \(batches) matched by one rule set: \(rules)")
            seen.formUnion(rules)
            batches += 1
        }
        XCTAssertEqual(try runUntil(h, first: &first) { stage.loadedFileMatches(path) }, Array(repeating: ["home", "home_again"], count: 3))
        XCTAssertEqual(seen, [["home"], ["home", "home_again"]])
        XCTAssertGreaterThanOrEqual(stage.reloads.value, 1)
        XCTAssertEqual(stage.reloadFailures.value, 0)
    }

    func testReloadOffAndCheckInterval() throws {
        let dir = try tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("rules.yaml").path
        try Self.v1.write(toFile: path, atomically: true, encoding: .utf8)
        let off = try MatchStage(config: .init(rules: path, reload: false), context: StageHarness.context())
        let slow = try MatchStage(config: .init(rules: path, reloadCheck: .minutes(10)), context: StageHarness.context())
        let hOff = try harness(off), hSlow = try harness(slow)
        try LocationStageTests.replaceAtomically(path, with: Data(Self.v2.utf8))
        for k in 0..<20 {
            XCTAssertEqual(try homeViews(hOff, 1, first: Int64(k)), [["home"]])
            XCTAssertEqual(try homeViews(hSlow, 1, first: Int64(k)), [["home"]], "not checked before reload_check passed")
            usleep(10_000)
        }
        XCTAssertEqual(off.version, 1)
        XCTAssertEqual(slow.version, 1)
    }
}

extension MatchStage {
    /// Whether the loaded rules are those of the file now at `path`.
    func loadedFileMatches(_ path: String) -> Bool {
        guard let now = try? RulesFile.load(path: path) else { return false }
        return RulesDiff(from: matcher.rules, to: now).isEmpty
    }
}

/// Collects log entries (level, message, metadata) for assertions.
final class LogCapture: Sendable {
    struct Entry: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }
    private let store = Mutex<[Entry]>([])

    var entries: [Entry] { store.withLock { $0 } }

    var logger: Logger {
        Logger(label: "test") { _ in Handler(capture: self) }
    }

    struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { _, b in b }
            let entry = Entry(level: event.level, message: "\(event.message)", metadata: all.mapValues { "\($0)" })
            capture.store.withLock { $0.append(entry) }
        }
    }
}
