import Foundation
import Logging
import MaidianEvents
import MaidianKafka
import MaidianPipeline
import Prometheus
import Synchronization

/// Turns a worker's counts into Prometheus series, when asked (`update()`, called right before each
/// scrape): the worker keeps counting in relaxed atomics (`EngineCounters`, `StageCounter`, `WorkerStatus`)
/// and never does anything per event for metrics (per batch: one latency observation). Counters advance by
/// what changed since the last update. Every series has a `# HELP` line.
///
/// Series (all prefixed `maidian_`; `docs/operations.md` lists them with their meaning):
/// - `build_info{version}`: always 1;
/// - `stage_received_total`, `stage_emitted_total`, `stage_dropped_total`, `stage_failed_total`,
///   `stage_written_total` (records written to topics) `{stage}`:
///   the engine's counts per stage and output (`stage` is the kind, `kind#position` when a kind repeats);
/// - `<kind>_<name>_total` / `<kind>_<name>`: every counter or gauge a stage registered
///   (`dedup_duplicates_total`, `match_rules_version`, ...), and the partial-results merger's (`merge_…`);
///   a label `position` tells repeated kinds apart. New stages appear by themselves;
/// - `records_total`, `events_total`, `record_bytes_total`: records decoded, events in them, their JSON bytes;
/// - `bad_headers_total`: record headers taken as absent (not valid UTF-8, `received_at` not an integer);
/// - `dead_letters_total{reason,level}`: rejected records (`level="record"`) and events (`level="event"`);
/// - `outputs_too_large_total`, `outputs_dropped_total`, `dead_letters_truncated_total`: outputs replaced by
///   `too_large` dead letters, outputs not produced (refused for good by Kafka, or too large without a
///   dead-letter topic), dead letters that kept only the first 64 KiB of their payload;
/// - `produced_records_total{topic}`: records handed to the producer per output topic;
/// - `batch_duration_seconds` (histogram): from the end of a poll to the batch's outputs produced;
/// - `event_time_lag_seconds`: wall clock minus the newest event time processed; `newest_event_time_seconds`;
/// - `commits_total`, `partitions_assigned`, `worker_ready`, `worker_live`;
/// - `consumer_lag{topic,partition}`: librdkafka's `consumer_lag` of each held partition (from its
///   statistics, `statistics.interval.ms`); `consumer_rebalances_total`.
///
/// Thread-safe: updates are serialized.
public final class WorkerMetrics: Sendable {
    /// Upper bounds (seconds) of the batch-latency buckets: a batch takes from well under a millisecond (a
    /// few records) to seconds (a full batch while the broker is slow to take its outputs).
    public static let batchSecondsBuckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    private let registry: PrometheusCollectorRegistry
    private let status: WorkerStatus
    private let stallLimit: Duration
    private let logger: Logger
    private let state: Mutex<State>

    /// A counter fed from a monotonic source.
    private final class Exported {
        let counter: Counter
        var last = 0
        init(_ counter: Counter) { self.counter = counter }
        func advance(to value: Int) {
            if value > last { counter.increment(by: Int64(value - last)) }
            last = value
        }
    }

    private struct State {
        var counters: [(source: StageCounter, exported: Exported)] = []
        var gauges: [(source: StageCounter, gauge: Gauge)] = []
        var attachedTo: ObjectIdentifier?
        var lag: [String: Gauge] = [:]
        var produced: [String: Exported] = [:]
        var commits: Exported?
        var rebalances: Exported?
        var statisticsError: String?
    }

    private let assigned: Gauge
    private let ready: Gauge
    private let live: Gauge
    private let eventTimeLag: Gauge
    private let newestEventTime: Gauge

    /// - Parameters:
    ///   - registry: Where the series go (the registry `OpsServer` emits).
    ///   - stallLimit: How long the poll loop may stand still before `worker_live` (and `/health/live`) says no.
    public init(status: WorkerStatus, registry: PrometheusCollectorRegistry, stallLimit: Duration = .seconds(120), logger: Logger) {
        self.registry = registry
        self.status = status
        self.stallLimit = stallLimit
        self.logger = logger
        state = Mutex(State())
        registry.makeGauge(
            name: "maidian_build_info", labels: [("version", MaidianBuild.version)],
            help: "Always 1; the label says which Maidian version runs."
        ).set(1.0)
        assigned = registry.makeGauge(name: "maidian_partitions_assigned", help: "Source-topic partitions this worker holds.")
        ready = registry.makeGauge(name: "maidian_worker_ready", help: "1 once partitions were assigned and until shutdown starts (as /health/ready).")
        live = registry.makeGauge(name: "maidian_worker_live", help: "1 while the worker thread runs and its poll loop turns (as /health/live).")
        eventTimeLag = registry.makeGauge(
            name: "maidian_event_time_lag_seconds",
            help: "Wall clock minus the newest event time (after calibration) the worker processed; 0 before the first event.")
        newestEventTime = registry.makeGauge(
            name: "maidian_newest_event_time_seconds", help: "The newest event time the worker processed, in seconds since the epoch.")
        let histogram = registry.makeValueHistogram(
            name: "maidian_batch_duration_seconds", buckets: Self.batchSecondsBuckets,
            help: "Time from the end of a poll to the batch's outputs handed to the producer.")
        status.observeBatches { histogram.record($0) }
    }

