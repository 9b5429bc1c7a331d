import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import MaidianKafka
import MaidianPipeline
import MaidianRuntime
import MaidianStages
import Prometheus
import ServiceLifecycle
import Synchronization
import XCTest

/// The worker's HTTP endpoint on the mock cluster: Prometheus series that exist and move between two
/// scrapes, consumer lag from librdkafka's statistics, and health checks that change at assignment and shutdown.
final class MetricsTests: XCTestCase {
    func testMetricsMoveAndHealthFollowsTheWorker() async throws {
        let env = try WorkerTests.Env(rawPartitions: 2)
        var spec = env.spec
        spec.source.kafka["statistics.interval.ms"] = "200"
        let status = WorkerStatus()
        let registry = PrometheusCollectorRegistry()
        let metrics = WorkerMetrics(status: status, registry: registry, logger: env.logger)
        let bound = Mutex(0)
        let server = OpsServer(host: "127.0.0.1", port: 0, status: status, metrics: metrics, registry: registry, logger: env.logger) { port in
            bound.withLock { $0 = port }
        }
        let group = ServiceGroup(services: [server], logger: env.logger)
        let serving = Task { try await group.run() }
        defer { serving.cancel() }
        let port = try await eventually("the server listens", within: .seconds(30)) { bound.withLock { $0 } > 0 ? bound.withLock { $0 } : nil }
        let http = HTTP(port: port)

        // Before the worker runs: neither live nor ready.
        var (code, body) = try await http.get("/health/live")
        XCTAssertEqual(code, 503, body)
        XCTAssertTrue(body.contains("not started"), body)
        (code, body) = try await http.get("/health/ready")
        XCTAssertEqual(code, 503, body)

        // Batch 1: 100 records, 1 bad record, 5 retried (duplicate) events.
        try env.produce(Self.records(0..<100, partitions: 2))
        var options = WorkerOptions()
        options.maxBatch = spec.source.maxBatch
        options.status = status
        let worker = Worker(spec: spec, registry: BuiltinStages.registry, bootstrap: spec.source.brokers, options: options, logger: env.logger)
        let run = WorkerThread(worker)

        _ = try await eventually("live once the worker thread runs", within: .seconds(30)) { try await http.get("/health/live").0 == 200 ? true : nil }
        // The mock's first group join takes about 3 s: not ready before that.
        (code, body) = try await http.get("/health/ready")
        XCTAssertEqual(code, 503, "ready before any assignment: \(body)")
        XCTAssertTrue(body.contains("waiting for a partition assignment"), body)
        body = try await eventually("ready once partitions are assigned", within: .seconds(60)) {
            let (c, b) = try await http.get("/health/ready")
            return c == 200 ? b : nil
        }
        XCTAssertTrue(body.contains("2 partition(s) assigned: 0,1"), body)

        let first = try await eventually("batch 1 counted", within: .seconds(60)) {
            let m = try await http.scrape()
            // Records are counted when the batch is decoded, the stages' counters and the batch's duration after it
            // ran: wait for the end of the batch, not only its start (a slow machine scraped in between).
            return m["maidian_records_total"] == 100 && m[#"maidian_stage_written_total{stage="enriched"}"#] == 99
                && m["maidian_batch_duration_seconds_count", default: 0] > 0 ? m : nil
        }
        XCTAssertEqual(first.types["maidian_records_total"], "counter")
        XCTAssertEqual(first["maidian_partitions_assigned"], 2)
        XCTAssertEqual(first["maidian_worker_ready"], 1)
        XCTAssertEqual(first["maidian_worker_live"], 1)
        XCTAssertEqual(first[#"maidian_dead_letters_total{reason="bad_encoding",level="record"}"#], 1)
        XCTAssertEqual(first[#"maidian_stage_received_total{stage="validate"}"#], 104, "99 good records, 5 of them with a retried event")
        XCTAssertEqual(first[#"maidian_stage_dropped_total{stage="dedup"}"#], 5)
        XCTAssertEqual(first["maidian_dedup_duplicates_total"], 5, "a stage's own counter, exported generically under its own name")
        XCTAssertEqual(first[#"maidian_stage_emitted_total{stage="enriched"}"#], 99)
        XCTAssertEqual(first[#"maidian_stage_written_total{stage="enriched"}"#], 99)
        XCTAssertEqual(first.types["maidian_batch_duration_seconds"], "histogram")
        XCTAssertGreaterThan(first["maidian_batch_duration_seconds_count", default: 0], 0, "every batch observed")
        XCTAssertNotNil(first["maidian_event_time_lag_seconds"])

        // Batch 2: 200 more records; the counters move by exactly what was added.
        try env.produce(Self.records(100..<300, partitions: 2))
        let second = try await eventually("batch 2 counted and committed", within: .seconds(60)) {
            let m = try await http.scrape()
            return m["maidian_records_total"] == 300 && m["maidian_commits_total", default: 0] > first["maidian_commits_total", default: 0] ? m : nil
        }
        XCTAssertEqual(second[#"maidian_dead_letters_total{reason="bad_encoding",level="record"}"#], 3)
        XCTAssertEqual(second[#"maidian_stage_received_total{stage="validate"}"#], 104 + 208)
        XCTAssertEqual(second["maidian_dedup_duplicates_total"], 15)
        XCTAssertEqual(second[#"maidian_stage_emitted_total{stage="enriched"}"#], 99 + 198)
        XCTAssertEqual(second[#"maidian_produced_records_total{topic="events.enriched"}"#], 99 + 198, "produced per topic: what the output wrote")
        XCTAssertEqual(second["maidian_events_total"], 104 + 208)

        // Lag per held partition, from librdkafka's statistics: 0 once everything is committed.
        let lag = try await eventually("consumer lag 0 on both partitions", within: .seconds(30)) {
            let m = try await http.scrape()
            let l = (0..<2).map { m[#"maidian_consumer_lag{topic="events.raw",partition="\#($0)"}"#] }
            return l == [0, 0] ? (l, m.types["maidian_consumer_lag"]) : nil
        }
        XCTAssertEqual(lag.1, "gauge")

        // Shutdown: not ready from the stop request on, not live once the thread ended; the endpoint still answers.
        worker.requestStop()
        (code, body) = try await http.get("/health/ready")
        XCTAssertEqual(code, 503, body)
        XCTAssertTrue(body.contains("stopping") || body.contains("stopped"), body)
        XCTAssertTrue(run.wait(seconds: 60), "run() did not return after requestStop()")
        XCTAssertNil(run.error)
        (code, body) = try await http.get("/health/live")
        XCTAssertEqual(code, 503, body)
        XCTAssertTrue(body.contains("stopped"), body)
        let last = try await http.scrape()
        XCTAssertEqual(last["maidian_worker_live"], 0)
        XCTAssertEqual(last["maidian_partitions_assigned"], 0)
        XCTAssertNil(last[#"maidian_consumer_lag{topic="events.raw",partition="0"}"#], "no lag series for partitions no longer held")

        await group.triggerGracefulShutdown()
        try await serving.value
    }

    /// Records `range`: every 100th a bad record (not JSON), every 20th repeats its event (an SDK retry).
    static func records(_ range: Range<Int>, partitions: Int32) -> [WorkerTests.Raw] {
        range.map { i in
            let p = Int32(i) % partitions
            if i % 100 == 7 { return WorkerTests.Raw(key: "k\(i)", value: Array("garbage \(i)".utf8), partition: p) }
            let event = WorkerTests.track(id: Int64(i), distinctID: "user\(i % 13)")
            let events = i % 20 == 3 ? "[\(event),\(event)]" : "[\(event)]"
            return WorkerTests.Raw(key: "k\(i)", value: Array(events.utf8), partition: p)
        }
    }

    /// Polls `probe` until it returns a value; fails after `limit`.
    func eventually<T>(_ what: String, within limit: Duration, _ probe: () async throws -> T?) async throws -> T {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let v = try await probe() { return v }
            try await Task.sleep(for: .milliseconds(100))
        }
        XCTFail("timed out: \(what)")
        throw CancellationError()
    }
}

/// Plain HTTP GETs to the endpoint, and the Prometheus text format parsed into `series → value`.
struct HTTP {
    let port: Int
    let session = URLSession(configuration: .ephemeral)

    func get(_ path: String) async throws -> (Int, String) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.timeoutInterval = 10
        let (data, response) = try await session.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? -1, String(decoding: data, as: UTF8.self))
    }

    struct Scrape {
        var values: [String: Double] = [:]
        /// `# TYPE` per metric name.
        var types: [String: String] = [:]
        subscript(_ series: String) -> Double? { values[series] }
        subscript(_ series: String, default d: Double) -> Double { values[series] ?? d }
    }

    /// Parses `name{labels} value` lines (labels kept as written) and `# TYPE name type` lines.
    func scrape() async throws -> Scrape {
        let (code, body) = try await get("/metrics")
        XCTAssertEqual(code, 200)
        var s = Scrape()
        for line in body.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                if parts.count == 4 { s.types[String(parts[2])] = String(parts[3]) }
                continue
            }
            if line.hasPrefix("#") { continue }
            guard let space = line.lastIndex(of: " "), let v = Double(line[line.index(after: space)...]) else {
                XCTFail("not a sample line: \(line)")
                continue
            }
            s.values[String(line[..<space])] = v
        }
        return s
    }
}
