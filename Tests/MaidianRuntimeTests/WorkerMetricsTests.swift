import Foundation
import Logging
import MaidianEvents
import MaidianKafka
import MaidianPipeline
import MaidianRuntime
import MaidianStages
import Prometheus
import XCTest

/// A stage of a later issue, as far as metrics see it: a counter and a gauge (a rule-set version) registered
/// through `StageContext`, nothing else.
private final class VersionedStage: Stage {
    struct Config: Decodable, Sendable {}
    static let kind = "versioned"
    static let summary = "registers a counter and a gauge"
    let reloads: StageCounter
    let version: StageCounter

    init(config: Config, context: StageContext) throws {
        reloads = context.counter("reloads")
        version = context.gauge("rules_version")
        version.set(7)
    }

    func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {}
}

/// `WorkerMetrics` without Kafka: the engine's counts and every stage counter become Prometheus series
/// without metrics code for the stage; counters advance by deltas, gauges follow their level.
final class WorkerMetricsTests: XCTestCase {
    func testEveryStageCounterIsExportedAndMoves() throws {
        var registry = StageRegistry(BuiltinStages.all)
        registry.register(VersionedStage.self)
        let spec = try PipelineSpec.parse(yaml: """
            stages:
              - kind: validate
              - kind: versioned
              - kind: validate
            """, file: "metrics.yaml")
        let engine = try PipelineEngine(spec: spec, registry: registry, logger: Logger(label: "test"))
        let status = WorkerStatus()
        status.attach(counters: engine.live, statistics: KafkaStatisticsSource(), topic: "events.raw")
        let prometheus = PrometheusCollectorRegistry()
        let metrics = WorkerMetrics(status: status, registry: prometheus, logger: Logger(label: "test"))

        func scrape() -> [String: String] {
            metrics.update()
            var out: [String: String] = [:]
            for line in prometheus.emitToString().split(separator: "\n") {
                if line.hasPrefix("# TYPE ") || line.hasPrefix("# HELP ") {
                    let p = line.split(separator: " ", maxSplits: 3)
                    out[(line.hasPrefix("# TYPE ") ? "type " : "help ") + p[2]] = String(p[3])
                } else if let space = line.lastIndex(of: " ") {
                    out[String(line[..<space])] = String(line[line.index(after: space)...])
                }
            }
            return out
        }

        var m = scrape()
        XCTAssertEqual(m["maidian_versioned_rules_version"], "7.0", "a stage's gauge: its own series")
        XCTAssertEqual(m["type maidian_versioned_rules_version"], "gauge")
        XCTAssertEqual(m["maidian_versioned_reloads_total"], "0", "a stage's counter: its own series")
        XCTAssertEqual(m["type maidian_versioned_reloads_total"], "counter")
        XCTAssertEqual(m["help maidian_versioned_reloads_total"], "Counter 'reloads' the versioned stage registered.")
        XCTAssertEqual(m[#"maidian_build_info{version="\#(MaidianBuild.version)"}"#], "1.0")
        let types = m.keys.filter { $0.hasPrefix("type ") }.map { String($0.dropFirst(5)) }
        XCTAssertGreaterThan(types.count, 10)
        for name in types { XCTAssertNotNil(m["help " + name], "no # HELP for \(name)") }
        XCTAssertEqual(m[#"maidian_stage_received_total{stage="validate#0"}"#], "0", "a repeated kind is told apart by position")
        XCTAssertEqual(m[#"maidian_stage_received_total{stage="validate#2"}"#], "0")
        XCTAssertEqual(m[#"maidian_stage_received_total{stage="versioned"}"#], "0")
        XCTAssertEqual(m["maidian_worker_ready"], "0.0")
        XCTAssertEqual(m["maidian_worker_live"], "0.0", "the worker thread has not started")
        for reason in DeadLetterReason.allCases where reason != .none {
            XCTAssertNotNil(m[#"maidian_dead_letters_total{reason="\#(reason)",level="\#(reason.isRecordLevel ? "record" : "event")"}"#], "\(reason)")
        }

        // One record: two good events, one without distinct_id; one bad record.
        var batch = EventBatch()
        var output = OutputBuffer()
        let good = #"{"type":"track","event":"$AppClick","time":1763700000000,"distinct_id":"u1","_track_id":1,"properties":{}}"#
        let bad = #"{"type":"track","event":"$AppClick","time":1763700000000,"properties":{}}"#
        append("[\(good),\(good.replacingOccurrences(of: "\"_track_id\":1", with: "\"_track_id\":2")),\(bad)]", to: &batch)
        append("not json", to: &batch)
        try engine.process(&batch, output: &output)
        let versioned = try XCTUnwrap(engine.counters.first { $0.stage == "versioned" && $0.counter.name == "reloads" }?.counter)
        versioned.add(2)
        let version = try XCTUnwrap(engine.counters.first { $0.counter.name == "rules_version" }?.counter)
        version.set(3)
        status.workerStarted()
        status.assignmentChanged([0, 1, 2], assigned: true)
        status.committed()

        m = scrape()
        XCTAssertEqual(m["maidian_records_total"], "2")
        XCTAssertEqual(m["maidian_events_total"], "3")
        XCTAssertEqual(m[#"maidian_stage_received_total{stage="validate#0"}"#], "3")
        XCTAssertEqual(m[#"maidian_stage_failed_total{stage="validate#0"}"#], "1")
        XCTAssertEqual(m[#"maidian_stage_received_total{stage="validate#2"}"#], "2")
        XCTAssertEqual(m[#"maidian_dead_letters_total{reason="bad_distinct_id",level="event"}"#], "1")
        XCTAssertEqual(m[#"maidian_dead_letters_total{reason="bad_encoding",level="record"}"#], "1")
        XCTAssertEqual(m["maidian_versioned_reloads_total"], "2")
        for name in ["maidian_outputs_too_large_total", "maidian_outputs_dropped_total", "maidian_dead_letters_truncated_total"] {
            XCTAssertEqual(m[name], "0", name)
        }
        XCTAssertEqual(m["maidian_versioned_rules_version"], "3.0", "a gauge goes down too")
        XCTAssertEqual(m["maidian_partitions_assigned"], "3.0")
        XCTAssertEqual(m["maidian_commits_total"], "1")
        XCTAssertEqual(m["maidian_worker_ready"], "1.0")
        XCTAssertEqual(m["maidian_worker_live"], "1.0")

        // A batch: its latency, its newest event time, what it produced.
        let fiveSecondsAgo = Int64(Date().timeIntervalSince1970 * 1000) - 5000
        status.batchDone(latency: .milliseconds(3), newestEventTime: fiveSecondsAgo, produced: [("events.enriched", 4), ("events.dlq", 1)])
        status.batchDone(latency: .milliseconds(30), newestEventTime: fiveSecondsAgo - 60_000, produced: [("events.enriched", 2)])
        m = scrape()
        XCTAssertEqual(m["type maidian_batch_duration_seconds"], "histogram")
        XCTAssertEqual(m["maidian_batch_duration_seconds_count"], "2")
        XCTAssertEqual(m[#"maidian_batch_duration_seconds_bucket{le="0.005"}"#], "1")
        XCTAssertEqual(m[#"maidian_batch_duration_seconds_bucket{le="0.05"}"#], "2")
        XCTAssertEqual(m[#"maidian_produced_records_total{topic="events.enriched"}"#], "6")
        XCTAssertEqual(m[#"maidian_produced_records_total{topic="events.dlq"}"#], "1")
        let lag = try XCTUnwrap(Double(m["maidian_event_time_lag_seconds"] ?? ""))
        XCTAssertGreaterThanOrEqual(lag, 5, "the newest event time counts, not the last batch's")
        XCTAssertLessThan(lag, 60)

        versioned.add(5)
        engine.live.outputsTooLarge.add(2)
        engine.live.deadLettersTruncated.add(1)
        status.stopping()
        m = scrape()
        XCTAssertEqual(m["maidian_outputs_too_large_total"], "2")
        XCTAssertEqual(m["maidian_dead_letters_truncated_total"], "1")
        XCTAssertEqual(m["maidian_versioned_reloads_total"], "7", "counters advance by what changed")
        XCTAssertEqual(m["maidian_records_total"], "2", "no double counting between scrapes")
        XCTAssertEqual(m["maidian_worker_ready"], "0.0", "not ready once shutdown started")
    }

    private func append(_ json: String, to batch: inout EventBatch) {
        let topic = batch.topicIndex("events.raw")
        Array(json.utf8).withUnsafeBytes { value in
            Array("install-1".utf8).withUnsafeBytes { key in
                batch.appendRecord(
                    topic: topic, partition: 0, offset: Int64(batch.records.count), timestamp: 0, key: key, value: value,
                    ip: nil, receivedAt: nil, ua: nil, project: nil)
            }
        }
    }
}
