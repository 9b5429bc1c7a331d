import Foundation
import Logging
import Synchronization

/// The worker loop's progress stamps and a watchdog thread over them (docs/recovery.md, "Liveness").
///
/// librdkafka 2.0.2 keeps a member alive as long as its background threads heartbeat, and polling any queue
/// resets `max.poll.interval.ms` (KAFKA-NOTES), so the group never evicts a worker whose loop is stuck. The
/// watchdog notices instead: no stamp for `timeout` calls `onStall` once (the CLI exits with status 3 so the
/// orchestrator restarts the worker, whose partitions then move on).
///
/// The same thread detects freezes of the whole process (SIGSTOP, a paused VM): it wakes every 100 ms, so a
/// gap between two of its wake-ups longer than `freezeLimit` means nothing in the process ran, heartbeats
/// included, and the group may have given the worker's partitions to another member.
final class Liveness: Sendable {
    private let lastBeat = Atomic<UInt64>(0)
    private let freezeCount = Atomic<Int>(0)
    private let longestFreeze = Atomic<UInt64>(0)
    private let stopped = Atomic<Bool>(false)
    let freezeLimit: Duration

    init(freezeLimit: Duration) {
        self.freezeLimit = freezeLimit
        beat()
    }

    /// Monotonic nanoseconds (CLOCK_MONOTONIC keeps counting while the process is stopped).
    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// The loop made progress.
    func beat() { lastBeat.store(Self.now(), ordering: .relaxed) }

    /// Freezes of the whole process seen so far.
    var freezes: Int { freezeCount.load(ordering: .relaxed) }
    /// The longest freeze seen.
    var longestFreezeSeconds: Double { Double(longestFreeze.load(ordering: .relaxed)) / 1e9 }

    /// Starts the watchdog thread; it ends after `stop()`. `timeout` nil: freezes only.
    func start(timeout: Duration?, logger: Logger, onStall: (@Sendable (String) -> Void)?) {
        let freezeNs = freezeLimit.nanoseconds
        let timeoutNs = timeout?.nanoseconds
        let thread = Thread { [self] in
            var last = Self.now()
            var fired = false
            while !stopped.load(ordering: .relaxed) {
                usleep(100_000)
                let now = Self.now()
                let gap = now &- last
                last = now
                if gap > freezeNs {
                    freezeCount.add(1, ordering: .relaxed)
                    if gap > longestFreeze.load(ordering: .relaxed) { longestFreeze.store(gap, ordering: .relaxed) }
                    logger.warning("the process was frozen for \(String(format: "%.1f", Double(gap) / 1e9)) s (SIGSTOP or a paused machine)")
                }
                // A beat from another thread can land between reading `now` and this load: a beat later than
                // `now` is no idle time (a wrapping subtraction read it as 584 years and stopped a healthy worker).
                let beat = lastBeat.load(ordering: .relaxed)
                let idle = now > beat ? now - beat : 0
                if let timeoutNs, !fired, idle > timeoutNs, !stopped.load(ordering: .relaxed) {
                    fired = true
                    let message = "the worker loop has made no progress for \(String(format: "%.1f", Double(idle) / 1e9)) s (source.liveness_timeout \(timeout!)): it is stuck"
                    logger.critical("\(message)")
                    onStall?(message)
                }
            }
        }
        thread.name = "maidian-watchdog"
        thread.start()
    }

    func stop() { stopped.store(true, ordering: .relaxed) }
}

extension Duration {
    /// Whole nanoseconds (0 for negative durations).
    var nanoseconds: UInt64 {
        let c = components
        return c.seconds < 0 ? 0 : UInt64(c.seconds) * 1_000_000_000 + UInt64(max(0, c.attoseconds) / 1_000_000_000)
    }
}
