import Foundation
import Logging
import MaidianKafka
import XCTest

/// `maidian replay --rules-changed-since` on the mock cluster: the live job ran with the old rules; the
/// backfill writes the counts of the rules added or changed since into the live metrics.counts, which then
/// holds what a job that had the new rules from the start wrote (compared on a second cluster).
final class BackfillReplayTests: XCTestCase {
    func testBackfillIntoTheLiveCountsTopic() throws {
        let sample = try Integration.sharedFile("traffic/sample.ndjson")
        let newRules = try Integration.sharedFile("traffic/rules-sample.yaml")
        let text = try String(contentsOf: newRules, encoding: .utf8)
        // The old file: `any_image_tap` not drawn yet, `cart_v32` on fewer versions.
        let image = "  - id: any_image_tap\n    identifier_regex: '^UIWindow-.*-UIView-UIImageView\\(0\\)_\\[null\\]$'\n"
        XCTAssertTrue(text.contains(image))
        let oldText = text.replacingOccurrences(of: image, with: "")
            .replacingOccurrences(of: #"app_versions: [">=3.2.0", "<4.0.0"]"#, with: #"app_versions: [">=3.2.0", "<3.2.1"]"#)
        let oldRules = FileManager.default.temporaryDirectory.appendingPathComponent("backfill-old-\(UUID().uuidString.prefix(8)).yaml")
        try oldText.write(to: oldRules, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: oldRules) }

        let logger = Logger(label: "backfill-test")
        let live = try EmbeddedBroker(brokers: 1, logger: logger)
        let fromStart = try EmbeddedBroker(brokers: 1, logger: logger)
        let windowed = ["metrics.counts", "metrics.dwell", "crash.trails"]
        let group = "live-\(UUID().uuidString.prefix(8))"
        for b in [live, fromStart] {
            try b.createTopic("events.raw", partitions: 8)
            try b.createTopic("events.enriched", partitions: 8)
            try b.createTopic("events.dlq", partitions: 4)
            for t in windowed { try b.createTopic(t, partitions: 4) }
            try b.createTopic("\(group).partials", partitions: 4)
            let out = try Integration.run(Integration.python, Integration.pythonArgs("kafka_produce_recording.py", [b.bootstrapServers, "events.raw", sample.path]), timeout: 180)
            XCTAssertGreaterThan(Int(out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0, 9000)
        }
        try live.createTopic("events.enriched.replay", partitions: 8)
        try live.createTopic("events.dlq.replay", partitions: 4)
        for t in windowed.dropFirst() { try live.createTopic(t + ".replay", partitions: 4) }
        try live.createTopic("\(group).replay-0.partials", partitions: 4)

        let pipeline = Integration.root.appendingPathComponent("pipelines/app-analytics.yaml").path
        func env(_ b: EmbeddedBroker, _ rules: String) -> [String: String] {
            [
                "MAIDIAN_BROKERS": b.bootstrapServers, "MAIDIAN_GROUP": group, "MAIDIAN_SESSION_TIMEOUT": "6s",
                "MAIDIAN_GEO_DB": Integration.shared.appendingPathComponent("geo/test-city.mmdb").path, "MAIDIAN_RULES": rules,
            ]
        }
        let old = try Integration.Child(Integration.binary, ["run", pipeline, "--until-end"], environment: env(live, oldRules.path), name: "backfill-live")
        let reference = try Integration.Child(Integration.binary, ["run", pipeline, "--until-end"], environment: env(fromStart, newRules.path), name: "backfill-reference")
        XCTAssertEqual(old.wait(timeout: 240), 0, old.stderr.suffix(4000).description)
        XCTAssertEqual(reference.wait(timeout: 240), 0, reference.stderr.suffix(4000).description)
        func lastPerKey(_ b: EmbeddedBroker) throws -> [String: String] {
            var last: [String: String] = [:]
            for r in try Integration.dumpTopics(bootstrap: b.bootstrapServers, ["metrics.counts"]) { last[r.key ?? ""] = r.value }
            return last
        }
        let before = try lastPerKey(live)

        let backfill = try Integration.Child(
            Integration.binary, ["replay", pipeline, "--from", "0", "--rules-changed-since", oldRules.path, "--progress", "off"],
            environment: env(live, newRules.path), name: "backfill-replay")
        XCTAssertEqual(backfill.wait(timeout: 240), 0, backfill.stderr.suffix(4000).description)
        XCTAssertTrue(backfill.stderr.contains("backfill of 2 rules"), backfill.stderr.suffix(2000).description)

        let after = try lastPerKey(live), want = try lastPerKey(fromStart)
        func rule(_ key: String) -> String { String(key.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)[1]) }
        let recomputed: Set<String> = ["any_image_tap", "cart_v32"]
        XCTAssertFalse(before.keys.contains { rule($0) == "any_image_tap" })
        XCTAssertGreaterThan(want.keys.filter { rule($0) == "any_image_tap" }.count, 0)
        XCTAssertEqual(after.filter { !recomputed.contains(rule($0.key)) }, before.filter { !recomputed.contains(rule($0.key)) },
                       "the other rules' keys are not written")
        XCTAssertEqual(after.filter { want[$0.key] != nil }, want, "the live topic holds what a job with the new rules from the start wrote")
    }
}