    /// How long the poll loop may stand still while the worker counts as live.
    public var liveStallLimit: Duration { stallLimit }

    /// Brings every series up to date. Cheap: a few hundred atomic loads and a statistics parse when a new
    /// report arrived.
    public func update() {
        let counters = status.counters
        let statistics = status.statistics
        let assignment = status.assignment
        let topic = status.topic
        let isReady = status.readiness.ready
        let isLive = status.liveness(stallLimit: stallLimit).live
        let commits = status.commits
        let produced = status.produced
        let newest = status.newestEventTime
        var report: ConsumerStatistics?
        var reportError: String?
        do { report = try statistics?.latest() } catch { reportError = "\(error)" }
        assigned.set(Int64(assignment.count))
        ready.set(Int64(isReady ? 1 : 0))
        live.set(Int64(isLive ? 1 : 0))
        if let newest {
            let now = Self.nowMilliseconds()
            eventTimeLag.set(Double(max(0, now - newest)) / 1000)
            newestEventTime.set(Double(newest) / 1000)
        }
        state.withLock { s in
            if let counters, s.attachedTo != ObjectIdentifier(counters) { attach(counters, &s) }
            for (source, exported) in s.counters { exported.advance(to: source.value) }
            for (source, gauge) in s.gauges { gauge.set(Int64(source.value)) }
            s.commits = s.commits ?? Exported(registry.makeCounter(name: "maidian_commits_total", help: "Offset commits."))
            s.commits!.advance(to: commits)
            for (topic, n) in produced {
                let e = s.produced[topic] ?? Exported(registry.makeCounter(
                    name: "maidian_produced_records_total", labels: [("topic", topic)],
                    help: "Records handed to the producer per output topic (delivery is at-least-once)."))
                s.produced[topic] = e
                e.advance(to: n)
            }
            updateLag(report, topic: topic, assignment: Set(assignment), &s)
            if let reportError, s.statisticsError != reportError {
                logger.warning("kafka statistics unreadable: \(reportError)")
            }
            s.statisticsError = reportError
        }
    }

    /// Creates the series of a (new) pipeline's counters.
    private func attach(_ counters: EngineCounters, _ s: inout State) {
        s.attachedTo = ObjectIdentifier(counters)
        s.counters = []
        s.gauges = []
        let kinds = counters.stages.map(\.kind)
        let countHelp = [
            "received": "Events a stage or output received.", "emitted": "Live events a stage passed on (outputs pass every live event on).",
            "dropped": "Events a stage removed on purpose (duplicates, noise).", "failed": "Events a stage rejected (to the dead-letter topic).",
            "written": "Records a stage or output wrote to its topics (outputs' records, windowed counts).",
        ]
        for stage in counters.stages {
            let label = kinds.filter { $0 == stage.kind }.count > 1 ? "\(stage.kind)#\(stage.position)" : stage.kind
            for c in [stage.received, stage.emitted, stage.dropped, stage.failed, stage.written] {
                let counter = registry.makeCounter(
                    name: "maidian_stage_\(c.name)_total", labels: [("stage", label)], help: countHelp[c.name] ?? c.name)
                s.counters.append((c, Exported(counter)))
            }
        }
        let registered = counters.stageCounters + counters.mergeCounters.map { ("merge", $0) }
        var positions: [String: Int] = [:]
        for (stage, c) in registered {
            // A kind's counters repeat when the kind does: the first registration of a name starts a new instance.
            let key = "\(stage).\(c.name)"
            let position = positions[key, default: 0]
            positions[key] = position + 1
            let repeated = registered.filter { $0.stage == stage && $0.counter.name == c.name }.count > 1
            let labels = repeated ? [("position", "\(position)")] : []
            let name = "maidian_" + Self.metricName(stage) + "_" + Self.metricName(c.name)
            let help = Self.stageHelp[key] ?? "Counter '\(c.name)' the \(stage) stage registered."
            if c.isGauge {
                s.gauges.append((c, registry.makeGauge(name: name, labels: labels, help: help)))
            } else {
                s.counters.append((c, Exported(registry.makeCounter(name: name + "_total", labels: labels, help: help))))
            }
        }
        let plain: [(StageCounter, String, String)] = [
            (counters.records, "maidian_records_total", "Input records decoded (good and bad)."),
            (counters.events, "maidian_events_total", "Events found in the good records, before any stage (duplicates and invalid events included)."),
            (counters.bytes, "maidian_record_bytes_total", "JSON bytes of the decoded records (after zstd)."),
            (counters.badHeaders, "maidian_bad_headers_total", "Record headers taken as absent: not valid UTF-8, or received_at not a decimal integer."),
            (counters.outputsTooLarge, "maidian_outputs_too_large_total", "Outputs over the producer's message.max.bytes, replaced by too_large dead letters."),
            (counters.outputsDropped, "maidian_outputs_dropped_total", "Outputs not produced: refused for good by Kafka, or too large without a dead-letter output."),
            (counters.deadLettersTruncated, "maidian_dead_letters_truncated_total", "Dead letters that kept only the first 64 KiB of their payload."),
        ]
        for (c, name, help) in plain { s.counters.append((c, Exported(registry.makeCounter(name: name, help: help)))) }
        for reason in DeadLetterReason.allCases where reason != .none {
            let (list, level) = reason.isRecordLevel ? (counters.failedRecords, "record") : (counters.failedEvents, "event")
            let counter = registry.makeCounter(
                name: "maidian_dead_letters_total", labels: [("reason", "\(reason)"), ("level", level)],
                help: "Rejected records (level=record) and events (level=event) by reason, as written to the dead-letter topic.")
            s.counters.append((list[Int(reason.rawValue)], Exported(counter)))
        }
    }

