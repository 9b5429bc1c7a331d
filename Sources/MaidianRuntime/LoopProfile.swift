import Foundation

/// Where a worker's loop spent its time, by phase: what `bench/through_broker.py` reports to tell waiting
/// (polls that found nothing, produce calls waiting for queue room, commit round trips, the final flush) from
/// working (the stages). Logged once when the worker stops.
///
/// Beside wall time it adds the worker thread's own CPU time per phase: on a machine whose cores are shared
/// with the broker, librdkafka's threads and other processes, wall time in a phase is inflated by the
/// time the thread waited for a core, and only the CPU time compares with `maidian bench`.
///
/// Not thread-safe: used on the worker thread only. Costs a clock read and a thread-CPU clock read per phase
/// per batch.
struct LoopProfile {
    /// The phases of one loop iteration (and the end of a run).
    enum Phase: Int, CaseIterable {
        /// Inside `consumer.poll` (fetching waits here; rebalance callbacks run here too).
        case poll
        /// Decode and stages, the merger, window ticks.
        case stages
        /// Registering outputs with the tracker and handing them to the sender thread (waits while it is behind).
        case produce
        /// Taking the offsets the sender's delivery reports completed, for the next commit.
        case deliveries
        /// Commit round trips.
        case commits
        /// Flushes: at revocations (inside a poll: counted in both) and at the end of a run.
        case flush

        var name: String {
            switch self {
            case .poll: "poll"
            case .stages: "stages"
            case .produce: "produce"
            case .deliveries: "deliveries"
            case .commits: "commits"
            case .flush: "flush"
            }
        }
    }

    private(set) var time = [Duration](repeating: .zero, count: Phase.allCases.count)
    private(set) var count = [Int](repeating: 0, count: Phase.allCases.count)
    /// The calling thread's CPU time per phase.
    private(set) var cpu = [Duration](repeating: .zero, count: Phase.allCases.count)
    /// The thread's CPU clock at the last `add` (nil before the first: then the phase's CPU time is not known).
    private var lastCPU: Duration?
    /// Polls after the first assignment that returned no record (waited the whole poll timeout, or were cut
    /// short by a rebalance).
    private(set) var emptyPolls = 0
    /// Time spent in polls that returned no record.
    private(set) var emptyPollTime: Duration = .zero
    /// The CPU time of the thread that produced the outputs and served their delivery reports
    /// (`OutputSender`), once it stopped; nil before.
    var senderCPU: Duration?
    /// CPU time of the decode helper threads (`source.decode_threads`), if any.
    var inflateCPU: Duration?

    /// Adds the time since `start` to `phase`; returns now (the next phase's start).
    @discardableResult
    mutating func add(_ phase: Phase, since start: ContinuousClock.Instant) -> ContinuousClock.Instant {
        let now = ContinuousClock.now
        time[phase.rawValue] += now - start
        count[phase.rawValue] += 1
        let threadCPU = Self.threadCPU()
        // Phases follow each other (each starts where the last one ended, or at `startCPU`), so the CPU time
        // since then is this phase's.
        if let last = lastCPU { cpu[phase.rawValue] += threadCPU - last }
        lastCPU = threadCPU
        return now
    }

    /// Marks the start of a phase for the CPU clock where it does not start at the end of another (a poll, a flush).
    mutating func startCPU() { lastCPU = Self.threadCPU() }

    /// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID).
    static func threadCPU() -> Duration {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec)
    }

    /// A poll that returned no record and took `took`.
    mutating func emptyPoll(took: Duration) {
        emptyPolls += 1
        emptyPollTime += took
    }

    /// One line for the log: seconds and counts per phase.
    var summary: String {
        func seconds(_ d: Duration) -> String {
            String(format: "%.3f", Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
        }
        var parts: [String] = []
        for p in Phase.allCases {
            parts.append("\(p.name)=\(seconds(time[p.rawValue]))s/\(count[p.rawValue])")
        }
        parts.append("empty_polls=\(seconds(emptyPollTime))s/\(emptyPolls)")
        parts.append("thread_cpu=" + Phase.allCases.map { "\($0.name):\(seconds(cpu[$0.rawValue]))" }.joined(separator: ","))
        if let senderCPU { parts.append("sender_cpu=\(seconds(senderCPU))") }
        if let inflateCPU { parts.append("inflate_cpu=\(seconds(inflateCPU))") }
        return parts.joined(separator: " ")
    }
}
