import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import XCTest
@testable import MaidianStages

final class NoiseFilterStageTests: XCTestCase {
    func harness(_ config: NoiseFilterStage.Config = .init()) throws -> (StageHarness, NoiseFilterStage) {
        let ctx = StageHarness.context()
        let stage = try NoiseFilterStage(config: config, context: ctx)
        return (try StageHarness(stages: [ValidateStage(config: .init(), context: ctx), stage]), stage)
    }

    /// A tab-bar click as the iOS SDK records it: a UITabBarButton's control event sent to its UITabBar.
    func click(_ action: String, at time: Int64, user: String = "u1", trackID: Int64, target: String = "UITabBar") -> String {
        trackEvent(
            event: "$AppClick", time: time, distinctID: user, trackID: trackID,
            properties: #"{"$screen_name":"HomeViewController","$element_path":"UIWindow-UILayoutContainerView-UITabBar","$element_type":"UITabBarButton","$element_index":1,"$element_kind":"control","$element_target":"\#(target)","$element_action":"\#(action)"}"#)
    }

    func run(_ h: StageHarness, _ records: [[String]]) throws -> [String] {
        let r = try h.run(records.map { TestRecord(json: "[" + $0.joined(separator: ",") + "]") })
        return r.enriched.map { ($0.value["properties"] as? [String: Any])?["$element_action"] as? String ?? ($0.value["event"] as? String ?? "") }
    }

    let t: Int64 = 1_763_700_000_000

    func testTabBarTapKeepsOnlyTheItemClick() throws {
        let (h, stage) = try harness()
        let kept = try run(h, [[
            click("_buttonDown:", at: t, trackID: 1),
            click("_tabBarItemClicked:", at: t + 40, trackID: 2),
            click("_buttonUp:", at: t + 41, trackID: 3),
            trackEvent(event: "$AppViewScreen", time: t + 60, trackID: 4),
        ]])
        XCTAssertEqual(kept, ["_tabBarItemClicked:", "$AppViewScreen"])
        XCTAssertEqual((0..<h.batch.eventCount).map { h.batch.event($0).status }, [.dropped, .live, .dropped, .live])
        XCTAssertEqual(stage.dropped.value, 2)
        XCTAssertEqual(stage.droppedByRule[0].name, "tab_bar_touch")
        XCTAssertEqual(stage.droppedByRule[0].value, 2)
    }

    func testWhatIsNotBeside() throws {
        let (h, stage) = try harness()
        let kept = try run(h, [[
            click("_buttonDown:", at: t, trackID: 1),                                  // a touch with no item click: kept
            click("_tabBarItemClicked:", at: t + 5_000, user: "u2", trackID: 2),
            click("_buttonUp:", at: t + 5_010, user: "u3", trackID: 3),                // another user: kept
            click("_buttonUp:", at: t + 6_001, user: "u2", trackID: 4),                // 1001 ms later: kept
            click("_buttonDown:", at: t + 4_500, user: "u2", trackID: 5, target: "MyTabBar"),  // another target: kept
            click("_buttonDown:", at: t + 4_000, user: "u2", trackID: 6),              // exactly 1000 ms before: dropped
        ]])
        XCTAssertEqual(kept, ["_buttonDown:", "_tabBarItemClicked:", "_buttonUp:", "_buttonUp:", "_buttonDown:"])
        XCTAssertEqual(stage.dropped.value, 1)
        XCTAssertEqual(h.batch.event(5).status, .dropped)
    }

    func testBesideAcrossRecordsOfTheBatchAndNotAcrossBatches() throws {
        let (h, stage) = try harness()
        XCTAssertEqual(try run(h, [[click("_buttonDown:", at: t, trackID: 1)], [click("_tabBarItemClicked:", at: t + 50, trackID: 2)]]),
                       ["_tabBarItemClicked:"], "two uploads of one batch")
        XCTAssertEqual(try run(h, [[click("_buttonUp:", at: t + 60, trackID: 3)]]), ["_buttonUp:"], "the item click was in an earlier batch")
        XCTAssertEqual(stage.dropped.value, 1)
    }

    func testOtherEventsAndEscapedOrDroppedActionsAreLeftAlone() throws {
        let (h, stage) = try harness()
        let notAClick = trackEvent(event: "$AppViewScreen", time: t, trackID: 1, properties: #"{"$element_action":"_buttonDown:","$element_target":"UITabBar"}"#)
        let escaped = trackEvent(event: "$AppClick", time: t, trackID: 2, properties: #"{"$element_action":"_button\u0044own:","$element_target":"UITabBar"}"#)
        let kept = try run(h, [[notAClick, escaped, click("_tabBarItemClicked:", at: t, trackID: 3)]])
        XCTAssertEqual(kept.count, 3)
        XCTAssertEqual(stage.dropped.value, 0)
    }

    func testCustomRules() throws {
        let (h, stage) = try harness(.init(rules: [
            .init(name: "keyboard", actions: ["_keyboardTap:"], targets: ["UIKBKeyView"]),
            .init(name: "loose_tab", actions: ["_buttonDown:"], beside: ["_tabBarItemClicked:"], within: .milliseconds(100), sameTarget: false),
        ]))
        let kept = try run(h, [[
            click("_keyboardTap:", at: t, trackID: 1, target: "UIKBKeyView"),      // no beside: always noise
            click("_keyboardTap:", at: t, trackID: 2, target: "MyView"),           // not one of the targets
            click("_tabBarItemClicked:", at: t + 1_000, trackID: 3),
            click("_buttonDown:", at: t + 950, trackID: 4, target: "MyTabBar"),    // any target, within 100 ms
            click("_buttonDown:", at: t + 850, trackID: 5),                        // 150 ms: kept
            click("_buttonUp:", at: t + 1_001, trackID: 6),                        // not in these rules
        ]])
        XCTAssertEqual(kept, ["_keyboardTap:", "_tabBarItemClicked:", "_buttonDown:", "_buttonUp:"])
        XCTAssertEqual(stage.droppedByRule.map(\.value), [1, 1])
        XCTAssertEqual(stage.dropped.value, 2)
    }

    func testEmptyRulesDropNothing() throws {
        let (h, stage) = try harness(.init(rules: []))
        XCTAssertEqual(try run(h, [[click("_buttonDown:", at: t, trackID: 1), click("_tabBarItemClicked:", at: t, trackID: 2)]]).count, 2)
        XCTAssertEqual(stage.dropped.value, 0)
    }

    // MARK: - configuration

    func engine(_ keys: String) throws -> PipelineEngine {
        let spec = try PipelineSpec.parse(yaml: "stages:\n  - kind: noise_filter\n\(keys)", file: "p.yaml")
        return try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Logger(label: "test"))
    }

    func config(_ engine: PipelineEngine) -> [NoiseFilterStage.Rule] { (engine.stages[0] as! NoiseFilterStage).rules }

    func testConfigFromYAML() throws {
        XCTAssertEqual(config(try engine("")), [.tabBarTouches], "the default")
        XCTAssertEqual(config(try engine("    rules: []")), [])
        let rules = config(try engine("""
            rules:
              - name: kb
                actions: ["_keyboardTap:"]
                targets: [UIKBKeyView]
              - name: tab
                actions: ["_buttonDown:", "_buttonUp:"]
                beside: ["_tabBarItemClicked:"]
                within: 500ms
                same_target: false
        """))
        XCTAssertEqual(rules, [
            .init(name: "kb", actions: ["_keyboardTap:"], targets: ["UIKBKeyView"]),
            .init(name: "tab", actions: ["_buttonDown:", "_buttonUp:"], beside: ["_tabBarItemClicked:"], within: .milliseconds(500), sameTarget: false),
        ])
    }

    func testBadConfig() {
        func fails(_ keys: String, _ code: PipelineError.Code, line: Int, _ message: String, file: StaticString = #filePath, at: UInt = #line) {
            XCTAssertThrowsError(try engine(keys), file: file, line: at) { error in
                let e = error as? PipelineError
                XCTAssertEqual(e?.code, code, "\(error)", file: file, line: at)
                XCTAssertEqual(e?.location?.line, line, "\(error)", file: file, line: at)
                XCTAssertTrue(e?.message.contains(message) == true, "\(error)", file: file, line: at)
            }
        }
        fails("    rulez: []", .unknownKey, line: 3, "unknown key 'rulez'")
        fails("    rules:\n      - name: a\n        actions: [x]\n        besides: [y]", .unknownKey, line: 6, "unknown key 'besides'")
        fails("    rules:\n      - name: A-1\n        actions: [x]", .badValue, line: 4, "lower-case")
        fails("    rules:\n      - name: a\n        actions: []", .badValue, line: 5, "at least one")
        fails("    rules:\n      - name: a\n        actions: [x]\n        beside: [x]", .badValue, line: 6, "in both")
        fails("    rules:\n      - name: a\n        actions: [x]\n      - name: a\n        actions: [y]", .badValue, line: 4, "two noise rules")
        fails("    rules:\n      - name: a\n        actions: [x]\n        within: soon", .badValue, line: 6, "expected a duration")
    }
}
