import Logging
import MaidianKafka
import MaidianPipeline
import XCTest

@testable import MaidianRuntime

/// The committer's decisions: what is committed, with which replay point, what waits and what is given up.
final class CommitterTests: XCTestCase {
    let topics = LaneTopics(source: "events.raw", partials: "app.partials")
    let logger = Logger(label: "committer-tests") { _ in SwiftLogNoOpLogHandler() }

    /// A committer whose commits are recorded (or refused with `refuse`).
    final class Fixture {
        let books = PartitionBooks()
        var sent: [[TopicPartition: CommittedOffset]] = []
        var refuse: (any Error)?
        var fatal = false
        var sourcePoints: [Int32: ReplayPoint] = [:]
        var asked: [(Int32, Int64)] = []
        var committer: Committer!
    }

    func fixture(sourceKeepsState: Bool) -> Fixture {
        let f = Fixture()
        f.committer = Committer(
            topics: topics, books: f.books,
            target: .init(
                commit: { [unowned f] offsets in
                    if let e = f.refuse { throw e }
                    f.sent.append(offsets)
                },
                isFatal: { [unowned f] in f.fatal },
                sourcePoint: { [unowned f] p, next in
                    f.asked.append((p, next))
                    return f.sourcePoints[p]
                },
                sourceKeepsState: sourceKeepsState),
            logger: logger)
        return f
    }

    func tp(_ lane: Lane, _ p: Int32) -> TopicPartition { topics.topicPartition(Slot(lane: lane, partition: p)) }
    func src(_ p: Int32) -> Slot { Slot(lane: .source, partition: p) }
    func partials(_ p: Int32) -> Slot { Slot(lane: .partials, partition: p) }

    func testStoresOnlyHeldPartitionsAndNeverBackwards() {
        let f = fixture(sourceKeepsState: false)
        f.books.source.hold(0)
        f.books.source[0].committedFloor = 10  // where the partition started
        f.committer.store([src(0): 8, src(1): 5])
        XCTAssertEqual(f.committer.uncommitted, [:], "offset 8 is behind the committed 10; partition 1 is not held")
        f.committer.store([src(0): 12])
        XCTAssertEqual(f.committer.uncommitted, [src(0): 12])
        XCTAssertEqual(f.books.source[0].committedFloor, 12)
        f.committer.store([src(0): 12])
        XCTAssertEqual(f.committer.uncommitted, [src(0): 12])
    }

    func testStatelessSourceCommitsWithoutReplayPoint() {
        let f = fixture(sourceKeepsState: false)
        f.books.source.hold(0)
        f.committer.store([src(0): 42])
        XCTAssertTrue(f.committer.commit(final: false))
        XCTAssertEqual(f.sent, [[tp(.source, 0): CommittedOffset(offset: 42, metadata: "")]])
        XCTAssertTrue(f.asked.isEmpty, "no replay point is asked when no stage keeps state")
        XCTAssertEqual(f.committer.uncommitted, [:])
        XCTAssertTrue(f.committer.commit(final: false))
        XCTAssertEqual(f.sent.count, 1, "nothing new: nothing sent")
    }

    func testStatefulSourceCommitsItsReplayPointOrNothing() {
        let f = fixture(sourceKeepsState: true)
        f.books.source.hold(0)
        f.books.source.hold(1)
        let point = ReplayPoint(offset: 30, maxEventTime: 1_763_700_000_000)
        f.sourcePoints[0] = point
        f.committer.store([src(0): 42, src(1): 7])
        XCTAssertTrue(f.committer.commit(final: false), "partition 1 has no replay point: given up, not left pending")
        XCTAssertEqual(f.sent, [[tp(.source, 0): CommittedOffset(offset: 42, metadata: point.metadata)]])
        XCTAssertEqual(Set(f.asked.map { "\($0.0)@\($0.1)" }), ["0@42", "1@7"])
    }

    func testPartialsCommitTheMergerPointRecordedForThatOffset() {
        let f = fixture(sourceKeepsState: true)
        f.books.partials.hold(2)
        let older = ReplayPoint(offset: 5, maxEventTime: 1)
        let atTen = ReplayPoint(offset: 8, maxEventTime: 2)
        let later = ReplayPoint(offset: 9, maxEventTime: 3)
        f.books.partials[2].mergerPoints = [(next: 6, point: older), (next: 10, point: atTen), (next: 14, point: later)]
        f.committer.store([partials(2): 10])
        XCTAssertTrue(f.committer.commit(final: false))
        XCTAssertEqual(f.sent, [[tp(.partials, 2): CommittedOffset(offset: 10, metadata: atTen.metadata)]])
        XCTAssertEqual(f.books.partials[2].mergerPoints.map(\.next), [10, 14], "points of older offsets are let go")
        f.committer.store([partials(2): 12])
        XCTAssertTrue(f.committer.commit(final: false), "no point recorded for 12: given up")
        XCTAssertEqual(f.sent.filter { !$0.isEmpty }.count, 1, "offset 12 is not committed")
        XCTAssertEqual(f.committer.uncommitted, [:])
    }

    func testRefusedCommitsWaitAndFatalErrorsCommitNothing() {
        let f = fixture(sourceKeepsState: false)
        f.books.source.hold(0)
        f.committer.store([src(0): 3])
        f.refuse = KafkaError(.commit, "rebalancing", rdkafkaCode: 27)  // REBALANCE_IN_PROGRESS
        XCTAssertFalse(f.committer.commit(final: true))
        XCTAssertEqual(f.committer.uncommitted, [src(0): 3], "kept for after the next assignment")
        f.refuse = KafkaError(.brokerTransport, "down")
        XCTAssertFalse(f.committer.commit(final: false))
        XCTAssertEqual(f.committer.uncommitted, [src(0): 3])
        f.refuse = nil
        f.fatal = true
        XCTAssertFalse(f.committer.commit(final: false))
        XCTAssertTrue(f.sent.isEmpty)
        f.fatal = false
        XCTAssertTrue(f.committer.commit(final: false))
        XCTAssertEqual(f.sent, [[tp(.source, 0): CommittedOffset(offset: 3, metadata: "")]])
    }

    func testCommitWaitsForItsInterval() {
        let f = fixture(sourceKeepsState: false)
        XCTAssertFalse(f.committer.isDue)
        let quick = Committer(topics: topics, books: f.books, target: f.committer.target, interval: .zero, logger: logger)
        XCTAssertTrue(quick.isDue)
    }

    func testCommitsOfPartitionsThatMovedOnAreGivenUp() {
        let f = fixture(sourceKeepsState: false)
        for p: Int32 in [0, 1, 2] { f.books.source.hold(p) }
        f.committer.store([src(0): 1, src(1): 2, src(2): 3])
        f.books.source.release(1, pending: true)
        f.books.source.release(2, pending: true)
        f.committer.giveUpMoved(incoming: [src(2)])
        XCTAssertEqual(f.committer.uncommitted, [src(0): 1, src(2): 3], "held and incoming stay; 1 belongs to another member now")
        f.committer.forget(src(0))
        XCTAssertEqual(f.committer.uncommitted, [src(2): 3])
    }
}
