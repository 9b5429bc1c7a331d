import Foundation
import Logging
import MaidianKafka
import XCTest

/// The golden test of wire format §1, §2 and §5 on the recorded sample traffic: an independent client loads
/// `sample.ndjson` into an 8-partition raw topic on the mock cluster, two workers of one group run with
/// `--until-end`, and an independent client reads the outputs back.
final class GoldenSampleTests: XCTestCase {
    func testSampleTrafficTwoWorkers() throws {
        try Self.runGolden(recording: "sample", records: 9568)
    }

    /// A batch bound (`source.limits.max_batch_bytes`) that cuts every poll into several batches, on a worker
    /// whose polls also bring internal records to merge: the same answers. (The merger's outputs were numbered
    /// as if the whole poll stayed one batch, past the records a cut batch kept, and the worker trapped.)
    func testSampleTrafficWithPollsCutByTheBatchBound() throws {
        let original = try String(contentsOf: Integration.root.appendingPathComponent("pipelines/app-analytics.yaml"), encoding: .utf8)
        let limits = "    max_events_per_record: 10000\n"
        XCTAssertTrue(original.contains(limits))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-bound-\(UUID().uuidString.prefix(8)).yaml").path
        try original.replacingOccurrences(of: limits, with: limits + "    max_batch_bytes: 32KiB\n").write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Self.runGolden(recording: "sample", records: 9568, workers: 1, pipeline: path)
    }

