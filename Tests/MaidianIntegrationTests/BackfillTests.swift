import Foundation
import Logging
import MaidianPipeline
import MaidianRecording
import MaidianRuntime
import MaidianStages
import MaidianTools
import XCTest

/// `replay --rules-changed-since`: a rule drawn later gets the counts it would have had from the start, and
/// the keys of the other rules are not written. Run the way `maidian bench` runs the whole job (in memory, the
/// partials merged), over the sample traffic.
final class BackfillTests: XCTestCase {
    func testCountsOfRulesAddedOrChangedLaterEqualARunThatHadThemFromTheStart() throws {
        let sample = try Integration.sharedFile("traffic/sample.ndjson")
        let newRules = try Integration.sharedFile("traffic/rules-sample.yaml")
        // The old file: `cells_by_title` not drawn yet, `cart_v32` on fewer versions.
        let text = try String(contentsOf: newRules, encoding: .utf8)
        let cells = """
          - id: cells_by_title
            path: "UIWindow-UITransitionView-UIDropShadowView-UILayoutContainerView-UITransitionView-UIViewControllerWrapperView-UILayoutContainerView-UINavigationTransitionView-UIViewControllerWrapperView-UIView-UITableView"
            type: UITableViewCell
            section: 2
            content_key: "UIView-UILabel(0)"
            group_by_content: true

        """
        XCTAssertTrue(text.contains(cells))
        XCTAssertTrue(text.contains(#"app_versions: [">=3.2.0", "<4.0.0"]"#))
        let oldText = text.replacingOccurrences(of: cells, with: "")
            .replacingOccurrences(of: #"app_versions: [">=3.2.0", "<4.0.0"]"#, with: #"app_versions: [">=3.2.0", "<3.2.1"]"#)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-backfill-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let oldRules = dir.appendingPathComponent("old-rules.yaml").path
        try oldText.write(toFile: oldRules, atomically: true, encoding: .utf8)

        let source = Bench.prepare(try Recording.read(path: sample.path), partitions: 8)
        func spec(_ rules: String) throws -> PipelineSpec {
            try PipelineSpec.load(path: Integration.root.appendingPathComponent("pipelines/app-analytics.yaml").path, environment: [
                "MAIDIAN_GEO_DB": Integration.shared.appendingPathComponent("geo/test-city.mmdb").path, "MAIDIAN_RULES": rules,
            ])
        }
        /// metrics.counts as a compacted topic holds it: the last value per key.
        func counts(_ spec: PipelineSpec) throws -> [String: String] {
            let engine = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Logger(label: "backfill"))
            var out: [String: String] = [:]
            _ = try Bench.run(engine: engine, records: source, topic: spec.source.topic, batchSize: 1000, merge: true) { _, o in
                for (i, m) in o.messages.enumerated() where o.topics[Int(m.topic)] == "metrics.counts" { out[o.keyString(i) ?? ""] = o.valueString(i) }
            }
            return out
        }
        func rule(_ key: String) -> String { String(key.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)[1]) }

        let fromTheStart = try counts(spec(newRules.path))
        let live = try counts(spec(oldRules))
        let backfill = try counts(MatchStage.backfill(spec(newRules.path), changedSince: oldRules))

        let recomputed: Set<String> = ["cells_by_title", "cart_v32"]
        XCTAssertEqual(Set(backfill.keys.map(rule)), recomputed, "only the added and the changed rule are written")
        XCTAssertEqual(backfill, fromTheStart.filter { recomputed.contains(rule($0.key)) }, "their counts, as if drawn from the start")
        XCTAssertFalse(live.keys.contains { rule($0) == "cells_by_title" })
        XCTAssertNotEqual(live.filter { rule($0.key) == "cart_v32" }, backfill.filter { rule($0.key) == "cart_v32" }, "the change shows")
        // The live topic after the backfill: its other keys as they were, which are those of a run with the new rules.
        var after = live
        for (k, v) in backfill { after[k] = v }
        XCTAssertEqual(after.filter { !recomputed.contains(rule($0.key)) }, live.filter { !recomputed.contains(rule($0.key)) })
        XCTAssertEqual(fromTheStart.filter { !recomputed.contains(rule($0.key)) }, live.filter { !recomputed.contains(rule($0.key)) })
        XCTAssertEqual(after.filter { fromTheStart[$0.key] != nil }, fromTheStart,
                       "every key of the run with the new rules has its value (a key only the old cart_v32 had stays)")
    }
}
