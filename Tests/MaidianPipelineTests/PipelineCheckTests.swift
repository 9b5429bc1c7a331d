import Foundation
import Logging
import MaidianPipeline
import MaidianStages
import XCTest

/// `maidian check`'s findings beyond decoding: warnings, security settings, librdkafka properties (with a
/// stand-in for librdkafka; the real one is tested in KafkaConfigCheckTests and CheckCommandTests).
final class PipelineCheckTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("pipeline-check-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }

    func check(_ yaml: String, environment: [String: String] = [:]) throws -> PipelineCheck.Report {
        let path = dir.appendingPathComponent("p.yaml").path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        var logger = Logger(label: "check")
        logger.logLevel = .critical
        let checker = PipelineCheck(registry: BuiltinStages.registry, environment: environment, logger: logger) { name, value, client in
            name == "acks" && value != "all" ? .init(message: "bad acks", unknownName: false)
                : name.hasPrefix("x.") ? .init(message: "unknown", hint: nil, unknownName: true)
                : name == "acks" && client == .consumer ? .init(message: "producer property", unknownName: false, isWarning: true) : nil
        }
        return checker.check(path: path)
    }

    func assertPrefixes(_ lines: [String], _ prefixes: [String], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(lines.count, prefixes.count, lines.joined(separator: "\n"), file: file, line: line)
        for (l, p) in zip(lines, prefixes) { XCTAssertTrue(l.hasPrefix(p), "\(l)\ndoes not start with\n\(p)", file: file, line: line) }
    }

    func lines(_ errors: [PipelineError]) -> [String] {
        errors.map { $0.description.replacingOccurrences(of: dir.path + "/", with: "") }
    }

    /// `check` rejects, at the key, a `roles:` list no stage can honour: a name under two roles or twice,
    /// an empty name, no page-enter name; and the old `windows.roles`, pointing to the pipeline-level key.
    func testRejectsRolesNoStageCanHonour() throws {
        let report = try check("""
            stages:
              - kind: windows
                roles: {page_enter: [MyScreen]}
            roles:
              page_enter: []
              page_leave: [MyLeave, MyLeave]
              click: [MyTap, MyLeave, ""]
            outputs:
              - kind: enriched
            """)
        assertPrefixes(lines(report.errors), [
            "p.yaml:3:12: 'roles' moved to the pipeline level",
            "p.yaml:5:15: 'roles.page_enter' lists no event name",
            "p.yaml:6:15: 'roles.page_leave' lists 'MyLeave' twice",
            "p.yaml:7:10: 'MyLeave' is listed under 'roles.page_leave' and 'roles.click': an event has one role",
            "p.yaml:7:10: 'roles.click' lists an empty event name",
        ])
        XCTAssertTrue(report.errors.allSatisfy { $0.code == .badValue }, "\(report.errors)")
    }

    /// A role list every stage can honour passes, and reaches the spec (`StageContext.roles` for every stage).
    func testAcceptsCustomRoles() throws {
        let report = try check("""
            stages:
              - kind: windows
            roles:
              page_enter: [MyScreen]
              page_leave: [MyLeave]
              click: [MyTap]
              crash: []
            outputs:
              - kind: enriched
            """)
        XCTAssertEqual(lines(report.errors), [])
        let spec = try PipelineSpec.load(path: dir.appendingPathComponent("p.yaml").path, environment: [:])
        XCTAssertEqual(spec.roles.pageEnter, ["MyScreen"])
        XCTAssertEqual(spec.roles.click, ["MyTap"])
        XCTAssertEqual(spec.roles.appStart, ["$AppStart"], "a key left out keeps its default")
        XCTAssertEqual(spec.roles.crash, [])
    }

    func testWarnings() throws {
        let report = try check("""
            source:
              topic: events.raw
              session_timeout: 1ms
            stages:
              - kind: dedup
                window: 1m
              - kind: validate
              - kind: windows
              - kind: match
                rules: \(Integration.rules)
              - kind: noise_filter
            outputs:
              - kind: enriched
                topic: events.enriched
              - kind: dead_letter
                topic: events.enriched
              - kind: enriched
                topic: events.raw
            """)
        XCTAssertEqual(lines(report.errors), [])
        assertPrefixes(lines(report.warnings), [
            "p.yaml:3:20: session_timeout 1ms is outside what brokers accept",
            "p.yaml:5:11: 'dedup' runs before 'validate': it sees events",
            "p.yaml:8:11: 'windows' runs before 'match': it counts rule hits",
            "p.yaml:11:11: 'noise_filter' runs after 'match': the noise it drops",
            "p.yaml:16:12: topic 'events.enriched' is also written by 'enriched' at 14:12",
            "p.yaml:16:12: dead letters go to 'events.enriched', the topic of enriched events",
            "p.yaml:18:12: 'enriched' writes into the source topic 'events.raw'",
        ])
        let empty = try check("name: nothing\n")
        assertPrefixes(lines(empty.warnings), ["p.yaml:1:1: the pipeline has no stages"])
        // No outputs is an error, not a warning: such a pipeline writes nothing, not even dead letters.
        assertPrefixes(lines(empty.errors), ["p.yaml:1:1: the pipeline has no outputs"])
    }

    /// validate, match, windows; then `outputs:` (lines 1 to 6).
    static let stages = """
        stages:
          - kind: validate
          - kind: match
            rules: \(Integration.rules)
          - kind: windows
        outputs:

        """

    func testTopicsStagesWriteByDefaultCount() throws {
        let report = try check(Self.stages + "  - {kind: enriched, topic: metrics.counts}\n")
        XCTAssertEqual(lines(report.errors), [])
        assertPrefixes(lines(report.warnings), ["p.yaml:7:29: topic 'metrics.counts' is also written by 'windows' at 5:11"])
    }

    func testCleanPipelineHasNoFindings() throws {
        let report = try check(Self.stages + """
              - {kind: enriched, topic: events.enriched}
              - {kind: dead_letter, topic: events.dlq}
            source: {session_timeout: 10s}
            """)
        XCTAssertEqual(lines(report.errors + report.warnings), [])
        XCTAssertEqual(report.stageNames, ["validate", "match", "windows", "enriched", "dead_letter"])
    }

    func testKafkaPropertiesAreLocated() throws {
        let report = try check("""
            source:
              kafka:
                x.typo: 1
                acks: maybe
            producer:
              kafka: {acks: all, x.other: 2}
            stages: [{kind: validate}]
            outputs: [{kind: enriched, topic: e}]
            """)
        XCTAssertEqual(lines(report.errors), [
            "p.yaml:3:5: unknown", "p.yaml:4:11: bad acks", "p.yaml:6:22: unknown",
        ])
        let ignored = try check("source:\n  kafka: {acks: all}\nstages: [{kind: validate}]\noutputs: [{kind: enriched, topic: e}]\n")
        XCTAssertEqual(lines(ignored.errors), [])
        XCTAssertEqual(lines(ignored.warnings), ["p.yaml:2:11: producer property"], "a warning, at the name")
    }

    func testSecuritySettingsBecomeLibrdkafkaProperties() throws {
        try "ca".write(to: dir.appendingPathComponent("ca.pem"), atomically: true, encoding: .utf8)
        let yaml = """
            source:
              brokers: kafka-1:9093
              security:
                protocol: SASL_SSL
                sasl:
                  mechanism: SCRAM-SHA-512
                  username: maidian
                  password_env: KAFKA_PASSWORD
                tls:
                  ca: ca.pem
              kafka:
                sasl.username: written-wins
            """
        let spec = try PipelineSpec.parse(yaml: yaml, file: dir.appendingPathComponent("p.yaml").path, environment: ["KAFKA_PASSWORD": "s3cret"])
        XCTAssertEqual(spec.source.kafka, [
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "written-wins",
            "sasl.password": "s3cret", "ssl.ca.location": dir.appendingPathComponent("ca.pem").path,
            "ssl.endpoint.identification.algorithm": "https",
        ])
        // The producer reaches the same cluster unless producer.security says otherwise.
        XCTAssertEqual(spec.producerKafka["sasl.username"], "maidian")
        XCTAssertEqual(spec.producerKafka["sasl.password"], "s3cret")

        // Every problem of the section, each at its value.
        let report = try check("""
            source:
              security:
                protocol: SASL_SSL
                sasl:
                  mechanism: SCRAM
                  username: maidian
                  password_env: NOT_SET_ANYWHERE
                tls:
                  ca: missing.pem
                  cert: client.pem
            stages: [{kind: validate}]
            outputs: [{kind: enriched, topic: e}]
            """)
        XCTAssertEqual(lines(report.errors), [
            "p.yaml:5:18: invalid value 'SCRAM' for 'mechanism' (did you mean 'SCRAM-SHA-256'?)",
            "p.yaml:7:21: environment variable 'NOT_SET_ANYWHERE' is not set (password_env names the variable that holds the secret)",
            "p.yaml:9:11: no such file: 'missing.pem' (relative paths start at the pipeline file's directory)",
            "p.yaml:10:13: 'cert' and 'key' go together (mutual TLS needs the client certificate and its private key)",
            "p.yaml:10:13: no such file: 'client.pem' (relative paths start at the pipeline file's directory)",
        ])
        let plain = try check("source:\n  security:\n    protocol: PLAINTEXT\n    sasl: {mechanism: PLAIN, username: u, password_env: P}\noutputs: [{kind: enriched, topic: e}]\n",
                              environment: ["P": "p"])
        XCTAssertEqual(lines(plain.errors), ["p.yaml:4:11: 'sasl:' is not used with protocol PLAINTEXT (use SASL_SSL (or SASL_PLAINTEXT))"])
    }
}

/// Paths of the repository's test data.
enum Integration {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let rules = root.appendingPathComponent("data/rules-sample.yaml").path
}
