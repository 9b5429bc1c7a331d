import Logging
import MaidianKafka
import MaidianPipeline

/// What the rebalance handler needs from the worker that owns it.
protocol RebalanceHost: AnyObject {
    /// Delivers everything in flight and stores the offsets it covers.
    func drain() throws
    /// The committed offsets and their metadata (replay points).
    func committedOffsets(_ tps: [TopicPartition]) throws -> [TopicPartition: CommittedOffset]
    /// The stages forget what they kept for these partitions of one lane.
    func forgetState(_ lane: Lane, _ partitions: [Int32])
    /// The stages continue from a checkpoint (clocks, watermarks) even when nothing is re-read.
    func restore(_ s: Slot, from point: ReplayPoint)
    /// The set of held partitions changed (status, metrics).
    func assignmentChanged(assigned: Bool)
}

/// Follows the group's rebalances: which partitions the worker holds, whose state it keeps over an eager
/// rebalance (revoked, then given back), where newly assigned partitions start (re-reading from their
/// replay point to rebuild state, without writing again), and what is committed or given up on the way.
///
/// Not thread-safe: librdkafka calls it on the worker thread (inside polls).
final class RebalanceHandler {
    let topics: LaneTopics
    let books: PartitionBooks
    let committer: Committer
    /// Whether a source stage keeps state: then a source offset committed without a replay point is worth a warning.
    let sourceKeepsState: Bool
    let logger: Logger
    unowned let host: any RebalanceHost

    /// At least one assignment was seen.
    private(set) var hadAssignment = false
    /// Between a revocation and the next assignment (eager rebalances come as two callbacks). No commits then:
    /// librdkafka completes the unassign (and rejoins) only once no commit is outstanding.
    private(set) var awaitingAssignment = false
    /// Delivery failed on a revocation: the worker stops with it after the poll.
    private(set) var failure: RuntimeError?
    /// Where a newly assigned partition without a committed offset starts (0 or `KafkaConsumer.end`, the
    /// consumer's `auto.offset.reset`); nil: left to librdkafka. Said explicitly, librdkafka looks the offset
    /// up at once; left to it, it first waits out a 100 ms offset-query backoff (2.0.2) per fresh partition,
    /// a tenth of a second at the start of every new group's run (bench/README.md, session 9).
    var freshStart: Int64?
    /// The pipeline merges windowed counts through the internal topic: only then is a source partition's
    /// `finished` mark kept (`PartitionState.finishedBefore`); without windows nothing is final at a run's end.
    var mergesWindows = false

    /// `freshStart` for a consumer's `auto.offset.reset`: offset 0 for the beginning, `KafkaConsumer.end` for the end,
    /// nil for `error` (librdkafka reports the missing offset).
    ///
    /// Offset 0, not the logical beginning, for the source partitions; the internal ones keep the logical beginning
    /// (`startOffsets`). librdkafka looks a logical offset up first (a ListOffsets round trip) and sends a fetch as
    /// soon as one partition is fetchable: when that was an internal partition of a new group (empty), the fetch
    /// waited out `fetch.wait.max.ms` before the raw partitions could be fetched, 0.1 s at the start of every new
    /// group's run (bench/README.md, session 15). Now the raw partitions are fetchable first, and the first fetch
    /// brings records. A partition whose log no longer starts at 0 (retention) answers "out of range", and
    /// librdkafka resets it to its beginning by the same setting, without an error.
    static func freshStart(autoOffsetReset: String?) -> Int64? {
        switch autoOffsetReset?.lowercased() {
        case "earliest", "smallest", "beginning": return 0
        case "latest", "largest", "end": return KafkaConsumer.end
        default: return nil
        }
    }

    init(topics: LaneTopics, books: PartitionBooks, committer: Committer, sourceKeepsState: Bool, host: any RebalanceHost, logger: Logger) {
        self.topics = topics
        self.books = books
        self.committer = committer
        self.sourceKeepsState = sourceKeepsState
        self.host = host
        self.logger = logger
    }

    /// Held source partitions, in order.
    var heldSource: [Int32] { books.source.held.sorted() }