    /// Loads `traffic/<recording>.ndjson`, runs two workers until the end and checks every output against
    /// `traffic/<recording>.expected.json`.
    static func runGolden(recording: String, records recordCount: Int, workers workerCount: Int = 2, pipeline pipelinePath: String? = nil,
                          file: StaticString = #filePath, line: UInt = #line) throws {
        let sample = Integration.shared.appendingPathComponent("traffic/\(recording).ndjson")
        let expectedURL = Integration.shared.appendingPathComponent("traffic/\(recording).expected.json")
        guard FileManager.default.fileExists(atPath: sample.path) else {
            XCTFail("missing \(sample.path): the golden test needs testdata/traffic")
            return
        }
        let expected = try JSONSerialization.jsonObject(with: Data(contentsOf: expectedURL)) as! [String: Any]

        let broker = try EmbeddedBroker(brokers: 1, logger: Logger(label: "golden"))
        try broker.createTopic("events.raw", partitions: 8)
        try broker.createTopic("events.enriched", partitions: 8)
        try broker.createTopic("events.dlq", partitions: 4)
        for t in ["metrics.counts", "metrics.dwell", "crash.trails"] { try broker.createTopic(t, partitions: 4) }
        let group = "golden-\(UUID().uuidString.prefix(8))"
        try broker.createTopic("\(group).partials", partitions: 4)
        let bootstrap = broker.bootstrapServers

        let produced = try Integration.run(Integration.python, Integration.pythonArgs("kafka_produce_recording.py", [bootstrap, "events.raw", sample.path]), timeout: 180)
        XCTAssertEqual(produced.trimmingCharacters(in: .whitespacesAndNewlines), String(recordCount))

        let env = [
            "MAIDIAN_BROKERS": bootstrap, "MAIDIAN_GROUP": group,
            "MAIDIAN_SESSION_TIMEOUT": "6s", "MAIDIAN_LOG_LEVEL": "info",
            "MAIDIAN_GEO_DB": Integration.shared.appendingPathComponent("geo/test-city.mmdb").path,
            "MAIDIAN_RULES": Integration.shared.appendingPathComponent("traffic/rules-sample.yaml").path,
        ]
        let pipeline = pipelinePath ?? Integration.root.appendingPathComponent("pipelines/app-analytics.yaml").path
        let workers = try (0..<workerCount).map { i in
            try Integration.Child(Integration.binary, ["run", pipeline, "--until-end"], environment: env, name: "golden-worker-\(i)")
        }
        for (i, w) in workers.enumerated() {
            let status = w.wait(timeout: 300)
            XCTAssertEqual(status, 0, "worker \(i) exit status; stderr:\n\(w.stderr.suffix(4000))")
        }

        let records = try Integration.dumpTopics(bootstrap: bootstrap, ["events.enriched", "events.dlq", "metrics.counts", "metrics.dwell", "crash.trails"])
        try GoldenChecks.checkWindows(records: records, expected: expected)
        // At least once (wire format §5): a rebalance while both workers start may process some records twice,
        // and their outputs come out again identical. The answers count distinct records: a retried profile
        // upload is byte-identical to its first copy (`profile_repeats`), so distinct = enriched - repeats.
        var seen = Set<String>()
        let distinct = records.filter { seen.insert("\($0.topic)\u{0}\($0.key ?? "")\u{0}\($0.value)").inserted }
        let enriched = distinct.filter { $0.topic == "events.enriched" }
        let dlq = distinct.filter { $0.topic == "events.dlq" }
        let repeats = expected["profile_repeats"] as? Int ?? 0
        let allEnriched = records.filter { $0.topic == "events.enriched" }.count

        XCTAssertEqual(enriched.count, (expected["enriched"] as? Int).map { $0 - repeats }, "distinct records on events.enriched")
        XCTAssertGreaterThanOrEqual(allEnriched, expected["enriched"] as? Int ?? .max, "records on events.enriched")
        if allEnriched > enriched.count + repeats {
            print("events.enriched: \(allEnriched) records, \(enriched.count) distinct (re-processed after a rebalance)")
        }

        var reasons: [String: Int] = [:]
        for r in dlq {
            let o = try JSONSerialization.jsonObject(with: Data(r.value.utf8)) as! [String: Any]
            reasons[o["reason"] as! String, default: 0] += 1
        }
        XCTAssertEqual(reasons, expected["dlq"] as? [String: Int], "dead letters by reason")

        // Every sample entry's $ip, location, $dropped_properties and $client_time (and calibrated time) on its event.
        var byTrackID: [String: [String: Any]] = [:]
        var profiles = 0
        for r in enriched {
            let o = try JSONSerialization.jsonObject(with: Data(r.value.utf8)) as! [String: Any]
            if (o["type"] as? String)?.hasPrefix("profile_") == true { profiles += 1 }
            XCTAssertEqual(r.key, o["distinct_id"] as? String, "enriched key is distinct_id")
            if let id = o["_track_id"] as? Int { byTrackID[String(id)] = o }
        }
        XCTAssertEqual(profiles, (expected["profiles"] as? Int).map { $0 - repeats }, "distinct profile events")
        let samples = expected["samples"] as! [String: [String: Any]]
        var checked = 0
        for (trackID, want) in samples {
            guard let got = byTrackID[trackID] else { XCTFail("sample \(trackID) missing on events.enriched"); continue }
            let props = got["properties"] as? [String: Any] ?? [:]
            XCTAssertEqual(got["distinct_id"] as? String, want["distinct_id"] as? String, trackID)
            XCTAssertEqual((got["time"] as? NSNumber)?.int64Value, (want["time"] as? NSNumber)?.int64Value, "time of \(trackID)")
            XCTAssertEqual(props["$ip"] as? String, want["$ip"] as? String, "$ip of \(trackID)")
            XCTAssertEqual((props["$client_time"] as? NSNumber)?.int64Value, (want["$client_time"] as? NSNumber)?.int64Value, "$client_time of \(trackID)")
            if want.keys.contains("$receive_time") {
                XCTAssertEqual((props["$receive_time"] as? NSNumber)?.int64Value, (want["$receive_time"] as? NSNumber)?.int64Value, "$receive_time of \(trackID)")
            }
            if want.keys.contains("$late") {
                XCTAssertEqual(props["$late"] as? Bool, want["$late"] as? Bool, "$late of \(trackID)")
            }
            XCTAssertEqual(props["$dropped_properties"] as? [String], want["$dropped_properties"] as? [String], "$dropped_properties of \(trackID)")
            // Location: equal when the sample has it, absent when it does not (private and unknown IPs).
            for key in ["$country", "$province", "$city"] {
                let what = "\(key) of \(trackID) ($ip \(want["$ip"] ?? "none"))"
                if let value = want[key] as? String {
                    XCTAssertEqual(props[key] as? String, value, what)
                } else {
                    XCTAssertNil(props[key], what)
                }
            }
            checked += 1
        }
        XCTAssertEqual(checked, samples.count)

        // Action-rule matches: userDefined and pagePara values on the event (wire format §4).
        let matchedParams = expected["matched_params"] as! [String: [String: [String: Any]]]
        var paramMismatches = 0
        for (trackID, want) in matchedParams {
            guard let got = byTrackID[trackID] else { XCTFail("matched_params \(trackID) missing on events.enriched"); continue }
            let props = got["properties"] as? [String: Any] ?? [:]
            for (key, value) in (want["userDefined"] ?? [:]).merging(want["pagePara"] ?? [:], uniquingKeysWith: { a, _ in a }) {
                if "\(props[key] ?? "<absent>")" != "\(value)" {
                    paramMismatches += 1
                    if paramMismatches <= 5 { XCTFail("\(key) of \(trackID): got \(props[key] ?? "<absent>"), want \(value)") }
                }
            }
        }
        XCTAssertEqual(paramMismatches, 0, "matched_params mismatches")

        // $matched_rules: per rule, enriched events listing it = sum of pv/click counts of that rule.
        var wantByRule: [String: Int] = [:]
        for (key, entry) in expected["counts"] as! [String: [String: Any]] {
            let parts = key.split(separator: "|", omittingEmptySubsequences: false)
            guard parts.count >= 2, parts[0] == "pv" || parts[0] == "click" else { continue }
            wantByRule[String(parts[1]), default: 0] += entry["count"] as? Int ?? 0
        }
        var gotByRule: [String: Int] = [:]
        for o in byTrackID.values {
            let props = o["properties"] as? [String: Any] ?? [:]
            // Too-late events (more than allowed_lateness, 24 h, behind: the recordings' late uploads are at most
            // 3 h or at least 26 h old when received) are matched on events.enriched but never counted.
            if let received = (props["$receive_time"] as? NSNumber)?.int64Value, let time = (o["time"] as? NSNumber)?.int64Value,
               received - time > 24 * 3_600_000 { continue }
            for id in props["$matched_rules"] as? [String] ?? [] { gotByRule[id, default: 0] += 1 }
        }
        XCTAssertEqual(gotByRule, wantByRule, "events per rule in $matched_rules")
        withExtendedLifetime(broker) {}
    }
}
