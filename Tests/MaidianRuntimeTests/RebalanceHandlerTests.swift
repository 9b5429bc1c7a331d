import Logging
import MaidianKafka
import MaidianPipeline
import XCTest

@testable import MaidianRuntime

/// The rebalance handler: state kept over an eager rebalance that gives a partition back, dropped for one
/// that it does not, and rebuilt from the replay point of a newly assigned partition.
final class RebalanceHandlerTests: XCTestCase {
    let topics = LaneTopics(source: "events.raw", partials: "app.partials")
    let logger = Logger(label: "rebalance-tests") { _ in SwiftLogNoOpLogHandler() }

    final class Host: RebalanceHost {
        var committed: [TopicPartition: CommittedOffset] = [:]
        var drainError: (any Error)?
        var drains = 0
        var forgotten: [String] = []
        var restored: [Slot: ReplayPoint] = [:]
        var changes: [Bool] = []
        var sent: [[TopicPartition: CommittedOffset]] = []
        /// Commits fail with this (a rebalancing group's refusal), when set.
        var refuse: KafkaError?
        func drain() throws {
            drains += 1
            if let drainError { throw drainError }
        }
        /// Reading the committed offsets fails with this, when set.
        var readError: (any Error)?
        func committedOffsets(_ tps: [TopicPartition]) throws -> [TopicPartition: CommittedOffset] {
            if let readError { throw readError }
            return committed
        }
        func forgetState(_ lane: Lane, _ partitions: [Int32]) { forgotten.append("\(lane):\(partitions.sorted())") }
        func restore(_ s: Slot, from point: ReplayPoint) { restored[s] = point }
        func assignmentChanged(assigned: Bool) { changes.append(assigned) }
    }

    struct Parts {
        let host: Host
        let books: PartitionBooks
        let handler: RebalanceHandler
    }

    func parts() -> Parts {
        let host = Host()
        let books = PartitionBooks()
        let committer = Committer(
            topics: topics, books: books,
            target: .init(
                commit: { [unowned host] in
                    if let refuse = host.refuse { throw refuse }
                    host.sent.append($0)
                }, isFatal: { false },
                sourcePoint: { _, next in ReplayPoint(offset: next, maxEventTime: nil) }, sourceKeepsState: true),
            logger: logger)
        let handler = RebalanceHandler(topics: topics, books: books, committer: committer, sourceKeepsState: true, host: host, logger: logger)
        return Parts(host: host, books: books, handler: handler)
    }

    func raw(_ p: Int32) -> TopicPartition { TopicPartition(topic: "events.raw", partition: p) }
    func merged(_ p: Int32) -> TopicPartition { TopicPartition(topic: "app.partials", partition: p) }

    func testEagerRebalanceKeepsTheStateOfAPartitionGivenBackAndDropsTheOthers() {
        let t = parts()
        let h = t.handler
        h.handle(.assigned([raw(0), raw(1), merged(0)]))
        XCTAssertTrue(h.hadAssignment)
        XCTAssertEqual(h.heldSource, [0, 1])
        for (lane, p) in [(Lane.source, Int32(0)), (.source, 1), (.partials, 0)] {
            t.books[lane][p].position = 20
            t.books[lane][p].committedFloor = 20
        }
        h.handle(.revoked([raw(0), raw(1), merged(0)]))
        XCTAssertEqual(t.host.drains, 1, "outputs are delivered before the partitions go")
        XCTAssertTrue(h.awaitingAssignment)
        XCTAssertEqual(h.heldSource, [])
        // Partition 0 comes back, its committed offset where this worker stopped reading.
        t.host.committed = [raw(0): CommittedOffset(offset: 20, metadata: ReplayPoint(offset: 15, maxEventTime: 1).metadata)]
        h.handle(.assigned([raw(0)]))
        XCTAssertFalse(h.awaitingAssignment)
        XCTAssertEqual(h.startOffsets([raw(0)]), [:], "read on from the position in memory")
        XCTAssertEqual(t.books.source[0].position, 20)
        XCTAssertEqual(t.books.source[0].committedFloor, 20)
        XCTAssertNil(t.host.restored[Slot(lane: .source, partition: 0)])
        XCTAssertEqual(t.host.forgotten, ["source:[1]", "partials:[0]"])
        XCTAssertNil(t.books.source[1].position)
        XCTAssertNil(t.books.partials[0].position)
        XCTAssertEqual(t.books.source.revokedPending, [])
        XCTAssertEqual(t.host.changes, [true, false, true])
    }

