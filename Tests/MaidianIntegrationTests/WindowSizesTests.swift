import Foundation
import Logging
import MaidianEvents
import MaidianKafka
import MaidianPipeline
import MaidianRecording
import MaidianStages
import MaidianTools
import XCTest

/// Several window sizes in one `windows` stage (`more_windows`, issue 15 item 5): each size's counts topic holds
/// what a pipeline with that size alone writes to its counts topic, on revision-2 traffic (late events within the
/// allowed lateness, logins, too-late caches), offline as `maidian bench` runs it and with two workers on the
/// mock cluster.
final class WindowSizesTests: XCTestCase {
    static let env = [
        "MAIDIAN_GEO_DB": Integration.shared.appendingPathComponent("geo/test-city.mmdb").path,
        "MAIDIAN_RULES": Integration.shared.appendingPathComponent("traffic/rules-sample.yaml").path,
    ]

    /// `pipelines/app-analytics.yaml` with its windows stage's `window: 60s` and `counts_topic` replaced by
    /// `windows` (YAML lines at the stage's indentation), written to a temporary file.
    static func pipeline(_ windows: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        var text = try String(contentsOf: Integration.root.appendingPathComponent("pipelines/app-analytics.yaml"), encoding: .utf8)
        let window = "    window: 60s\n", topic = "    counts_topic: metrics.counts\n"
        XCTAssertTrue(text.contains(window) && text.contains(topic), "the pipeline's windows stage changed", file: file, line: line)
        text = text.replacingOccurrences(of: window, with: windows).replacingOccurrences(of: topic, with: "")
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-sizes-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static let oneMinute = "    window: 1m\n    counts_topic: metrics.counts\n"
    static let oneHour = "    window: 1h\n    counts_topic: metrics.counts\n"
    static let both = """
            window: 1m
            counts_topic: metrics.counts
            more_windows:
              - window: 1h
                counts_topic: metrics.counts.hourly

        """

    /// The pipeline's outputs on a recording, run as `maidian bench --digest` runs it (in memory, partials merged).
    static func bench(_ windows: String, recording: String) throws -> [Integration.DumpedRecord] {
        let path = try pipeline(windows)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let spec = try PipelineSpec.load(path: path, environment: env)
        let source = Bench.prepare(try Recording.read(path: Integration.shared.appendingPathComponent("traffic/\(recording).ndjson").path), partitions: 8)
        let engine = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Logger(label: "sizes") { _ in SwiftLogNoOpLogHandler() })
        var records: [Integration.DumpedRecord] = []
        _ = try Bench.run(engine: engine, records: source, topic: spec.source.topic, batchSize: 250, merge: true) { _, out in
            for (i, m) in out.messages.enumerated() { records.append((out.topics[Int(m.topic)], out.keyString(i), out.valueString(i))) }
        }
        return records
    }

    /// The last value per key of a topic (the answer, wire format §5).
    static func last(_ records: [Integration.DumpedRecord], _ topic: String) -> [String: String] {
        var m: [String: String] = [:]
        for r in records where r.topic == topic { m[r.key ?? ""] = r.value }
        return m
    }

    static func sorted(_ records: [Integration.DumpedRecord], _ topic: String) -> [String] {
        records.filter { $0.topic == topic }.map { "\($0.key ?? "-") \($0.value)" }.sorted()
    }

    func assertSameAnswers(_ got: [String: String], _ want: [String: String], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let differing = Set(got.keys).union(want.keys).filter { got[$0] != want[$0] }.sorted()
        for key in differing.prefix(5) {
            XCTFail("\(what) \(key): want \(want[key] ?? "<none>"), got \(got[key] ?? "<none>")", file: file, line: line)
        }
        XCTAssertEqual(differing.count, 0, "\(what): keys differing (of \(want.count))", file: file, line: line)
    }

    /// Sizes [1m, 1h] on sample-v2: the hourly topic is what `window: 1h` alone writes, the minute topic what
    /// `window: 1m` alone writes (and the golden answers), dwell records and trails are written once and are the
    /// same in all three runs.
    func testEachSizeWritesWhatThatSizeAloneWritesOnRevision2Traffic() throws {
        for recording in ["sample-v2", "sample"] {
            let both = try Self.bench(Self.both, recording: recording)
            let minute = try Self.bench(Self.oneMinute, recording: recording)
            let hour = try Self.bench(Self.oneHour, recording: recording)

            let hourly = Self.last(both, "metrics.counts.hourly")
            XCTAssertGreaterThan(hourly.count, 50, "\(recording): hourly counts")
            assertSameAnswers(hourly, Self.last(hour, "metrics.counts"), "\(recording) metrics.counts.hourly against window: 1h")
            assertSameAnswers(Self.last(both, "metrics.counts"), Self.last(minute, "metrics.counts"), "\(recording) metrics.counts against window: 1m")
            // The sizes keep their own keys: the same key text names an hour on one topic and a minute on the other.
            XCTAssertFalse(Set(hourly.keys).isDisjoint(with: Self.last(both, "metrics.counts").keys), "\(recording): keys of hour starts are on both topics")
            for (key, value) in hourly.prefix(200) {
                let o = try JSONSerialization.jsonObject(with: Data(value.utf8)) as! [String: Any]
                let start = (o["window_start"] as! NSNumber).int64Value, end = (o["window_end"] as! NSNumber).int64Value
                XCTAssertEqual(end - start, 3_600_000, key)
                XCTAssertEqual(start % 3_600_000, 0, key)
                XCTAssertEqual(key.split(separator: "|", omittingEmptySubsequences: false)[2], "\(start)"[...], "the key holds the hour's start")
            }
            for topic in ["metrics.dwell", "crash.trails"] {
                let once = Self.sorted(both, topic)
                XCTAssertFalse(once.isEmpty)
                XCTAssertTrue(once == Self.sorted(minute, topic), "\(recording) \(topic): written once, as with one size")
                XCTAssertTrue(once == Self.sorted(hour, topic), "\(recording) \(topic): the same whatever the size")
            }
            if recording == "sample-v2" {
                let expected = try JSONSerialization.jsonObject(
                    with: Data(contentsOf: Integration.shared.appendingPathComponent("traffic/sample-v2.expected.json"))) as! [String: Any]
                try GoldenChecks.checkWindows(records: both.filter { $0.topic != "metrics.counts.hourly" }, expected: expected)
            }
        }
    }