    func handle(_ event: RebalanceEvent) {
        switch event {
        case .assigned(let tps):
            hadAssignment = true
            awaitingAssignment = false
            // The group is stable again: commit what a refused commit left over, before the new owners
            // of those partitions (maybe this worker) read their committed offsets.
            committer.commit(final: false)
            // What is still refused now and belongs to another member is given up.
            committer.giveUpMoved(incoming: Set(tps.compactMap { topics.slot($0) }))
            for tp in tps {
                guard let s = topics.slot(tp) else { continue }
                books[s.lane].hold(s.partition)
            }
            host.assignmentChanged(assigned: true)
            logger.info("assigned partitions \(tps.map { "\($0.topic)/\($0.partition)" }.sorted())")
        case .revoked(let tps):
            logger.info("revoked partitions \(tps.map { "\($0.topic)/\($0.partition)" }.sorted())")
            do {
                try host.drain()
                committer.commit(final: false)
            } catch {
                logger.error("could not deliver on revocation: \(error)")
                if failure == nil { failure = error as? RuntimeError }
            }
            for tp in tps {
                guard let s = topics.slot(tp) else { continue }
                // Kept until the next assignment shows whether the partition comes back.
                books[s.lane].release(s.partition, pending: true)
            }
            host.assignmentChanged(assigned: false)
            awaitingAssignment = true
        case .lost(let tps):
            logger.warning("lost partitions \(tps.map { "\($0.topic)/\($0.partition)" }.sorted()): no commit for them")
            let slots = tps.compactMap { topics.slot($0) }
            for s in slots {
                committer.forget(s)
                books[s.lane].release(s.partition, pending: false)
            }
            drop(slots)
            host.assignmentChanged(assigned: false)
            awaitingAssignment = true
        }
    }

    /// Where newly assigned partitions start: partitions this worker kept state for start where it left
    /// off; others start at their replay point (committed as metadata) and re-read up to the committed
    /// offset to rebuild state without writing outputs again.
    func startOffsets(_ tps: [TopicPartition]) -> [TopicPartition: Int64] {
        let slots = tps.compactMap { topics.slot($0) }
        var committed: [TopicPartition: CommittedOffset] = [:]
        // Only when the committed offsets are known to be missing: otherwise librdkafka reads them itself.
        var fresh: Int64?
        do {
            committed = try host.committedOffsets(tps)
            fresh = freshStart
        } catch {
            logger.error("could not read committed offsets of \(tps): \(error); starting from the group's committed offsets without state")
        }
        var starts: [TopicPartition: Int64] = [:]
        for s in slots {
            let tp = topics.topicPartition(s)
            let book = books[s.lane]
            let c = committed[tp]
            if book.takeRevokedPending(s.partition), let pos = book[s.partition].position {
                if c?.offset == pos { continue }  // given back after an eager rebalance: the state in memory is current
                // Given back, but what it delivered is not committed: the group refused the commits while it
                // rebalanced (a member that keeps missing the join makes round after round). Nobody committed
                // the partition meanwhile (the committed offset is still the one this worker last knew), so
                // the state in memory is still current: read on from the position; the refused commit is
                // still pending and goes out with the next. Dropping the state here restarted the partition
                // from its old commit (or the beginning) and wrote everything since again: 12-32% duplicates
                // on `events.enriched` in two-worker runs on a busy machine (bench/README.md, session 8).
                if c?.offset == book[s.partition].lastCommitted, (c?.offset ?? 0) <= pos {
                    logger.info("\(tp): given back with offsets up to \(pos) delivered but not committed (committed: \(c.map { "\($0.offset)" } ?? "none"), as before): reading on from \(pos) with the state in memory")
                    starts[tp] = pos
                    continue
                }
            }
            drop([s])
            book[s.partition].lastCommitted = c?.offset
            guard let c else {
                // The internal partitions at the logical beginning: librdkafka looks that up first (a round trip),
                // so the raw partitions are fetchable first and the first fetch brings records (`freshStart`).
                if let fresh { starts[tp] = s.lane == .partials && fresh == 0 ? KafkaConsumer.beginning : fresh }
                continue
            }
            book[s.partition].position = c.offset
            book[s.partition].committedFloor = c.offset
            guard let point = ReplayPoint(metadata: c.metadata) else {
                if sourceKeepsState || s.lane == .partials {
                    logger.warning("\(tp): committed offset \(c.offset) has no replay point ('\(c.metadata)'): state starts empty there")
                }
                continue
            }
            host.restore(s, from: point)
            if s.lane == .source && point.finished && mergesWindows { book[s.partition].finishedBefore = c.offset }
            guard point.offset < c.offset else { continue }
            book[s.partition].position = point.offset
            book[s.partition].replayUntil = c.offset
            book[s.partition].replayStart = (ContinuousClock.now, point.offset)
            starts[tp] = point.offset
            logger.info("\(tp): re-reading from offset \(point.offset) to rebuild state up to the committed offset \(c.offset)")
        }
        // Partitions an eager rebalance took and did not give back.
        for lane in Lane.allCases {
            drop(books[lane].takeAllRevokedPending().map { Slot(lane: lane, partition: $0) })
        }
        return starts
    }

    /// Forgets everything kept for the partitions: the stages' state and the books' reading state.
    func drop(_ slots: [Slot]) {
        for lane in Lane.allCases {
            let partitions = slots.filter { $0.lane == lane }.map(\.partition)
            guard !partitions.isEmpty else { continue }
            host.forgetState(lane, partitions)
            books[lane].drop(partitions)
        }
    }
}
