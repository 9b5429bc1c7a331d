import MaidianKafka
import MaidianPipeline
import Synchronization

/// What a worker tells the outside while it runs: its phase, its partitions, its progress. The worker
/// thread updates it at a few points (start, assignment changes, each turn of its poll loop, commits, stop);
/// health endpoints and metrics read it from other threads. Thread-safe; nothing here is per record.
public final class WorkerStatus: Sendable {
    /// Where the worker is in its life.
    public enum Phase: Int, Sendable, CustomStringConvertible {
        /// Created, thread not running yet.
        case starting
        /// Polling (with or without partitions).
        case running
        /// Shutdown started: finishing the batch in hand, delivering, committing, leaving the group.
        case stopping
        /// The worker thread ended.
        case stopped

        public var description: String {
            switch self {
            case .starting: return "starting"
            case .running: return "running"
            case .stopping: return "stopping"
            case .stopped: return "stopped"
            }
        }
    }

    private struct Shared {
        var assignment: [Int32] = []
        var hadAssignment = false
        var counters: EngineCounters?
        var statistics: KafkaStatisticsSource?
        var topic = ""
        /// Records produced per output topic (as the worker names them, replay suffix included).
        var produced: [String: Int] = [:]
        /// The newest event time (ms) of any processed batch.
        var newestEventTime: Int64?
        /// Gets each batch's latency in seconds (a histogram's `record`), when metrics are exported.
        var batchObserver: (@Sendable (Double) -> Void)?
    }

    private let phaseValue = Atomic<Int>(Phase.starting.rawValue)
    /// Milliseconds since `origin` at the last turn of the poll loop.
    private let lastTurn = Atomic<Int64>(0)
    private let commitCount = Atomic<Int>(0)
    private let shared = Mutex(Shared())
    private let origin = ContinuousClock.now

    /// A status in phase `starting`, with no partitions.
    public init() {}

    // MARK: - Called by the worker

    /// The worker thread started.
    public func workerStarted() {
        _ = phaseValue.compareExchange(expected: Phase.starting.rawValue, desired: Phase.running.rawValue, ordering: .relaxed)
        turn()
    }

    /// The pipeline and the consumer exist: their counters and statistics can be read from now on.
    public func attach(counters: EngineCounters, statistics: KafkaStatisticsSource, topic: String) {
        shared.withLock {
            $0.counters = counters
            $0.statistics = statistics
            $0.topic = topic
        }
    }

    /// The partitions the worker holds now (after an assignment, a revocation or a loss).
    public func assignmentChanged<S: Sequence<Int32>>(_ partitions: S, assigned: Bool) {
        let sorted = partitions.sorted()
        shared.withLock {
            $0.assignment = sorted
            if assigned { $0.hadAssignment = true }
        }
    }

    /// One more turn of the poll loop (a liveness heartbeat: a stuck worker stops turning).
    @inline(__always)
    public func turn() {
        lastTurn.store(millisecondsSinceOrigin, ordering: .relaxed)
    }

    /// Offsets were committed.
    public func committed() { commitCount.wrappingAdd(1, ordering: .relaxed) }

    /// A batch went through the pipeline and its outputs were handed to the producer: how long that took
    /// (from the end of the poll), the newest event time in it (ms; nil when it held no live event), and the
    /// records produced per topic. Once per batch: one lock, no per-record work.
    public func batchDone(latency: Duration, newestEventTime: Int64?, produced: [(topic: String, count: Int)]) {
        let (s, atto) = latency.components
        let seconds = Double(s) + Double(atto) / 1e18
        let observer = shared.withLock {
            for (topic, n) in produced where n > 0 { $0.produced[topic, default: 0] += n }
            if let t = newestEventTime, t > ($0.newestEventTime ?? .min) { $0.newestEventTime = t }
            return $0.batchObserver
        }
        // A latency distribution cannot be rebuilt from totals at scrape time, so each batch is handed over.
        observer?(seconds)
    }

    /// Has `observer` called with each batch's latency in seconds (from the worker thread).
    public func observeBatches(_ observer: @escaping @Sendable (Double) -> Void) {
        shared.withLock { $0.batchObserver = observer }
    }

    /// Shutdown started (stop requested, or a bounded run reached its end).
    public func stopping() {
        var current = phaseValue.load(ordering: .relaxed)
        while current < Phase.stopping.rawValue {
            let (exchanged, now) = phaseValue.compareExchange(expected: current, desired: Phase.stopping.rawValue, ordering: .relaxed)
            if exchanged { return }
            current = now
        }
    }

    /// The worker thread ended.
    public func workerStopped() {
        phaseValue.store(Phase.stopped.rawValue, ordering: .relaxed)
        shared.withLock { $0.assignment = [] }
    }

    // MARK: - Read by anyone

    /// The current phase.
    public var phase: Phase { Phase(rawValue: phaseValue.load(ordering: .relaxed)) ?? .stopped }

    /// Partitions held now, sorted.
    public var assignment: [Int32] { shared.withLock { $0.assignment } }

    /// The source topic (empty before the worker attached).
    public var topic: String { shared.withLock { $0.topic } }

    /// Commits so far.
    public var commits: Int { commitCount.load(ordering: .relaxed) }

    /// The pipeline's counters, once the worker built it.
    public var counters: EngineCounters? { shared.withLock { $0.counters } }

    /// The consumer's statistics, once the worker created it.
    public var statistics: KafkaStatisticsSource? { shared.withLock { $0.statistics } }

    /// Records produced so far per output topic.
    public var produced: [String: Int] { shared.withLock { $0.produced } }

    /// The newest event time (ms since the epoch) the worker processed, nil before the first event.
    public var newestEventTime: Int64? { shared.withLock { $0.newestEventTime } }

    /// Time since the poll loop last turned.
    public var sinceLastTurn: Duration {
        .milliseconds(millisecondsSinceOrigin - lastTurn.load(ordering: .relaxed))
    }

    /// Live: the worker thread runs and its loop turned within `stallLimit`. Otherwise the reason.
    public func liveness(stallLimit: Duration) -> (live: Bool, reason: String) {
        switch phase {
        case .starting: return (false, "worker not started")
        case .stopped: return (false, "worker stopped")
        case .running, .stopping:
            let since = sinceLastTurn
            if since > stallLimit { return (false, "worker loop stalled for \(since.rounded)") }
            return (true, "worker \(phase)")
        }
    }

    /// Ready: partitions were assigned and shutdown has not started. Otherwise the reason.
    public var readiness: (ready: Bool, reason: String) {
        let p = phase
        if p == .stopping || p == .stopped { return (false, "worker \(p)") }
        let (had, partitions) = shared.withLock { ($0.hadAssignment, $0.assignment) }
        if !had { return (false, "waiting for a partition assignment") }
        return (true, "\(partitions.count) partition(s) assigned: \(partitions.map(String.init).joined(separator: ","))")
    }

    private var millisecondsSinceOrigin: Int64 {
        let (s, atto) = (ContinuousClock.now - origin).components
        return s * 1000 + atto / 1_000_000_000_000_000
    }
}
