import CoreMetrics
import Logging
import MaidianEvents
import MaidianKafka
import MaidianPipeline
import Synchronization

/// Turns a worker's counts into swift-metrics series, when asked (`update()`, called right before each
/// scrape): the worker keeps counting in relaxed atomics (`EngineCounters`, `StageCounter`, `WorkerStatus`)
/// and never does anything per event for metrics. Counters advance by what changed since the last update.
///
/// Series (all prefixed `maidian_`):
/// - `stage_received_total`, `stage_emitted_total`, `stage_dropped_total`, `stage_failed_total` `{stage}`:
///   the engine's counts per stage and output (`stage` is the kind, `kind#position` when a kind repeats);
/// - `stage_counter_total{stage,name}` / `stage_gauge{stage,name}`: every counter or gauge a stage
///   registered (duplicates, late events, reloads, rule-set version, ...), and the partial-results merger's
///   (`stage="merge"`): new stages appear by themselves;
/// - `records_total`, `events_total`, `record_bytes_total`: records decoded, events in them, their JSON bytes;
/// - `bad_headers_total`: record headers taken as absent (not valid UTF-8, `received_at` not an integer);
/// - `dead_letters_total{reason,level}`: rejected records (`level="record"`) and events (`level="event"`);
/// - `outputs_too_large_total`, `outputs_dropped_total`, `dead_letters_truncated_total`: outputs replaced by
///   `too_large` dead letters, outputs not produced (refused for good by Kafka, or too large without a
///   dead-letter topic), dead letters that kept only the first 64 KiB of their payload;
/// - `commits_total`, `partitions_assigned`, `worker_ready`, `worker_live`;
/// - `consumer_lag{topic,partition}`: librdkafka's `consumer_lag` of each held partition (from its
///   statistics, `statistics.interval.ms`); `consumer_rebalances_total`.
///
/// Thread-safe: updates are serialized.
public final class WorkerMetrics: Sendable {
    private let factory: any MetricsFactory
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
        var gauges: [(source: StageCounter, meter: Meter)] = []
        var attachedTo: ObjectIdentifier?
        var lag: [String: Meter] = [:]
        var commits: Exported?
        var rebalances: Exported?
        var assigned: Meter?
        var ready: Meter?
        var live: Meter?
        var statisticsError: String?
    }

    /// - Parameters:
    ///   - factory: Where the series go; the executable bootstraps `MetricsSystem` (Prometheus) and passes
    ///     `MetricsSystem.factory`, tests pass their own.
    ///   - stallLimit: How long the poll loop may stand still before `worker_live` (and `/health/live`) says no.
    public init(status: WorkerStatus, factory: any MetricsFactory, stallLimit: Duration = .seconds(120), logger: Logger) {
        self.factory = factory
        self.status = status
        self.stallLimit = stallLimit
        self.logger = logger
        state = Mutex(State())
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
        let ready = status.readiness.ready
        let live = status.liveness(stallLimit: stallLimit).live
        let commits = status.commits
        var report: ConsumerStatistics?
        var reportError: String?
        do { report = try statistics?.latest() } catch { reportError = "\(error)" }
        state.withLock { s in
            if let counters, s.attachedTo != ObjectIdentifier(counters) { attach(counters, &s) }
            for (source, exported) in s.counters { exported.advance(to: source.value) }
            for (source, meter) in s.gauges { meter.set(source.value) }
            s.commits = s.commits ?? Exported(Counter(label: "maidian_commits_total", factory: factory))
            s.commits!.advance(to: commits)
            s.assigned = s.assigned ?? Meter(label: "maidian_partitions_assigned", factory: factory)
            s.assigned!.set(assignment.count)
            s.ready = s.ready ?? Meter(label: "maidian_worker_ready", factory: factory)
            s.ready!.set(ready ? 1 : 0)
            s.live = s.live ?? Meter(label: "maidian_worker_live", factory: factory)
            s.live!.set(live ? 1 : 0)
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
        for stage in counters.stages {
            let label = kinds.filter { $0 == stage.kind }.count > 1 ? "\(stage.kind)#\(stage.position)" : stage.kind
            for c in [stage.received, stage.emitted, stage.dropped, stage.failed] {
                s.counters.append((c, Exported(Counter(label: "maidian_stage_\(c.name)_total", dimensions: [("stage", label)], factory: factory))))
            }
        }
        for (stage, c) in counters.stageCounters + counters.mergeCounters.map({ ("merge", $0) }) {
            let dims = [("stage", stage), ("name", c.name)]
            if c.isGauge {
                s.gauges.append((c, Meter(label: "maidian_stage_gauge", dimensions: dims, factory: factory)))
            } else {
                s.counters.append((c, Exported(Counter(label: "maidian_stage_counter_total", dimensions: dims, factory: factory))))
            }
        }
        let plain: [(StageCounter, String)] = [
            (counters.records, "maidian_records_total"), (counters.events, "maidian_events_total"),
            (counters.bytes, "maidian_record_bytes_total"), (counters.badHeaders, "maidian_bad_headers_total"),
            (counters.outputsTooLarge, "maidian_outputs_too_large_total"),
            (counters.outputsDropped, "maidian_outputs_dropped_total"),
            (counters.deadLettersTruncated, "maidian_dead_letters_truncated_total"),
        ]
        for (c, name) in plain { s.counters.append((c, Exported(Counter(label: name, factory: factory)))) }
        for reason in DeadLetterReason.allCases where reason != .none {
            let (list, level) = reason.isRecordLevel ? (counters.failedRecords, "record") : (counters.failedEvents, "event")
            let dims = [("reason", "\(reason)"), ("level", level)]
            s.counters.append((list[Int(reason.rawValue)], Exported(Counter(label: "maidian_dead_letters_total", dimensions: dims, factory: factory))))
        }
    }

    /// Lag gauges for the held partitions of the source topic; gauges of partitions no longer held go away.
    private func updateLag(_ report: ConsumerStatistics?, topic: String, assignment: Set<Int32>, _ s: inout State) {
        var seen = Set<String>()
        for p in report?.partitions ?? [] where p.topic == topic && assignment.contains(p.partition) {
            guard let lag = p.consumerLag else { continue }
            let key = "\(p.topic)/\(p.partition)"
            seen.insert(key)
            let meter = s.lag[key] ?? Meter(
                label: "maidian_consumer_lag", dimensions: [("topic", p.topic), ("partition", "\(p.partition)")], factory: factory)
            s.lag[key] = meter
            meter.set(Int(lag))
        }
        for (key, meter) in s.lag where !seen.contains(key) {
            meter.destroy()
            s.lag[key] = nil
        }
        if let rebalances = report?.rebalances {
            s.rebalances = s.rebalances ?? Exported(Counter(label: "maidian_consumer_rebalances_total", factory: factory))
            s.rebalances!.advance(to: Int(rebalances))
        }
    }
}
