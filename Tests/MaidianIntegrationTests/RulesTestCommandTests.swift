import Foundation
import Logging
import MaidianPipeline
import MaidianRuntime
import MaidianStages
import MaidianTools
import XCTest

/// `maidian rules test` on the recorded sample: every rule's matches equal the sum of the `pv`/`click` counts
/// of that rule in `sample.expected.json` (the sample has no late events and ignored pages are never matched,
/// so the windowed counts add up to the matches).
final class RulesTestCommandTests: XCTestCase {
    let traffic = Integration.shared.appendingPathComponent("traffic")
    let geo = Integration.shared.appendingPathComponent("geo/test-city.mmdb").path
    var rules: String { traffic.appendingPathComponent("rules-sample.yaml").path }
    var sample: String { traffic.appendingPathComponent("sample.ndjson").path }

    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.fileExists(atPath: sample), "needs testdata/traffic")
    }

    /// Rule id → sum of `count` over the rule's `pv` and `click` keys (`{metric}|{rule}|{window}|{dims}`).
    func expectedMatches() throws -> [String: Int] {
        let expected = try JSONSerialization.jsonObject(with: Data(contentsOf: traffic.appendingPathComponent("sample.expected.json"))) as! [String: Any]
        var sums: [String: Int] = [:]
        for (key, entry) in expected["counts"] as! [String: [String: Any]] {
            let parts = key.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0] == "pv" || parts[0] == "click" else { continue }
            sums[String(parts[1]), default: 0] += try XCTUnwrap(entry["count"] as? Int)
        }
        return sums
    }

    func testSampleMatchesEqualExpectedCounts() throws {
        var env = ProcessInfo.processInfo.environment
        env["MAIDIAN_GEO_DB"] = geo
        let spec = try PipelineSpec.load(path: Integration.root.appendingPathComponent("pipelines/app-analytics.yaml").path, environment: env)
        let test = try RulesTestRun(spec: spec, registry: BuiltinStages.registry, rules: rules, logger: Logger(label: "rules-test"))
        let read = try Bench.replay(path: sample, topic: spec.source.topic, partitions: Int32(spec.source.partitions)) { try test.process(&$0) }
        XCTAssertEqual(read.records, 9568)
        let report = test.result
        let want = try expectedMatches()
        XCTAssertEqual(report.rules.count, 14)
        XCTAssertEqual(Set(want.keys).subtracting(report.rules.map(\.id)), [], "every rule of the answers is in the rules file")
        for r in report.rules {
            XCTAssertEqual(r.matches, want[r.id] ?? 0, "matches of \(r.id)")
            XCTAssertEqual(r.examples.count, min(3, r.matches), "examples of \(r.id)")
        }
        XCTAssertEqual(report.unmatched, report.rules.filter { want[$0.id] == nil }.map(\.id))
        XCTAssertEqual(report.totals.late, 0)
        XCTAssertGreaterThan(report.totals.dropped, 0, "duplicates were dropped, not counted")
    }

    func testCommandLine() throws {
        let child = try Integration.Child(Integration.binary, ["rules", "test", rules, "--recording", sample, "--json"], environment: ["MAIDIAN_GEO_DB": geo], name: "rules-test")
        XCTAssertEqual(child.wait(timeout: 120), 0, child.stderr)
        let json = try JSONSerialization.jsonObject(with: Data(child.stdout.utf8)) as! [String: Any]
        let rulesOut = try XCTUnwrap(json["rules"] as? [String: [String: Any]])
        let want = try expectedMatches()
        XCTAssertEqual(rulesOut.count, 14)
        for (id, r) in rulesOut {
            XCTAssertEqual(r["matches"] as? Int, want[id] ?? 0, "matches of \(id)")
            XCTAssertEqual((r["examples"] as? [[String: Any]])?.first?["distinct_id"].map { $0 is String }, r["matches"] as? Int == 0 ? nil : true)
        }
        XCTAssertEqual(json["unmatched"] as? [String], [])

        // Near misses of one rule, in text.
        let focus = try Integration.Child(Integration.binary, ["rules", "test", rules, "--recording", sample, "--rule", "home_cell_1_1"], environment: ["MAIDIAN_GEO_DB": geo], name: "rules-test-focus")
        XCTAssertEqual(focus.wait(timeout: 120), 0, focus.stderr)
        XCTAssertTrue(focus.stdout.contains("near misses of home_cell_1_1: clicks with $element_path"), focus.stdout)
        XCTAssertTrue(focus.stdout.contains("…-UITableViewCell(1-[-1-]{+"), focus.stdout)

        // A rule id that does not exist is an error.
        let bad = try Integration.Child(Integration.binary, ["rules", "test", rules, "--recording", sample, "--rule", "home"], environment: ["MAIDIAN_GEO_DB": geo], name: "rules-test-bad")
        XCTAssertEqual(bad.wait(timeout: 120), 1)
        XCTAssertTrue(bad.stderr.contains("no rule 'home'"), bad.stderr)
    }
}
