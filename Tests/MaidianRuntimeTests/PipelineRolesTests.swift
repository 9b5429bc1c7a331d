import MaidianTools
import Foundation
import Logging
import MaidianPipeline
import MaidianRuntime
import MaidianStages
import XCTest

/// The pipeline-level `roles:` reaches every stage: with custom page-enter, page-leave and click event
/// names, `match` counts their page views and clicks and `windows` pairs their visits into dwell, end to
/// end through the engine and the merger (the offline runner of `maidian test`).
final class PipelineRolesTests: XCTestCase {
    private let rules = """
        version: 1
        pages:
          - id: home_pv
            screen: HomeViewController
        elements:
          - id: buy
            path: UIWindow-UIView
            type: UIButton
            index: 0
        """

    private func pipeline(roles: String) -> String {
        """
        name: roles
        source:
          topic: events.raw
        stages:
          - kind: validate
          - kind: match
            rules: rules.yaml
            reload: false
          - kind: windows
            window: 60s
        \(roles)
        outputs:
          - kind: enriched
          - kind: dead_letter
        """
    }

    /// One user opens Home with `MyScreen`, taps buy with `MyTap`, leaves with `MyLeave` 30 s later; a
    /// default `$AppViewScreen` is sent too, which the custom roles make no page view.
    private let tests = """
        pipeline: pipeline.yaml
        shared:
          u: &u {type: track, distinct_id: user1, lib: {$lib: iOS, $app_version: 1.0}}
        tests:
          - name: custom roles
            input:
              - key: a1
                events:
                  - {<<: *u, event: MyScreen, time: 1763700010000, properties: {$screen_name: HomeViewController}}
                  - {<<: *u, event: MyTap, time: 1763700015000, properties: {$screen_name: HomeViewController, $element_path: UIWindow-UIView, $element_type: UIButton, $element_index: 0}}
                  - {<<: *u, event: MyLeave, time: 1763700040000, properties: {$screen_name: HomeViewController}}
                  - {<<: *u, event: $AppViewScreen, time: 1763700041000, properties: {$screen_name: HomeViewController}}
            expect:
              metrics.counts:
                contains:
                  - {metric: pv, rule: home_pv, window_start: 1763700000000, count: 1, users: 1}
                  - {metric: click, rule: buy, window_start: 1763700000000, count: 1, users: 1}
                  - {metric: dwell, rule: home_pv, window_start: 1763700000000, count: 1, sum_ms: 30000}
              metrics.dwell:
                count: 1
                contains:
                  - {distinct_id: user1, page: HomeViewController, rules: [home_pv], duration_ms: 30000, closed_by: leave}
              events.enriched:
                contains:
                  - {event: MyScreen, properties: {$matched_rules: [home_pv]}}
                  - {event: MyTap, properties: {$matched_rules: [buy]}}
                absent:
                  - {event: $AppViewScreen, properties: {$matched_rules: [home_pv]}}
        """

    private let customRoles = """
        roles:
          page_enter: [MyScreen]
          page_leave: [MyLeave]
          click: [MyTap]
        """

    private func run(roles: String) throws -> [PipelineTestRunner.Outcome] {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-roles-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try rules.write(to: dir.appendingPathComponent("rules.yaml"), atomically: true, encoding: .utf8)
        try pipeline(roles: roles).write(to: dir.appendingPathComponent("pipeline.yaml"), atomically: true, encoding: .utf8)
        let testPath = dir.appendingPathComponent("roles.test.yaml").path
        try tests.write(toFile: testPath, atomically: true, encoding: .utf8)
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let runner = PipelineTestRunner(registry: BuiltinStages.registry, logger: logger)
        return try runner.run(PipelineTestFile.load(path: testPath), path: testPath)
    }

    func testCustomRolesCountPageViewsClicksAndDwell() throws {
        let outcomes = try run(roles: customRoles)
        XCTAssertEqual(outcomes.count, 1)
        XCTAssertEqual(outcomes.flatMap(\.failures), [])
    }

    /// The same traffic without the custom roles: the expectations fail (the test above can fail).
    func testDefaultRolesDoNotCountTheCustomEvents() throws {
        let outcomes = try run(roles: "")
        XCTAssertEqual(outcomes.count, 1)
        XCTAssertFalse(outcomes[0].passed)
        let failures = outcomes[0].failures.joined(separator: "\n")
        XCTAssertTrue(failures.contains("metrics.counts"), failures)
        XCTAssertTrue(failures.contains("metrics.dwell"), failures)
    }
}