    /// A group that keeps rebalancing refuses every commit: a partition given back with its delivered offsets
    /// uncommitted keeps its state and is read on from its position, as long as nobody committed it meanwhile;
    /// one that another member committed meanwhile is rebuilt from that commit.
    func testAPartitionGivenBackWithItsCommitRefusedKeepsItsStateUnlessAnotherMemberCommittedIt() {
        let t = parts()
        let h = t.handler
        let point = ReplayPoint(offset: 5, maxEventTime: 1).metadata
        t.host.committed = [raw(0): CommittedOffset(offset: 10, metadata: point), raw(1): CommittedOffset(offset: 10, metadata: point)]
        h.handle(.assigned([raw(0), raw(1), raw(2)]))
        XCTAssertEqual(h.startOffsets([raw(0), raw(1), raw(2)]), [raw(0): 5, raw(1): 5])
        for p: Int32 in [0, 1, 2] {
            t.books.source[p].position = 30
            t.books.source[p].replayUntil = nil
        }
        t.host.refuse = KafkaError(.commit, "rebalancing", rdkafkaCode: 27)  // REBALANCE_IN_PROGRESS
        t.handler.committer.store([Slot(lane: .source, partition: 0): 30, Slot(lane: .source, partition: 1): 30, Slot(lane: .source, partition: 2): 30])
        h.handle(.revoked([raw(0), raw(1), raw(2)]))
        XCTAssertEqual(t.host.sent.count, 0, "refused")
        // Given back: partition 0 still committed at 10 and 2 still at none (as this worker last knew them),
        // partition 1 committed at 20 by another member meanwhile.
        t.host.committed = [raw(0): CommittedOffset(offset: 10, metadata: point), raw(1): CommittedOffset(offset: 20, metadata: ReplayPoint(offset: 12, maxEventTime: 1).metadata)]
        h.handle(.assigned([raw(0), raw(1), raw(2)]))
        XCTAssertEqual(h.startOffsets([raw(0), raw(1), raw(2)]), [raw(0): 30, raw(2): 30, raw(1): 12])
        XCTAssertEqual(t.books.source[0].position, 30)
        XCTAssertEqual(t.books.source[2].position, 30)
        XCTAssertNil(t.books.source[0].replayUntil, "nothing re-read: the state in memory is current")
        XCTAssertEqual(t.books.source[1].replayUntil, 20)
        XCTAssertEqual(t.host.forgotten, ["source:[0]", "source:[1]", "source:[2]", "source:[1]"], "the first assignment, then only 1")
        // The refused commits are still pending and go out once the group takes commits again.
        t.host.refuse = nil
        t.handler.committer.commit(final: true)
        XCTAssertEqual(t.host.sent.last?[raw(0)]?.offset, 30)
        XCTAssertEqual(t.host.sent.last?[raw(2)]?.offset, 30)
    }

    /// Partitions the group never committed start where the consumer's `auto.offset.reset` says, explicitly
    /// (librdkafka would first wait out an offset-query backoff); when the committed offsets could not be read,
    /// librdkafka is left to read them.
    func testPartitionsWithoutACommitStartAtTheResetOffsetOnlyWhenTheCommitsAreKnown() {
        let t = parts()
        let h = t.handler
        h.freshStart = KafkaConsumer.beginning
        t.host.committed = [raw(3): CommittedOffset(offset: 100, metadata: ReplayPoint(offset: 100, maxEventTime: 1).metadata)]
        h.handle(.assigned([raw(3), raw(4), merged(0)]))
        XCTAssertEqual(h.startOffsets([raw(3), raw(4), merged(0)]), [raw(4): KafkaConsumer.beginning, merged(0): KafkaConsumer.beginning])
        XCTAssertEqual(t.books.source[3].position, 100, "committed: read on from the commit, as before")
        XCTAssertNil(t.books.source[4].position)

        let u = parts()
        u.handler.freshStart = KafkaConsumer.end
        u.host.readError = KafkaError(.timedOut, "offset fetch")
        u.handler.handle(.assigned([raw(4)]))
        XCTAssertEqual(u.handler.startOffsets([raw(4)]), [:], "unknown commits: librdkafka reads them")
        u.host.readError = nil
        u.handler.handle(.revoked([raw(4)]))
        u.handler.handle(.assigned([raw(5)]))
        XCTAssertEqual(u.handler.startOffsets([raw(5)]), [raw(5): KafkaConsumer.end])
    }

