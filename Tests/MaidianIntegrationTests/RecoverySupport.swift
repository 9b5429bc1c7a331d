import Foundation
import Logging
import MaidianKafka
import MaidianTools
import XCTest

@testable import MaidianRecording

/// A mock cluster set up for `pipelines/app-analytics.yaml` over the sample traffic, with workers as child
/// processes (`maidian run`), for the failure tests (docs/recovery.md).
final class SampleCluster {
    let broker: EmbeddedBroker
    let group = "recovery-\(UUID().uuidString.prefix(8).lowercased())"
    let pipeline: String
    /// librdkafka's lines of the test's own clients (brokers go down on purpose): RECOVERY_TEST_LOG=info shows them.
    let logger: Logger = {
        var l = Logger(label: "recovery-tests")
        l.logLevel = ProcessInfo.processInfo.environment["RECOVERY_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        return l
    }()
    /// Output and internal topics with their partition counts (as the golden test creates them).
    let topics: [(name: String, partitions: Int)]
    var env: [String: String]

    static let sample = Integration.shared.appendingPathComponent("traffic/sample.ndjson")
    static let expected = Integration.shared.appendingPathComponent("traffic/sample.expected.json")
    /// The recording this cluster runs (`sample` or `sample-v2`), its answers and its number of records.
    let recording: String
    let sampleURL: URL
    let expectedURL: URL
    let records: Int

    /// `pipelineEdits` are (text, replacement) pairs applied to a copy of `pipelines/app-analytics.yaml`
    /// (for `source.kafka`, `producer.kafka`, `source.liveness_timeout` in a test).
    init(brokers: Int = 1, pipelineEdits: [(String, String)] = [], recording: String = "sample", records: Int = 9568) throws {
        self.recording = recording
        self.records = records
        sampleURL = Integration.shared.appendingPathComponent("traffic/\(recording).ndjson")
        expectedURL = Integration.shared.appendingPathComponent("traffic/\(recording).expected.json")
        broker = try EmbeddedBroker(brokers: brokers, logger: logger)
        topics = [("events.raw", 8), ("events.enriched", 8), ("events.dlq", 4), ("metrics.counts", 4),
                  ("metrics.dwell", 4), ("crash.trails", 4), ("\(group).partials", 4)]
        for t in topics { try broker.createTopic(t.name, partitions: t.partitions) }
        let original = Integration.root.appendingPathComponent("pipelines/app-analytics.yaml").path
        if pipelineEdits.isEmpty {
            pipeline = original
        } else {
            var text = try String(contentsOfFile: original, encoding: .utf8)
            for (from, to) in pipelineEdits {
                XCTAssertTrue(text.contains(from), "pipeline edit: '\(from)' not in app-analytics.yaml")
                text = text.replacingOccurrences(of: from, with: to)
            }
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-tests-\(getpid())")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let file = dir.appendingPathComponent("\(group).yaml")
            try text.write(to: file, atomically: true, encoding: .utf8)
            pipeline = file.path
        }
        env = [
            "MAIDIAN_BROKERS": broker.bootstrapServers, "MAIDIAN_GROUP": group,
            "MAIDIAN_SESSION_TIMEOUT": "6s", "MAIDIAN_LOG_LEVEL": "info",
            "MAIDIAN_GEO_DB": Integration.shared.appendingPathComponent("geo/test-city.mmdb").path,
            "MAIDIAN_RULES": Integration.shared.appendingPathComponent("traffic/rules-sample.yaml").path,
        ]
    }

    var bootstrap: String { broker.bootstrapServers }

    static func expectedAnswers(_ recording: String = "sample") throws -> [String: Any] {
        let url = Integration.shared.appendingPathComponent("traffic/\(recording).expected.json")
        return try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
    }

    /// Loads the sample into the raw topic with the independent Python producer, spread over `seconds`
    /// (0: at once). Returns the running producer; it prints the number of records (`records`) when done.
    func startProducer(seconds: Double) throws -> Integration.Child {
        let args = Integration.pythonArgs("kafka_produce_recording.py", [bootstrap, "events.raw", sampleURL.path, String(seconds)])
        return try Integration.Child(URL(fileURLWithPath: Integration.python), args, name: "\(group)-producer")
    }

    /// Starts `maidian run` (a worker of the group) as a child process.
    func startWorker(_ name: String, untilEnd: Bool = false, environment: [String: String] = [:]) throws -> Integration.Child {
        let w = try Integration.Child(Integration.binary, ["run", pipeline] + (untilEnd ? ["--until-end"] : []),
                                      environment: env.merging(environment) { _, new in new }, name: "\(group)-\(name)")
        workers.append((name, w))
        return w
    }

    /// Every worker started, for the log lines printed when a check finds outputs missing or repeated.
    private var workers: [(name: String, child: Integration.Child)] = []

    /// The lines of each worker's log that tell how it read and committed (rebalances, re-reads, gaps,
    /// commits, warnings and errors): a failure on a CI machine can only be understood from them.
    func printWorkerLogs() {
        let marks = ["warning", "error", "assigned", "revoked", "lost", "re-reading", "reading it again", "going on", "stopping", "bounded run", "commit"]
        for (name, child) in workers {
            let lines = child.stderr.split(separator: "\n").filter { line in marks.contains { line.contains($0) } && !line.contains("Fetch from broker") }
            print("--- worker \(name): \(lines.count) lines of interest")
            for l in lines.suffix(200) { print(String(l.prefix(400))) }
        }
    }

    /// Runs one `--until-end` worker to completion (the end of a test: whatever the group left behind is
    /// finished from the committed offsets and their replay points).
    func finish(timeout: TimeInterval = 300, file: StaticString = #filePath, line: UInt = #line) throws {
        let w = try startWorker("final", untilEnd: true)
        let status = w.wait(timeout: timeout)
        XCTAssertEqual(status, 0, "final --until-end worker; stderr:\n\(w.stderr.suffix(6000))", file: file, line: line)
    }

    /// Sum of the group's committed offsets over the raw topic's partitions (progress made so far).
    func committedTotal() throws -> Int64 {
        try committed().values.reduce(0, +)
    }

    /// The group's committed offsets of the raw topic (read with the group id, without joining).
    func committed() throws -> [Int32: Int64] {
        let c = try KafkaConsumer(config: ["bootstrap.servers": bootstrap, "group.id": group], logger: logger)
        defer { try? c.close() }
        let tps = (0..<Int32(8)).map { TopicPartition(topic: "events.raw", partition: $0) }
        return Dictionary(uniqueKeysWithValues: try c.committed(tps, timeout: .seconds(30)).map { ($0.key.partition, $0.value) })
    }

    /// Records on `topic` so far (the sum of its partitions' end offsets).
    func endOffset(_ topic: String) throws -> Int64 {
        let c = try KafkaConsumer(config: ["bootstrap.servers": bootstrap, "group.id": "\(group)-reader"], logger: logger)
        defer { try? c.close() }
        let n = topics.first { $0.name == topic }!.partitions
        return try (0..<Int32(n)).map { try c.watermarks(TopicPartition(topic: topic, partition: $0), timeout: .seconds(30)).high }.reduce(0, +)
    }

    /// The sample's records (lines) in `part`, as a recording file of their own.
    static func samplePart(_ part: Range<Int>) throws -> String {
        let lines = try String(contentsOf: sample, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: true)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sample-\(part.lowerBound)-\(part.upperBound)-\(getpid()).ndjson")
        try (lines[part.clamped(to: 0..<lines.count)].joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    /// Loads a recording file into the raw topic at once and waits for it; returns how many records.
    @discardableResult
    func produce(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws -> Int {
        let out = try Integration.run(Integration.python, Integration.pythonArgs("kafka_produce_recording.py", [bootstrap, "events.raw", path]), timeout: 180, file: file, line: line)
        return Int(out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    func dump() throws -> [Integration.DumpedRecord] {
        try Integration.dumpTopics(bootstrap: bootstrap, ["events.enriched", "events.dlq", "metrics.counts", "metrics.dwell", "crash.trails"])
    }

    /// The outputs against `sample.expected.json` and an uninterrupted run: the windowed outputs as in the
    /// golden test; the records on `events.enriched` and `events.dlq` as sets equal to those of one
    /// uninterrupted run (wire format §5 "Failover": after a kill a record may be written again, identically), and as
    /// multisets (no duplicates) when `exact`.
    /// Returns how many records `events.enriched` holds, and how many an uninterrupted run writes there.
    @discardableResult
    func check(exact: Bool, file: StaticString = #filePath, line: UInt = #line) throws -> (total: Int, uninterrupted: Int) {
        let expected = try Self.expectedAnswers(recording)
        let reference = try Self.reference(recording: recording, records: records)
        var enriched = (total: 0, uninterrupted: 0)
        // Outputs can only be judged on a complete input: a record the test's producer lost is not the worker's.
        XCTAssertGreaterThanOrEqual(try endOffset("events.raw"), Int64(self.records), "the raw topic holds every record of the recording", file: file, line: line)
        let records = try dump()
        try GoldenChecks.checkWindows(records: records, expected: expected, file: file, line: line)
        for topic in ["events.enriched", "events.dlq"] {
            var got: [String: Int] = [:]
            for r in records where r.topic == topic { got[r.value, default: 0] += 1 }
            let want = reference[topic] ?? [:]
            let missing = want.keys.filter { got[$0] == nil }
            let extra = got.keys.filter { want[$0] == nil }
            for m in missing.prefix(3) { XCTFail("\(topic) lacks \(m.prefix(300))", file: file, line: line) }
            for x in extra.prefix(3) { XCTFail("\(topic) has a record an uninterrupted run does not write: \(x.prefix(300))", file: file, line: line) }
            XCTAssertEqual(missing.count + extra.count, 0, "\(topic): \(missing.count) records missing, \(extra.count) unexpected", file: file, line: line)
            if !missing.isEmpty || !extra.isEmpty { printWorkerLogs() }
            let total = got.values.reduce(0, +)
            if exact {
                let differing = got.filter { want[$0.key] != $0.value }
                XCTAssertEqual(differing.count, 0, "\(topic): \(differing.count) records written a different number of times than by an uninterrupted run (\(total) records in all)", file: file, line: line)
            }
            print("\(topic): \(total) records, \(got.count) distinct (an uninterrupted run: \(want.values.reduce(0, +)), \(want.count) distinct)")
            if topic == "events.enriched" { enriched = (total, want.values.reduce(0, +)) }
        }
        return enriched
    }

    // Computed once per test process (tests run one after another).
    nonisolated(unsafe) private static var referenceRecords: [String: [String: [String: Int]]] = [:]

    /// What one uninterrupted run writes to `events.enriched` and `events.dlq` (record value -> how many
    /// times): one `--until-end` worker over the whole recording on a cluster of its own, checked against
    /// its `.expected.json` like the golden test.
    static func reference(recording: String = "sample", records: Int = 9568) throws -> [String: [String: Int]] {
        if let r = referenceRecords[recording] { return r }
        let c = try SampleCluster(recording: recording, records: records)
        let producer = try c.startProducer(seconds: 0)
        XCTAssertEqual(producer.wait(timeout: 180), 0, "producer: \(producer.stderr)")
        try c.finish()
        var out: [String: [String: Int]] = [:]
        for r in try Integration.dumpTopics(bootstrap: c.bootstrap, ["events.enriched", "events.dlq"]) {
            out[r.topic, default: [:]][r.value, default: 0] += 1
        }
        let expected = try expectedAnswers(recording)
        XCTAssertEqual(out["events.enriched"]?.values.reduce(0, +), expected["enriched"] as? Int, "reference run: records on events.enriched")
        var reasons: [String: Int] = [:]
        for (value, n) in out["events.dlq"] ?? [:] { reasons[(try GoldenChecks.json(value))["reason"] as? String ?? "?", default: 0] += n }
        XCTAssertEqual(reasons, expected["dlq"] as? [String: Int], "reference run: dead letters by reason")
        referenceRecords[recording] = out
        return out
    }

    /// Waits until the group has committed at least `offsets` over the raw topic, or `timeout` passes.
    @discardableResult
    func waitForCommitted(atLeast offsets: Int64, timeout: TimeInterval) throws -> Int64 {
        let deadline = Date().addingTimeInterval(timeout)
        var total: Int64 = 0
        while Date() < deadline {
            total = try committedTotal()
            if total >= offsets { break }
            Thread.sleep(forTimeInterval: 0.5)
        }
        return total
    }
}

extension Integration.Child {
    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// Sends a signal (SIGKILL, SIGTERM, SIGINT, SIGSTOP, SIGCONT).
    func signal(_ sig: Int32) {
        if process.isRunning { kill(process.processIdentifier, sig) }
    }

    /// Waits until the child's standard error contains `text` (or it exits, or `timeout` passes).
    @discardableResult
    func waitForLog(_ text: String, timeout: TimeInterval = 60) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if stderr.contains(text) { return true }
            if !process.isRunning { return false }
            Thread.sleep(forTimeInterval: 0.1)
        }
        return false
    }

    /// Sends SIGTERM and waits for the exit; returns the status and the seconds it took.
    func terminate(_ sig: Int32 = SIGTERM, timeout: TimeInterval = 120) -> (status: Int32, seconds: Double) {
        let start = Date()
        signal(sig)
        let status = wait(timeout: timeout)
        return (status, Date().timeIntervalSince(start))
    }
}

/// A replayable random schedule (SplitMix64 of the recording generator; the seed is printed).
struct ChaosRandom: RandomNumberGenerator {
    private var generator: SplitMix64
    init(seed: UInt64) { generator = SplitMix64(seed: seed) }
    mutating func next() -> UInt64 { generator.next() }
}