    /// Two workers of one group on the mock cluster, sizes [1m, 1h] on sample-v2: the partitions move between the
    /// workers while they run (the second one joins), each size is merged across them and restored where a worker
    /// takes internal partitions over; the minute topic is the golden answers, the hourly topic what `window: 1h`
    /// alone writes.
    func testTwoWorkersOnTheMockClusterMergeEverySize() throws {
        let sample = Integration.shared.appendingPathComponent("traffic/sample-v2.ndjson")
        let expected = try JSONSerialization.jsonObject(
            with: Data(contentsOf: Integration.shared.appendingPathComponent("traffic/sample-v2.expected.json"))) as! [String: Any]
        let broker = try EmbeddedBroker(brokers: 1, logger: Logger(label: "sizes"))
        try broker.createTopic("events.raw", partitions: 8)
        try broker.createTopic("events.enriched", partitions: 8)
        try broker.createTopic("events.dlq", partitions: 4)
        for t in ["metrics.counts", "metrics.counts.hourly", "metrics.dwell", "crash.trails"] { try broker.createTopic(t, partitions: 4) }
        let group = "sizes-\(UUID().uuidString.prefix(8))"
        try broker.createTopic("\(group).partials", partitions: 4)
        let bootstrap = broker.bootstrapServers
        let produced = try Integration.run(Integration.python, Integration.pythonArgs("kafka_produce_recording.py", [bootstrap, "events.raw", sample.path]), timeout: 180)
        XCTAssertEqual(produced.trimmingCharacters(in: .whitespacesAndNewlines), "9473")

        let path = try Self.pipeline(Self.both)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var env = Self.env
        env["MAIDIAN_BROKERS"] = bootstrap
        env["MAIDIAN_GROUP"] = group
        env["MAIDIAN_SESSION_TIMEOUT"] = "6s"
        env["MAIDIAN_LOG_LEVEL"] = "info"
        let workers = try (0..<2).map { i in
            try Integration.Child(Integration.binary, ["run", path, "--until-end"], environment: env, name: "sizes-worker-\(i)")
        }
        for (i, w) in workers.enumerated() {
            XCTAssertEqual(w.wait(timeout: 300), 0, "worker \(i) exit status; stderr:\n\(w.stderr.suffix(4000))")
        }
        let records = try Integration.dumpTopics(bootstrap: bootstrap, ["metrics.counts", "metrics.counts.hourly", "metrics.dwell", "crash.trails"])
        try GoldenChecks.checkWindows(records: records.filter { $0.topic != "metrics.counts.hourly" }, expected: expected)
        let hour = try Self.bench(Self.oneHour, recording: "sample-v2")
        let hourly = Self.last(records, "metrics.counts.hourly")
        XCTAssertGreaterThan(hourly.count, 50)
        assertSameAnswers(hourly, Self.last(hour, "metrics.counts"), "metrics.counts.hourly of two workers against window: 1h alone")
    }

    /// `maidian check` refuses a second `windows` stage and points to `more_windows`; a pipeline with sizes passes.
    func testCheckRejectsASecondWindowsStageWithTheSizesHint() throws {
        let second = try Self.pipeline(Self.oneMinute + "  - kind: windows\n    window: 1h\n    counts_topic: metrics.counts.hourly\n")
        let good = try Self.pipeline(Self.both)
        defer {
            try? FileManager.default.removeItem(atPath: second)
            try? FileManager.default.removeItem(atPath: good)
        }
        let bad = try Integration.Child(Integration.binary, ["check", second], environment: Self.env, name: "check-second")
        XCTAssertNotEqual(bad.wait(timeout: 60), 0)
        let text = bad.stdout + bad.stderr
        XCTAssertTrue(text.contains("a second 'windows' stage"), text)
        XCTAssertTrue(text.contains("more_windows"), text)
        let ok = try Integration.Child(Integration.binary, ["check", good], environment: Self.env, name: "check-sizes")
        XCTAssertEqual(ok.wait(timeout: 60), 0, ok.stdout + ok.stderr)
    }
}
