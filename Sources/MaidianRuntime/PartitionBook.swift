import MaidianKafka
import MaidianPipeline

/// The two kinds of partitions a worker reads: the source topic's, and the internal topic's through which
/// a repartitioning stage merges the partials of its windows.
enum Lane: UInt8, Comparable, CaseIterable {
    case source = 0
    case partials = 1
    static func < (a: Lane, b: Lane) -> Bool { a.rawValue < b.rawValue }
}

/// One partition of one lane.
struct Slot: Hashable, Comparable, CustomStringConvertible {
    var lane: Lane
    var partition: Int32
    static func < (a: Slot, b: Slot) -> Bool { (a.lane, a.partition) < (b.lane, b.partition) }
    var description: String { "\(lane)/\(partition)" }
}

/// The topic names of the lanes: the only place where a Kafka topic-partition becomes a slot and back.
struct LaneTopics {
    let source: String
    /// Nil when no stage repartitions.
    let partials: String?

    func slot(_ tp: TopicPartition) -> Slot? {
        if tp.topic == source { return Slot(lane: .source, partition: tp.partition) }
        if tp.topic == partials { return Slot(lane: .partials, partition: tp.partition) }
        return nil
    }

    func topicPartition(_ s: Slot) -> TopicPartition {
        TopicPartition(topic: s.lane == .source ? source : partials!, partition: s.partition)
    }
}

/// Everything the worker keeps about reading one partition: it is rebuilt from the committed offset when
/// the partition comes (back) to the worker, so it goes as a whole (`PartitionBook.drop`).
struct PartitionState {
    /// Next offset to read (after the last record handed to the pipeline).
    var position: Int64?
    /// Records before this offset are re-read only to rebuild state: their outputs were delivered before.
    var replayUntil: Int64?
    /// When and where re-reading started, for the log.
    var replayStart: (at: ContinuousClock.Instant, from: Int64)?
    /// A gap in the offsets that a seek did not fill (see `GapGuard`).
    var acceptedGap: (from: Int64, to: Int64)?
    /// The highest offset committed or stored for commit (at first the committed offset it started from):
    /// commits only move forward. Re-read records end there, and a replay point is asked for increasing
    /// offsets only (`PartitionClock` forgets what older offsets would need).
    var committedFloor: Int64?
    /// The group's committed offset as this worker last knew it: read at assignment, or its own commit that
    /// succeeded (nil: none seen). A partition given back whose committed offset is still this one was
    /// committed by nobody else meanwhile (see `RebalanceHandler.startOffsets`).
    var lastCommitted: Int64?
    /// Partials lane only: after each batch that read the partition, the next offset and the merger's replay
    /// point at that moment (a commit of that offset carries that point, not the merger's later state).
    var mergerPoints: [(next: Int64, point: ReplayPoint)] = []
    /// Source lane: this worker's bounded run wrote out the partition's windows here (`Worker`'s end of input);
    /// its commit of this offset says so (`ReplayPoint.finished`).
    var finishedAt: Int64?
    /// Source lane: the committed offset at which an earlier bounded run of the group finished the partition
    /// (read at assignment). Records from here on are newer than what the group's mergers take.
    var finishedBefore: Int64?
}

/// The worker's book of one lane: which partitions it holds, which an eager rebalance took pending the
/// next assignment, and the reading state of each (`PartitionState`). One per lane, owned by the worker;
/// the rebalance handler, the committer and the gap guard work on it.
///
/// Not thread-safe: used on the worker thread only.
final class PartitionBook {
    let lane: Lane
    /// Partitions assigned to this worker now.
    private(set) var held = Set<Int32>()
    /// Revoked in an eager rebalance: their state is kept in case the next assignment gives them back.
    private(set) var revokedPending = Set<Int32>()
    /// Source lane of a bounded run: the offset to stop at per partition, and the partitions that reached it.
    var endOffsets: [Int32: Int64] = [:]
    var reachedEnd = Set<Int32>()
    private var states: [Int32: PartitionState] = [:]

    init(lane: Lane) { self.lane = lane }

    /// The reading state of a partition (empty when none is kept).
    subscript(partition: Int32) -> PartitionState {
        get { states[partition] ?? PartitionState() }
        _modify { yield &states[partition, default: PartitionState()] }
    }

    func isHeld(_ partition: Int32) -> Bool { held.contains(partition) }

    /// Partitions with reading state.
    var partitionsWithState: [Int32] { Array(states.keys) }

    /// The partition was assigned.
    func hold(_ partition: Int32) {
        held.insert(partition)
        if let end = endOffsets[partition], end == 0 { reachedEnd.insert(partition) }
    }

    /// The partition was revoked (`pending`: its state stays until the next assignment shows whether it comes
    /// back) or lost.
    func release(_ partition: Int32, pending: Bool) {
        held.remove(partition)
        reachedEnd.remove(partition)
        if pending { revokedPending.insert(partition) }
    }

    /// Whether an eager rebalance revoked the partition and the next assignment was not seen yet; clears it.
    func takeRevokedPending(_ partition: Int32) -> Bool {
        revokedPending.remove(partition) != nil
    }

    /// The partitions an eager rebalance took and the next assignment did not give back; clears them.
    func takeAllRevokedPending() -> [Int32] {
        defer { revokedPending.removeAll() }
        return revokedPending.sorted()
    }

    /// Forgets everything read from the partitions (membership stays as it is).
    func drop(_ partitions: [Int32]) {
        for p in partitions { states[p] = nil }
    }

    /// Ends the re-reading of the partitions whose position reached the offset up to which they rebuilt
    /// state; returns them with that offset and where and when re-reading started.
    func finishRebuilds() -> [(partition: Int32, until: Int64, start: (at: ContinuousClock.Instant, from: Int64)?)] {
        var done: [(partition: Int32, until: Int64, start: (at: ContinuousClock.Instant, from: Int64)?)] = []
        for (p, s) in states {
            guard let until = s.replayUntil, (s.position ?? 0) >= until else { continue }
            done.append((p, until, s.replayStart))
            states[p]!.replayUntil = nil
            states[p]!.replayStart = nil
        }
        return done
    }
}

/// The books of both lanes.
struct PartitionBooks {
    let source = PartitionBook(lane: .source)
    let partials = PartitionBook(lane: .partials)

    subscript(lane: Lane) -> PartitionBook { lane == .source ? source : partials }

    func isHeld(_ s: Slot) -> Bool { self[s.lane].isHeld(s.partition) }
}
