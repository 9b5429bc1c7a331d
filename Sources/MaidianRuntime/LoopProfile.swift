import Foundation

/// Where a worker's loop spent its time, by phase: what `bench/through_broker.py` reports to tell waiting
/// (polls that found nothing, produce calls waiting for queue room, commit round trips, the final flush) from
/// working (the stages). Logged once when the worker stops.
///
/// Not thread-safe: used on the worker thread only. Costs two clock reads per phase per batch.
struct LoopProfile {
    /// The phases of one loop iteration (and the end of a run).
    enum Phase: Int, CaseIterable {
        /// Inside `consumer.poll` (fetching waits here; rebalance callbacks run here too).
        case poll
        /// Decode and stages, the merger, window ticks.
        case stages
        /// Handing outputs to the producer (copies; waits for room when its queue is full).
        case produce
        /// Serving delivery reports (`producer.poll`).
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
    /// Polls after the first assignment that returned no record (waited the whole poll timeout, or were cut
    /// short by a rebalance).
    private(set) var emptyPolls = 0
    /// Time spent in polls that returned no record.
    private(set) var emptyPollTime: Duration = .zero

    /// Adds the time since `start` to `phase`; returns now (the next phase's start).
    @discardableResult
    mutating func add(_ phase: Phase, since start: ContinuousClock.Instant) -> ContinuousClock.Instant {
        let now = ContinuousClock.now
        time[phase.rawValue] += now - start
        count[phase.rawValue] += 1
        return now
    }

    /// A poll that returned no record and took `took`.
    mutating func emptyPoll(took: Duration) {
        emptyPolls += 1
        emptyPollTime += took
    }

    /// One line for the log: seconds and counts per phase.
    var summary: String {
        var parts: [String] = []
        for p in Phase.allCases {
            let s = Double(time[p.rawValue].components.seconds) + Double(time[p.rawValue].components.attoseconds) / 1e18
            parts.append("\(p.name)=\(String(format: "%.3f", s))s/\(count[p.rawValue])")
        }
        let e = Double(emptyPollTime.components.seconds) + Double(emptyPollTime.components.attoseconds) / 1e18
        parts.append("empty_polls=\(String(format: "%.3f", e))s/\(emptyPolls)")
        return parts.joined(separator: " ")
    }
}
