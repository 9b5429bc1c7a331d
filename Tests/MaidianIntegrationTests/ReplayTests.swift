import Foundation
import Logging
import MaidianKafka
import XCTest

/// `maidian replay` over a time range of the sample traffic on the mock cluster (which cannot look offsets
/// up by time: the start and stop offsets are found by the binary search).
///
/// What a replay of [from, to] must write is what the pipeline writes for exactly the records whose
/// timestamps fall in the range: the test runs the same pipeline with `run --until-end` on a second cluster
/// that holds only those records, and compares.
final class ReplayTests: XCTestCase {
    func testReplayWritesOnlyTheRangesEventsToSuffixedTopics() throws {
        let sample = try Integration.sharedFile("traffic/sample.ndjson")
        let lines = try String(contentsOf: sample, encoding: .utf8).split(separator: "\n")
        let timestamps = try lines.map { try XCTUnwrap((JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["timestamp"] as? Int64) }
        // 20 to 35 minutes into the hour of traffic.
        let from = timestamps.min()! + 20 * 60_000
        let to = timestamps.min()! + 35 * 60_000
        let inRange = zip(lines, timestamps).filter { from <= $0.1 && $0.1 <= to }.map(\.0)
        XCTAssertGreaterThan(inRange.count, 1000)
        XCTAssertLessThan(inRange.count, lines.count / 2)
        let rangeFile = FileManager.default.temporaryDirectory.appendingPathComponent("replay-range-\(UUID().uuidString.prefix(8)).ndjson")
        try (inRange.joined(separator: "\n") + "\n").write(to: rangeFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: rangeFile) }

        // Cluster 1: the whole sample; the replay runs here. Cluster 2: only the range; a plain bounded run.
        let logger = Logger(label: "replay-test")
        let full = try EmbeddedBroker(brokers: 1, logger: logger)
        let range = try EmbeddedBroker(brokers: 1, logger: logger)
        let windowed = ["metrics.counts", "metrics.dwell", "crash.trails"]
        let liveGroup = "live-\(UUID().uuidString.prefix(8))"
        for b in [full, range] {
            try b.createTopic("events.raw", partitions: 8)
            try b.createTopic("events.enriched", partitions: 8)
            try b.createTopic("events.dlq", partitions: 4)
            for t in windowed { try b.createTopic(t, partitions: 4) }
        }
        // The replay writes every output to <name>.replay and merges windows through its own group's partials topic.
        try full.createTopic("events.enriched.replay", partitions: 8)
        try full.createTopic("events.dlq.replay", partitions: 4)
        for t in windowed { try full.createTopic(t + ".replay", partitions: 4) }
        try full.createTopic("\(liveGroup).replay-\(from).partials", partitions: 4)
        try range.createTopic("\(liveGroup).partials", partitions: 4)
        for (b, file, n) in [(full, sample, lines.count), (range, rangeFile, inRange.count)] {
            let out = try Integration.run(Integration.python, Integration.pythonArgs("kafka_produce_recording.py", [b.bootstrapServers, "events.raw", file.path]), timeout: 180)
            XCTAssertEqual(out.trimmingCharacters(in: .whitespacesAndNewlines), "\(n)")
        }

        let pipeline = Integration.root.appendingPathComponent("pipelines/app-analytics.yaml").path
        func env(_ b: EmbeddedBroker) -> [String: String] {
            [
                "MAIDIAN_BROKERS": b.bootstrapServers, "MAIDIAN_GROUP": liveGroup,
                "MAIDIAN_SESSION_TIMEOUT": "6s", "MAIDIAN_LOG_LEVEL": "info",
                "MAIDIAN_GEO_DB": Integration.shared.appendingPathComponent("geo/test-city.mmdb").path,
                "MAIDIAN_RULES": Integration.shared.appendingPathComponent("traffic/rules-sample.yaml").path,
            ]
        }
        let fullEnv = env(full)
        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let fromISO = iso.string(from: Date(timeIntervalSince1970: Double(from) / 1000))

        let replay = try Integration.Child(
            Integration.binary, ["replay", pipeline, "--from", fromISO, "--to", String(to), "--log-format", "json", "--progress", "lines"],
            environment: fullEnv, name: "replay")
        let plain = try Integration.Child(Integration.binary, ["run", pipeline, "--until-end"], environment: env(range), name: "replay-expected")
        XCTAssertEqual(replay.wait(timeout: 240), 0, "replay stderr:\n\(replay.stderr.suffix(4000))")
        XCTAssertEqual(plain.wait(timeout: 240), 0, "run stderr:\n\(plain.stderr.suffix(4000))")

        // JSON logs: one object per line with time, level, label, message, metadata.
        var messages: [String] = []
        for line in replay.stderr.split(separator: "\n") {
            let o = try XCTUnwrap(try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a JSON object: \(line)")
            XCTAssertEqual(Set(o.keys), ["time", "level", "label", "message", "metadata"], "\(line)")
            messages.append(o["message"] as? String ?? "")
        }
        XCTAssertTrue(messages.contains { $0.hasPrefix("assigned partitions") && $0.contains("events.raw/7") }, "\(messages)")
        XCTAssertEqual(messages.filter { $0.contains("start found by search") }.count, 8, "the mock cannot look up by time: \(messages)")
        XCTAssertTrue(messages.contains { $0.hasPrefix("replay finished: \(inRange.count) records") }, "\(messages)")

        let replayed = try Integration.dumpTopics(
            bootstrap: full.bootstrapServers, ["events.enriched.replay", "events.dlq.replay", "events.enriched", "events.dlq"] + windowed + windowed.map { $0 + ".replay" })
        let expected = try Integration.dumpTopics(bootstrap: range.bootstrapServers, ["events.enriched", "events.dlq"] + windowed)
        XCTAssertEqual(replayed.filter { ["events.enriched", "events.dlq"].contains($0.topic) || windowed.contains($0.topic) }.count, 0,
                       "the live output topics stay untouched")

        // The enriched events are those of the range's records, and only those.
        let got = replayed.filter { $0.topic == "events.enriched.replay" }
        let want = expected.filter { $0.topic == "events.enriched" }
        XCTAssertGreaterThan(want.count, 1000)
        XCTAssertEqual(got.count, want.count)
        XCTAssertEqual(got.map(\.value).sorted(), want.map(\.value).sorted(), "the enriched events of the range")
        // (The sample's records carry header received_at = their timestamp; events get it as $receive_time.)
        var checked = 0
        for r in got {
            let o = try JSONSerialization.jsonObject(with: Data(r.value.utf8)) as! [String: Any]
            guard let receivedAt = ((o["properties"] as? [String: Any])?["$receive_time"] as? NSNumber)?.int64Value else { continue }
            XCTAssertTrue(from <= receivedAt && receivedAt <= to, "event of a record received at \(receivedAt), outside the range")
            checked += 1
        }
        XCTAssertGreaterThan(checked, got.count * 9 / 10)
        // Dead letters: the same, apart from where their record sat (another topic, other offsets).
        func withoutSource(_ rs: [(topic: String, key: String?, value: String)], _ topic: String) throws -> [String] {
            try rs.filter { $0.topic == topic }.map { r in
                var o = try JSONSerialization.jsonObject(with: Data(r.value.utf8)) as! [String: Any]
                o["source"] = nil
                return String(decoding: try JSONSerialization.data(withJSONObject: o, options: [.sortedKeys]), as: UTF8.self)
            }.sorted()
        }
        let dlq = try withoutSource(replayed, "events.dlq.replay")
        XCTAssertGreaterThan(dlq.count, 0)
        XCTAssertEqual(dlq, try withoutSource(expected, "events.dlq"))

        // Windowed outputs: the last value per key of metrics.counts, and the records of metrics.dwell and
        // crash.trails, are those of the range's records.
        func lastPerKey(_ rs: [Integration.DumpedRecord], _ topic: String) -> [String: String] {
            var last: [String: String] = [:]
            for r in rs where r.topic == topic { last[r.key ?? ""] = r.value }
            return last
        }
        let counts = lastPerKey(replayed, "metrics.counts.replay")
        XCTAssertGreaterThan(counts.count, 10)
        XCTAssertEqual(counts, lastPerKey(expected, "metrics.counts"), "metrics.counts of the range")
        for t in ["metrics.dwell", "crash.trails"] {
            XCTAssertEqual(Set(replayed.filter { $0.topic == t + ".replay" }.map(\.value)), Set(expected.filter { $0.topic == t }.map(\.value)), t)
        }
        XCTAssertGreaterThan(replayed.filter { $0.topic == "metrics.dwell.replay" }.count, 10)

        // And against the answers of the whole hour: page-view and click windows well inside the range
        // (uploads arrive within minutes of their events) hold exactly the counts of sample.expected.json.
        let answers = try JSONSerialization.jsonObject(with: Data(contentsOf: try Integration.sharedFile("traffic/sample.expected.json"))) as! [String: Any]
        let margin: Int64 = 5 * 60_000
        var compared = 0
        for (key, want) in answers["counts"] as! [String: [String: Any]] {
            let parts = key.split(separator: "|", omittingEmptySubsequences: false)
            guard parts.count == 4, let start = Int64(parts[2]), start >= from + margin, start + 60_000 <= to - margin else { continue }
            compared += 1
            guard let text = counts[key], let got = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
                XCTFail("replay lacks \(key)")
                continue
            }
            XCTAssertEqual(got["count"] as? Int, want["count"] as? Int, "count of \(key)")
            XCTAssertEqual(got["users"] as? Int, want["users"] as? Int, "users of \(key)")
        }
        XCTAssertGreaterThan(compared, 100, "windows inside the replayed range")

        // Again, --from in epoch ms this time: the same default group, which resumes from its committed
        // offsets, the stop offsets: nothing to do.
        let again = try Integration.Child(
            Integration.binary, ["replay", pipeline, "--from", String(from), "--to", String(to), "--progress", "off"],
            environment: fullEnv, name: "replay-again")
        XCTAssertEqual(again.wait(timeout: 120), 0, again.stderr.suffix(4000).description)
        XCTAssertTrue(again.stderr.contains(": 0 records in 8 partitions"), again.stderr.suffix(4000).description)
        XCTAssertEqual(try Integration.dumpTopics(bootstrap: full.bootstrapServers, ["events.enriched.replay"]).count, got.count, "nothing written twice")
        withExtendedLifetime((full, range)) {}
    }
}
