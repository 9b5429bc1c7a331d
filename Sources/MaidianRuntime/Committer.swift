import Logging
import MaidianKafka
import MaidianPipeline

/// Decides which offsets the worker commits and with which replay point, and commits them: an offset is
/// committed once every output derived from the records before it is delivered (`OffsetTracker`), never
/// backwards, and only with the replay point a new owner needs to rebuild the state it leaves behind.
///
/// Not thread-safe: used on the worker thread only.
final class Committer {
    /// Where a commit goes and what it needs from the rest of the worker.
    struct Target {
        /// Commits synchronously; a rebalancing group answers with `KafkaError.isRebalanceError`.
        var commit: ([TopicPartition: CommittedOffset]) throws -> Void
        /// A fatal error was raised: nothing is committed any more (what was delivered before is read again).
        var isFatal: () -> Bool
        /// The replay point of a source partition for a commit of `next`; nil when not known. Asked only when
        /// `sourceKeepsState`.
        var sourcePoint: (_ partition: Int32, _ next: Int64) -> ReplayPoint?
        /// Whether a stage keeps state across batches: otherwise source offsets are committed without a
        /// replay point (nothing needs re-reading).
        var sourceKeepsState: Bool
        /// Called after each successful commit.
        var committed: () -> Void = {}
    }

    let topics: LaneTopics
    let books: PartitionBooks
    let target: Target
    let logger: Logger
    /// How often the loop commits.
    let interval: Duration
    /// Next offsets whose outputs are all delivered but that are not known to be committed yet.
    private(set) var uncommitted: [Slot: Int64] = [:]
    private(set) var lastCommit = ContinuousClock.now

    init(topics: LaneTopics, books: PartitionBooks, target: Target, interval: Duration = .seconds(1), logger: Logger) {
        self.topics = topics
        self.books = books
        self.target = target
        self.interval = interval
        self.logger = logger
    }

    /// Whether the last commit is `interval` old.
    var isDue: Bool { ContinuousClock.now - lastCommit >= interval }

    /// Takes the offsets the tracker advanced to: those of held partitions beyond what was committed or stored
    /// before wait for the next commit.
    func store(_ advanced: [Slot: Int64]) {
        for (s, next) in advanced where books.isHeld(s) {
            let book = books[s.lane]
            if let floor = book[s.partition].committedFloor, next <= floor { continue }
            book[s.partition].committedFloor = next
            uncommitted[s] = next
        }
    }

    /// Commits the delivered offsets not yet committed, each with its replay point as metadata. Returns
    /// whether nothing is left uncommitted. A rebalancing group refuses commits: the offsets are kept and
    /// committed after the next assignment.
    @discardableResult
    func commit(final: Bool) -> Bool {
        lastCommit = ContinuousClock.now
        if uncommitted.isEmpty { return true }
        if target.isFatal() { return false }
        var offsets: [TopicPartition: CommittedOffset] = [:]
        for (s, next) in uncommitted {
            let metadata: String
            if s.lane == .source && !target.sourceKeepsState {
                metadata = ""
            } else if let point = replayPoint(s, next: next) {
                metadata = point.metadata
            } else {
                logger.warning("\(topics.topicPartition(s)): no replay point for offset \(next); not committing it")
                uncommitted[s] = nil
                continue
            }
            offsets[topics.topicPartition(s)] = CommittedOffset(offset: next, metadata: metadata)
        }
        do {
            try target.commit(offsets)
            target.committed()
            for (tp, c) in offsets {
                guard let s = topics.slot(tp) else { continue }
                if uncommitted[s] == c.offset { uncommitted[s] = nil }
                books[s.lane][s.partition].lastCommitted = c.offset
            }
            return uncommitted.isEmpty
        } catch let e as KafkaError where e.isRebalanceError {
            if final { logger.info("commit deferred until the group has rebalanced: \(e.message)") }
            return false
        } catch {
            logger.warning("commit failed: \(error)")
            return false
        }
    }

    /// Where re-reading must start to rebuild the state that a commit of `next` leaves behind; nil when that
    /// is not known (then the offset is not committed: a new owner would start without state).
    private func replayPoint(_ s: Slot, next: Int64) -> ReplayPoint? {
        switch s.lane {
        case .source:
            let finished = books.source[s.partition].finishedAt == next
            // A partition finished with no record read (empty) has no clock: nothing to re-read before `next`.
            guard var point = target.sourcePoint(s.partition, next) ?? (finished ? ReplayPoint(offset: next, maxEventTime: nil) : nil) else { return nil }
            point.finished = finished
            return point
        case .partials:
            // The merger's point as of `next` (a commit point: recorded after the batch that ended there).
            let book = books.partials
            guard let i = book[s.partition].mergerPoints.firstIndex(where: { $0.next == next }) else { return nil }
            let point = book[s.partition].mergerPoints[i].point
            book[s.partition].mergerPoints.removeFirst(i)
            return point
        }
    }

    /// After an assignment: gives up the refused commits of partitions that are neither held nor incoming
    /// (committed later, they could only move the new owner's committed offset back).
    func giveUpMoved(incoming: Set<Slot>) {
        for (s, next) in uncommitted where !books.isHeld(s) && !incoming.contains(s) {
            logger.info("\(topics.topicPartition(s)): giving up the commit of offset \(next): the partition moved on; its new owner re-reads from the last commit")
            uncommitted[s] = nil
        }
    }

    /// A source partition finished at `offset` (`PartitionState.finishedAt`): when everything before it is
    /// delivered and committed already (a partition read to its end early in a bounded run), that offset is
    /// committed once more, with the mark; otherwise the mark comes with the commit that reaches it.
    /// A partition with nothing read and nothing committed (empty at the start) is committed at `offset` (0).
    func recommitFinished(_ partition: Int32, at offset: Int64) {
        let s = Slot(lane: .source, partition: partition)
        let state = books.source[partition]
        guard uncommitted[s] == nil else { return }
        let committedThere = state.committedFloor == offset && state.lastCommitted == offset
        let empty = state.position == nil && state.committedFloor == nil
        if committedThere || empty {
            books.source[partition].committedFloor = offset
            uncommitted[s] = offset
        }
    }

    /// A lost partition: nothing of it is committed.
    func forget(_ s: Slot) { uncommitted[s] = nil }

    /// The offsets still uncommitted, for the log.
    var pendingDescription: String {
        "\(uncommitted.sorted { $0.key < $1.key }.map { "\(topics.topicPartition($0.key))@\($0.value)" })"
    }
}
