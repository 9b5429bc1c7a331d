import Foundation
import Logging
import Synchronization

/// A hook into a worker's loop, for tests of failure handling: the worker calls it before it processes each
/// batch that holds records. Production workers have none (`WorkerOptions.hook` is nil).
public protocol WorkerHook: Sendable {
    /// Called on the worker thread before a batch of `records` records (source and partials) is processed.
    func willProcess(records: Int, worker: WorkerHookContext)
}

/// What a `WorkerHook` may do to the worker that calls it.
public struct WorkerHookContext {
    /// The worker's logger.
    public let logger: Logger
    let fatal: () -> Bool
    let raiseFatal: (String) -> Void
    let stop: () -> Bool

    /// Whether the worker's producer or consumer raised a fatal error.
    public var hasFatalError: Bool { fatal() }
    /// Raises a fatal error on the worker's producer, as a broker fencing the idempotent producer would.
    public func raiseFatalError(_ reason: String) { raiseFatal(reason) }
    /// Whether the worker was asked to stop.
    public var stopRequested: Bool { stop() }
}

/// Faults a worker injects into itself, for tests of failure handling only (`maidian run` reads them from
/// `MAIDIAN_TEST_FAULTS`, e.g. `fatal-after=3000`; docs/recovery.md). A `WorkerHook`: never set in production.
public final class TestFaults: WorkerHook {
    /// Once this many records were processed: librdkafka raises a fatal error on the worker's producer
    /// (`rd_kafka_test_fatal_error`), as a broker fencing the idempotent producer would.
    public let fatalAfterRecords: Int?
    /// Once this many records were processed: the processing loop stops making progress (it sleeps without
    /// polling, until a stop request), as a stuck stage would; librdkafka keeps the member alive.
    public let stallAfterRecords: Int?
    /// Records the worker was about to process so far (over every worker given this instance: `maidian run`
    /// runs one).
    private let processed = Atomic<Int>(0)

    /// Faults after that many processed records; nil leaves the fault out.
    public init(fatalAfterRecords: Int? = nil, stallAfterRecords: Int? = nil) {
        self.fatalAfterRecords = fatalAfterRecords
        self.stallAfterRecords = stallAfterRecords
    }

    /// Parses `fatal-after=N,stall-after=N` (empty: none).
    public convenience init(parsing text: String) throws {
        var fatal: Int?
        var stall: Int?
        for item in text.split(separator: ",") where !item.isEmpty {
            let kv = item.split(separator: "=", maxSplits: 1)
            guard kv.count == 2, let n = Int(kv[1]), n >= 0 else {
                throw RuntimeError(.setup, "MAIDIAN_TEST_FAULTS: '\(item)' is not name=count")
            }
            switch kv[0] {
            case "fatal-after": fatal = n
            case "stall-after": stall = n
            default: throw RuntimeError(.setup, "MAIDIAN_TEST_FAULTS: unknown fault '\(kv[0])' (fatal-after, stall-after)")
            }
        }
        self.init(fatalAfterRecords: fatal, stallAfterRecords: stall)
    }

    /// Counts the records; once a limit is reached raises the fatal error or stalls until a stop request.
    public func willProcess(records: Int, worker: WorkerHookContext) {
        let total = processed.add(records, ordering: .relaxed).newValue
        if let n = fatalAfterRecords, total >= n, !worker.hasFatalError {
            worker.logger.warning("test fault: raising a fatal error on the producer after \(total) records")
            worker.raiseFatalError("test fault fatal-after=\(n)")
        }
        if let n = stallAfterRecords, total >= n {
            worker.logger.warning("test fault: the loop stops making progress after \(total) records")
            while !worker.stopRequested { Thread.sleep(forTimeInterval: 0.1) }
        }
    }
}
