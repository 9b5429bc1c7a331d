import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import MaidianKafka
import MaidianRuntime
import XCTest

/// The files under `deploy/`: the Grafana dashboard and the alert rules are valid (schema) and query only
/// series a running worker exports; the Kubernetes ConfigMap's pipeline passes `maidian check`.
final class DeployTests: XCTestCase {
    /// `scripts/check_deploy.py` accepts deploy/ and rejects a copy with a broken dashboard.
    func testDashboardAlertsAndManifestsAreValid() throws {
        let ok = try Integration.Child(
            URL(fileURLWithPath: Integration.python), Integration.pythonArgs("check_deploy.py", []), name: "check-deploy")
        XCTAssertEqual(ok.wait(timeout: 60), 0, ok.stderr)

        // The check can fail: a target without its query and a panel wider than the grid.
        let broken = FileManager.default.temporaryDirectory.appendingPathComponent("deploy-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: Integration.root.appendingPathComponent("deploy"), to: broken)
        defer { try? FileManager.default.removeItem(at: broken) }
        let dashboardURL = broken.appendingPathComponent("grafana/maidian-dashboard.json")
        var dashboard = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: dashboardURL)) as? [String: Any])
        var panels = try XCTUnwrap(dashboard["panels"] as? [[String: Any]])
        let index = try XCTUnwrap(panels.firstIndex { ($0["targets"] as? [[String: Any]])?.isEmpty == false })
        var targets = panels[index]["targets"] as! [[String: Any]]
        targets[0]["expr"] = nil
        panels[index]["targets"] = targets
        var grid = panels[index]["gridPos"] as! [String: Any]
        grid["w"] = 30
        panels[index]["gridPos"] = grid
        dashboard["panels"] = panels
        try JSONSerialization.data(withJSONObject: dashboard).write(to: dashboardURL)
        let bad = try Integration.Child(
            URL(fileURLWithPath: Integration.python), Integration.pythonArgs("check_deploy.py", []),
            environment: ["MAIDIAN_DEPLOY_DIR": broken.path], name: "check-deploy-broken")
        XCTAssertEqual(bad.wait(timeout: 60), 1)
        XCTAssertTrue(bad.stderr.contains("'expr' is a required property"), bad.stderr)
        XCTAssertTrue(bad.stderr.contains("30 is greater than the maximum of 24"), bad.stderr)
    }

    /// `maidian --version` prints the version `maidian_build_info` carries (and the image's tag in deploy/).
    func testVersionIsTheBuildsVersion() throws {
        let printed = try Integration.run(Integration.binary.path, ["--version"]).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(printed, MaidianBuild.version)
        let manifest = try String(contentsOf: Integration.root.appendingPathComponent("deploy/kubernetes/maidian.yaml"), encoding: .utf8)
        XCTAssertTrue(manifest.contains("image: maidian:\(printed)"), "the Kubernetes example runs this version")
    }

    /// The ConfigMap's pipeline and rules, as a pod would mount them, pass `maidian check`.
    func testKubernetesConfigMapPipelinePassesCheck() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("k8s-config-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        try Integration.run(Integration.python, Integration.pythonArgs("check_deploy.py", ["--extract-config", dir.path]))
        let check = try Integration.Child(
            Integration.binary, ["check", dir.appendingPathComponent("app-analytics.yaml").path],
            environment: [
                "MAIDIAN_BROKERS": "kafka-0.kafka:9092",
                "MAIDIAN_GEO_DB": try Integration.sharedFile("geo/test-city.mmdb").path,
            ],
            name: "check-k8s-pipeline")
        XCTAssertEqual(check.wait(timeout: 60), 0, check.stdout + check.stderr)
    }

    /// Every `maidian_*` series the dashboard and the alert rules query is on `/metrics` of a worker running
    /// `pipelines/app-analytics.yaml` on the mock cluster, once it processed the sample traffic.
    func testEveryQueriedSeriesExistsOnARunningWorker() async throws {
        let queried = try Integration.run(Integration.python, Integration.pythonArgs("check_deploy.py", ["--series"]))
            .split(separator: "\n").map(String.init)
        XCTAssertGreaterThan(queried.count, 10, "the dashboard and the alerts query the worker's series")

        let sample = try Integration.sharedFile("traffic/sample.ndjson")
        let broker = try EmbeddedBroker(brokers: 1, logger: Logger(label: "deploy"))
        try broker.createTopic("events.raw", partitions: 4)
        for t in ["events.enriched", "events.dlq", "metrics.counts", "metrics.dwell", "crash.trails"] { try broker.createTopic(t, partitions: 2) }
        let group = "deploy-\(UUID().uuidString.prefix(8))"
        try broker.createTopic("\(group).partials", partitions: 2)
        let produced = try Integration.run(
            Integration.python, Integration.pythonArgs("kafka_produce_recording.py", [broker.bootstrapServers, "events.raw", sample.path]), timeout: 180)
        let records = try XCTUnwrap(Int(produced.trimmingCharacters(in: .whitespacesAndNewlines)))

        let worker = try Integration.Child(
            Integration.binary, ["run", "pipelines/app-analytics.yaml", "--metrics-port", "0"],
            environment: [
                "MAIDIAN_BROKERS": broker.bootstrapServers, "MAIDIAN_GROUP": group, "MAIDIAN_SESSION_TIMEOUT": "6s",
                "MAIDIAN_LOG_LEVEL": "info",
                "MAIDIAN_GEO_DB": try Integration.sharedFile("geo/test-city.mmdb").path,
                "MAIDIAN_RULES": try Integration.sharedFile("traffic/rules-sample.yaml").path,
            ],
            name: "deploy-worker")
        defer {
            worker.process.terminate()
            worker.wait(timeout: 60)
        }
        let port = try await eventually("the worker logs its metrics port", within: .seconds(60)) { () -> Int? in
            let stderr = worker.stderr
            guard let r = stderr.range(of: #"metrics on port [0-9]+"#, options: .regularExpression) else { return nil }
            return Int(stderr[r].split(separator: " ").last!)
        }
        let exposition = try await eventually("all \(records) records counted, consumer lag reported", within: .seconds(180)) { () -> String? in
            guard let text = try? await Self.get("http://127.0.0.1:\(port)/metrics") else { return nil }
            return text.contains("maidian_records_total \(records)\n") && text.contains("maidian_consumer_lag{") ? text : nil
        }
        var exported = Set<String>()
        for line in exposition.split(separator: "\n") where !line.hasPrefix("#") {
            exported.insert(String(line.prefix { $0 != "{" && $0 != " " }))
        }
        for series in queried {
            XCTAssertTrue(exported.contains(series), "\(series) is queried by deploy/ but not on /metrics")
        }
        // A series that does not exist is told apart (the check is not vacuous).
        XCTAssertFalse(exported.contains("maidian_stage_counter_total"), "stage counters have their own series names")
        XCTAssertTrue(exposition.contains("# HELP maidian_records_total "), "series carry # HELP")
        XCTAssertTrue(exposition.contains("# TYPE maidian_match_rules_version gauge"), "rules_version is a gauge")
    }

    static func get(_ url: String) async throws -> String {
        var request = URLRequest(url: URL(string: url)!)
        request.timeoutInterval = 10
        let (data, _) = try await URLSession.shared.data(for: request)
        return String(decoding: data, as: UTF8.self)
    }

    /// Polls `probe` until it returns a value; fails after `limit`.
    func eventually<T>(_ what: String, within limit: Duration, _ probe: () async throws -> T?) async throws -> T {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let v = try await probe() { return v }
            try await Task.sleep(for: .milliseconds(200))
        }
        XCTFail("timed out: \(what)")
        throw CancellationError()
    }
}