    /// Lag gauges for the held partitions of the source topic; gauges of partitions no longer held go away.
    private func updateLag(_ report: ConsumerStatistics?, topic: String, assignment: Set<Int32>, _ s: inout State) {
        var seen = Set<String>()
        for p in report?.partitions ?? [] where p.topic == topic && assignment.contains(p.partition) {
            guard let lag = p.consumerLag else { continue }
            let key = "\(p.topic)/\(p.partition)"
            seen.insert(key)
            let gauge = s.lag[key] ?? registry.makeGauge(
                name: "maidian_consumer_lag", labels: [("topic", p.topic), ("partition", "\(p.partition)")],
                help: "Records of a held source partition not yet consumed (librdkafka statistics).")
            s.lag[key] = gauge
            gauge.set(lag)
        }
        for (key, gauge) in s.lag where !seen.contains(key) {
            registry.unregisterGauge(gauge)
            s.lag[key] = nil
        }
        if let rebalances = report?.rebalances {
            s.rebalances = s.rebalances ?? Exported(registry.makeCounter(
                name: "maidian_consumer_rebalances_total", help: "Consumer-group rebalances this worker took part in."))
            s.rebalances!.advance(to: Int(rebalances))
        }
    }

    /// A stage kind or counter name as part of a metric name: letters, digits and `_`.
    static func metricName(_ s: String) -> String {
        String(s.map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "_" })
    }

    /// What the built-in stages' counters mean (`<kind>.<name>`); other stages get a generic line.
    static let stageHelp: [String: String] = [
        "calibrate_time.calibrated": "Events whose time was corrected for a wrong device clock.",
        "dedup.duplicates": "Retried copies of events dropped.",
        "device.unknown": "Events whose device model is in no table.",
        "device.os_from_ua": "Events whose $os came from the User-Agent.",
        "noise_filter.noise_dropped": "Events the noise filter dropped (all rules).",
        "location.located": "Events given a location.",
        "location.lookups": "Geo database look-ups.",
        "location.reloads": "Geo database reloads.",
        "match.matched": "Events that matched at least one rule.",
        "match.rules_reloads": "Rules files reloaded.",
        "match.rules_reload_failures": "Rules reloads that failed (the previous rules stay in use).",
        "match.rules_version": "Version of the rules in use: 1 at start, one more per reload.",
        "windows.late": "Events later than the allowed lateness, not counted.",
        "windows.orphan_leaves": "Page leaves without an open visit.",
        "windows.visits_closed": "Visits closed (dwell times written).",
        "windows.trails": "Crash trails written.",
        "windows.idle_partitions": "Times a partition went idle and stopped holding windows back.",
        "merge.late_partials": "Partial window results of a source back from idle, added to windows written without it.",
        "merge.partial_copies": "Partial window results a re-read source sent again, left out.",
        "merge.windows_written": "Windowed count records written after merging partials.",
    ]

    private static func nowMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}