    /// The beginning is offset 0, said as an offset: a logical offset is looked up first, and meanwhile a fetch of
    /// the partitions already started (a new group's empty internal ones) waits out `fetch.wait.max.ms`.
    func testTheBeginningIsOffsetZeroAndTheEndStaysLogical() {
        for name in ["earliest", "smallest", "beginning", "EARLIEST"] {
            XCTAssertEqual(RebalanceHandler.freshStart(autoOffsetReset: name), 0, name)
        }
        for name in ["latest", "largest", "end"] {
            XCTAssertEqual(RebalanceHandler.freshStart(autoOffsetReset: name), KafkaConsumer.end, name)
        }
        XCTAssertNil(RebalanceHandler.freshStart(autoOffsetReset: "error"), "librdkafka reports the missing offset")
        XCTAssertNil(RebalanceHandler.freshStart(autoOffsetReset: nil))

        // The internal partitions keep the logical beginning: looked up first, they become fetchable after the raw
        // ones, so the first fetch holds the raw partitions (with records) and is answered at once.
        let t = parts()
        t.handler.freshStart = 0
        t.handler.handle(.assigned([raw(4), merged(0)]))
        XCTAssertEqual(t.handler.startOffsets([raw(4), merged(0)]), [raw(4): 0, merged(0): KafkaConsumer.beginning])
    }

    func testAPartitionFromAnotherWorkerRereadsFromItsReplayPoint() {
        let t = parts()
        let h = t.handler
        let point = ReplayPoint(offset: 70, maxEventTime: 1_763_700_000_000)
        t.host.committed = [
            raw(3): CommittedOffset(offset: 100, metadata: point.metadata),
            merged(1): CommittedOffset(offset: 8, metadata: "no point"),
        ]
        h.handle(.assigned([raw(3), merged(1), raw(4)]))
        XCTAssertEqual(h.startOffsets([raw(3), merged(1), raw(4)]), [raw(3): 70])
        let s = t.books.source[3]
        XCTAssertEqual(s.position, 70)
        XCTAssertEqual(s.replayUntil, 100, "outputs up to the committed offset were delivered before: not again")
        XCTAssertEqual(s.replayStart?.from, 70)
        XCTAssertEqual(s.committedFloor, 100)
        XCTAssertEqual(t.host.restored, [Slot(lane: .source, partition: 3): point])
        XCTAssertEqual(t.books.partials[1].position, 8, "no replay point: read on from the committed offset, state empty")
        XCTAssertNil(t.books.partials[1].replayUntil)
        XCTAssertNil(t.books.source[4].position, "nothing committed: the consumer's reset policy decides")
    }

    func testLostPartitionsAreForgottenWithoutCommit() {
        let t = parts()
        let h = t.handler
        h.handle(.assigned([raw(0), raw(1)]))
        t.books.source[0].position = 5
        h.committer.store([Slot(lane: .source, partition: 0): 5, Slot(lane: .source, partition: 1): 9])
        h.handle(.lost([raw(0)]))
        XCTAssertEqual(h.committer.uncommitted, [Slot(lane: .source, partition: 1): 9])
        XCTAssertNil(t.books.source[0].position)
        XCTAssertEqual(t.books.source.revokedPending, [], "lost, not revoked: nothing waits for its return")
        XCTAssertEqual(t.host.forgotten, ["source:[0]"])
        XCTAssertEqual(h.heldSource, [1])
        XCTAssertTrue(h.awaitingAssignment)
        XCTAssertTrue(t.host.sent.isEmpty)
    }

    func testAFailedDeliveryOnRevocationIsKeptForTheLoop() {
        let t = parts()
        let h = t.handler
        h.handle(.assigned([raw(0)]))
        t.host.drainError = RuntimeError(.delivery, "undeliverable")
        h.handle(.revoked([raw(0)]))
        XCTAssertEqual(h.failure?.code, .delivery)
        XCTAssertEqual(t.books.source.revokedPending, [0])
    }
}
