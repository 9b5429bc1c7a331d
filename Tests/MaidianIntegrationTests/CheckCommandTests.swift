import Foundation
import Logging
import MaidianKafka
import XCTest

/// `maidian check` as a linter, `-X`/`--kafka-config`, and `maidian test`, through the binary.
final class CheckCommandTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-check-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }

    func write(_ name: String, _ text: String) throws -> String {
        let url = dir.appendingPathComponent(name)
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    /// Runs the binary; returns exit status, standard output and standard error.
    func maidian(_ arguments: [String], environment: [String: String] = [:]) throws -> (Int32, String, String) {
        let child = try Integration.Child(Integration.binary, arguments, environment: environment, name: "check-\(UUID().uuidString.prefix(8))")
        let status = child.wait(timeout: 120)
        return (status, child.stdout, child.stderr)
    }

    /// One file with one error of each kind, found in one run, each at its value.
    func testEveryErrorOfAFileInOneRun() throws {
        _ = try write("bad-rules.yaml", """
            version: 1
            pages:
              - id: home
                scren: HomeViewController
            """)
        let pipeline = try write("broken.yaml", """
            name: broken
            source:
              max_batch: 0
              partitions: eight
              session_timeout: 1ms
              topic: ${MAIDIAN_CHECK_TEST_UNSET}
              kafka:
                sasl.passwrd: x
                enable.auto.commit: maybe
              windw: 3
            stages:
              - kind: validate
                max_string_bytes: -5
              - kind: dedupp
              - kind: windows
                window: 60s
              - kind: match
                rules: no-such-rules.yaml
              - kind: match
                rules: bad-rules.yaml
            outputs:
              - kind: enriched
                topic: events.enriched
              - kind: dead_letter
                topic: events.enriched
              - topic: events.other
            producer:
              kafka:
                acks: maybe
            metrics:
              port: 70000
              port: 9464
            """)
        let (status, _, stderr) = try maidian(["check", pipeline])
        XCTAssertEqual(status, 1)
        let lines = stderr.split(separator: "\n").map { String($0).replacingOccurrences(of: dir.path + "/", with: "") }
        let expected = [
            "bad-rules.yaml:4:5: error: unknown key 'scren' (did you mean 'screen'?)",
            "broken.yaml:3:14: error: max_batch must be at least 1",
            "broken.yaml:4:15: error: expected an integer for 'partitions', got 'eight'",
            "broken.yaml:5:20: warning: session_timeout 1ms is outside what brokers accept by default (6s to 30m)",
            "broken.yaml:6:10: error: environment variable 'MAIDIAN_CHECK_TEST_UNSET' is not set",
            "broken.yaml:8:5: error: unknown librdkafka property 'sasl.passwrd' (did you mean 'sasl.password'?)",
            "broken.yaml:9:25: error: Expected bool value for \"enable.auto.commit\"",
            "broken.yaml:10:3: error: unknown key 'windw'",
            "broken.yaml:13:23: error: max_string_bytes must be at least 1",
            "broken.yaml:14:11: error: unknown stage kind 'dedupp' (did you mean 'dedup'?)",
            "broken.yaml:15:11: warning: 'windows' runs before 'match'",
            "broken.yaml:18:12: error: cannot read",
            "broken.yaml:25:12: warning: topic 'events.enriched' is also written by 'enriched' at 23:12",
            "broken.yaml:25:12: warning: dead letters go to 'events.enriched'",
            "broken.yaml:26:5: error: missing key 'kind'",
            "broken.yaml:29:11: error: Invalid value for configuration property \"request.required.acks\" (expected one of: all, -1, 0, 1)",
            "broken.yaml:31:9: error: metrics.port must be in 0...65535",
            "broken.yaml:32:3: error: duplicate key 'port' (first defined at 31:3)",
        ]
        for prefix in expected {
            XCTAssertTrue(lines.contains { $0.hasPrefix(prefix) }, "missing: \(prefix)\nin:\n\(lines.joined(separator: "\n"))")
        }
        XCTAssertEqual(lines.count, expected.count, lines.joined(separator: "\n"))
        XCTAssertFalse(stderr.contains("needs 'screen'"), "the misspelling, not its consequence")

        // The same as JSON, one object for the run.
        let (jsonStatus, json, _) = try maidian(["check", "--format", "json", pipeline])
        XCTAssertEqual(jsonStatus, 1)
        let root = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        XCTAssertEqual(root["errors"] as? Int, 14)
        XCTAssertEqual(root["warnings"] as? Int, 4)
        let problems = try XCTUnwrap(((root["files"] as? [[String: Any]])?.first)?["problems"] as? [[String: Any]])
        let maxBatch = try XCTUnwrap(problems.first { ($0["message"] as? String) == "max_batch must be at least 1" })
        XCTAssertEqual(maxBatch["line"] as? Int, 3)
        XCTAssertEqual(maxBatch["column"] as? Int, 14)
        XCTAssertEqual(maxBatch["severity"] as? String, "error")
    }

    func testSeveralFilesGlobsTabsAndEmptyFiles() throws {
        _ = try write("a-tabs.yaml", "name: x\nsource:\n\ttopic: a\n")
        _ = try write("b-empty.yaml", "")
        let shipped = Integration.root.appendingPathComponent("pipelines/app-analytics.yaml").path
        let (status, stdout, stderr) = try maidian(["check", dir.path + "/*.yaml", shipped])
        XCTAssertEqual(status, 1)
        XCTAssertTrue(stderr.contains("a-tabs.yaml:3:1: error: YAML syntax error: found character that cannot start any token: a tab character (YAML does not allow tabs for indentation; indent with spaces)"), stderr)
        XCTAssertTrue(stderr.contains("b-empty.yaml:1:1: error: the file is empty"), stderr)
        XCTAssertTrue(stdout.contains("app-analytics.yaml: ok ("), stdout)

        let (okStatus, _, okErr) = try maidian(["check", shipped])
        XCTAssertEqual(okStatus, 0, okErr)
    }

    func testKafkaPropertiesOnTheCommandLineAreChecked() throws {
        let properties = try write("client.properties", "# a secured cluster\nbootstrap.servers=127.0.0.1:1\nsasl.passwrd = x\n  acks: maybe\nnonsense\n")
        let (status, _, stderr) = try maidian(["peek", "--kafka-config", properties, "-X", "compression.type=brotli", "-X", "foo.bar=1"])
        XCTAssertEqual(status, 1)
        XCTAssertTrue(stderr.contains("client.properties:3:1: unknown librdkafka property 'sasl.passwrd' (did you mean 'sasl.password'?)"), stderr)
        XCTAssertTrue(stderr.contains("client.properties:4:9: Invalid value for configuration property \"request.required.acks\""), stderr)
        XCTAssertTrue(stderr.contains("client.properties:5:1: expected name=value"), stderr)
        XCTAssertTrue(stderr.contains("-X compression.type=brotli: Invalid value \"brotli\""), stderr)
        XCTAssertTrue(stderr.contains("-X foo.bar=1: unknown librdkafka property 'foo.bar'"), stderr)
        XCTAssertFalse(stderr.contains("KafkaError"), stderr)

        // `run` says loudly that without brokers it runs on an embedded in-memory broker.
        let (_, help, _) = try maidian(["run", "--help"])
        XCTAssertTrue(help.replacingOccurrences(of: "\n", with: " ").contains("EMBEDDED IN-MEMORY BROKER"), help)
        XCTAssertTrue(help.contains("-X <name=value>"), help)

        // No broker anywhere: produce/record/peek say so instead of trying localhost.
        let (noBrokers, _, noBrokersErr) = try maidian(["record", "--out", dir.appendingPathComponent("x.ndjson").path], environment: ["MAIDIAN_BROKERS": ""])
        XCTAssertEqual(noBrokers, 1)
        XCTAssertTrue(noBrokersErr.contains("no brokers: pass --brokers"), noBrokersErr)
    }

    func testPipelineTestsPassAndAFailingExpectationFails() throws {
        let shipped = Integration.root.appendingPathComponent("pipelines/tests").path + "/*.yaml"
        let (status, stdout, stderr) = try maidian(["test", shipped])
        XCTAssertEqual(status, 0, stdout + stderr)
        XCTAssertTrue(stdout.contains(" passed, 0 failed"), stdout)

        let failing = try write("failing.yaml", """
            pipeline: \(Integration.root.appendingPathComponent("pipelines/app-analytics.yaml").path)
            tests:
              - name: wrong expectations
                input:
                  - key: k
                    events:
                      - {type: track, event: $AppViewScreen, time: 1763700010031, distinct_id: u, properties: {$screen_name: HomeViewController}}
                expect:
                  events.enriched:
                    count: 2
                    contains:
                      - {properties: {$matched_rules: [product_pv]}}
                    absent:
                      - {event: $AppViewScreen}
                  events.dlq:
                    count: 0
            """)
        let (failStatus, failOut, _) = try maidian(["test", failing])
        XCTAssertEqual(failStatus, 1)
        XCTAssertTrue(failOut.contains("FAIL \(failing): wrong expectations"), failOut)
        XCTAssertTrue(failOut.contains("failing.yaml:9:7: 'events.enriched': expected 2 messages, got 1"), failOut)
        XCTAssertTrue(failOut.contains("failing.yaml:12:13: 'events.enriched': no message matches {\"properties\":{\"$matched_rules\":[\"product_pv\"]}}"), failOut)
        XCTAssertTrue(failOut.contains("failing.yaml:14:13: 'events.enriched': a message matches {\"event\":\"$AppViewScreen\"}"), failOut)
        XCTAssertFalse(failOut.contains("events.dlq"), "the dead-letter expectation holds")
        XCTAssertTrue(failOut.contains("0 passed, 1 failed"), failOut)
    }

    /// `-X` and `--kafka-config` reach the clients of produce, record, peek and run (no --brokers, no
    /// MAIDIAN_BROKERS): the brokers come from bootstrap.servers.
    func testKafkaPropertiesReachTheClients() throws {
        let broker = try EmbeddedBroker(brokers: 1, logger: Logger(label: "check-command"))
        for t in ["raw.x", "out.x", "dlq.x"] { try broker.createTopic(t, partitions: 2) }
        let sample = try Integration.sharedFile("traffic/sample.ndjson")
        let first50 = try String(contentsOf: sample, encoding: .utf8).split(separator: "\n").prefix(50).map { $0 + "\n" }.joined()
        let recording = try write("fifty.ndjson", first50)
        let noBrokers = ["MAIDIAN_BROKERS": ""]
        let x = ["-X", "bootstrap.servers=\(broker.bootstrapServers)", "-X", "client.id=maidian-check-test"]

        let (produced, producedOut, producedErr) = try maidian(["produce", recording, "--topic", "raw.x"] + x, environment: noBrokers)
        XCTAssertEqual(produced, 0, producedErr)
        XCTAssertTrue(producedOut.hasPrefix("produced 50 records to raw.x"), producedOut)

        let properties = try write("client.properties", "bootstrap.servers = \(broker.bootstrapServers)\n")
        let (recorded, recordedOut, recordedErr) = try maidian(
            ["record", "--kafka-config", properties, "--topic", "raw.x", "--out", dir.appendingPathComponent("back.ndjson").path],
            environment: noBrokers)
        XCTAssertEqual(recorded, 0, recordedErr)
        XCTAssertTrue(recordedOut.hasPrefix("recorded 50 records from raw.x"), recordedOut)

        let pipeline = try write("p.yaml", """
            source: {topic: raw.x, group: check-test, session_timeout: 6s}
            stages: [{kind: validate}]
            outputs: [{kind: enriched, topic: out.x}, {kind: dead_letter, topic: dlq.x}]
            """)
        let (ran, _, ranErr) = try maidian(["run", pipeline, "--until-end", "--kafka-config", properties, "--log-level", "notice"], environment: noBrokers)
        XCTAssertEqual(ran, 0, ranErr)
        XCTAssertFalse(ranErr.contains("EMBEDDED IN-MEMORY BROKER"), "bootstrap.servers from --kafka-config is a broker")

        let (peeked, peekOut, peekErr) = try maidian(["peek", "out.x"] + x, environment: noBrokers)
        XCTAssertEqual(peeked, 0, peekErr)
        let line = try XCTUnwrap(peekOut.split(separator: "\n").first { $0.hasPrefix("── out.x: ") })
        let count = Int(line.dropFirst("── out.x: ".count).prefix { $0.isNumber }) ?? 0
        XCTAssertGreaterThan(count, 50, "the worker read raw.x and wrote enriched events: \(line)")
    }
}
