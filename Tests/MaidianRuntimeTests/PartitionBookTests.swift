import MaidianKafka
import MaidianPipeline
import XCTest

@testable import MaidianRuntime

/// A lane's book: dropping a partition forgets everything read from it in one call, membership apart.
final class PartitionBookTests: XCTestCase {
    func testDropForgetsEverythingReadFromThePartitionAndNothingElse() {
        let book = PartitionBook(lane: .partials)
        book.hold(3)
        book.hold(4)
        for p: Int32 in [3, 4] {
            book[p].position = 100
            book[p].replayUntil = 120
            book[p].replayStart = (ContinuousClock.now, 90)
            book[p].acceptedGap = (from: 100, to: 102)
            book[p].committedFloor = 120
            book[p].mergerPoints.append((next: 120, point: ReplayPoint(offset: 90, maxEventTime: 7)))
        }
        book.drop([3])
        XCTAssertNil(book[3].position)
        XCTAssertNil(book[3].replayUntil)
        XCTAssertNil(book[3].replayStart)
        XCTAssertNil(book[3].acceptedGap)
        XCTAssertNil(book[3].committedFloor)
        XCTAssertTrue(book[3].mergerPoints.isEmpty)
        XCTAssertEqual(book.partitionsWithState, [4])
        XCTAssertTrue(book.isHeld(3), "dropping state does not release the partition")
        XCTAssertEqual(book[4].position, 100, "another partition keeps its state")
        XCTAssertEqual(book[4].mergerPoints.count, 1)
    }

    func testRevokedPartitionsWaitForTheNextAssignment() {
        let book = PartitionBook(lane: .source)
        book.endOffsets = [0: 10, 1: 0]
        book.hold(0)
        book.hold(1)
        XCTAssertEqual(book.reachedEnd, [1], "an empty partition is at its end as soon as it is held")
        book.reachedEnd.insert(0)
        book.release(0, pending: true)
        book.release(1, pending: false)
        XCTAssertEqual(book.held, [])
        XCTAssertEqual(book.reachedEnd, [], "a released partition is no longer at its end for this worker")
        XCTAssertEqual(book.revokedPending, [0], "only a revoked (not lost) partition waits")
        XCTAssertTrue(book.takeRevokedPending(0))
        XCTAssertFalse(book.takeRevokedPending(0))
        book.release(2, pending: true)
        book.release(5, pending: true)
        XCTAssertEqual(book.takeAllRevokedPending(), [2, 5])
        XCTAssertEqual(book.revokedPending, [])
    }

    func testRebuildEndsWhereThePositionReachesTheCommittedOffset() {
        let book = PartitionBook(lane: .source)
        book[0].position = 50
        book[0].replayUntil = 60
        book[1].position = 60
        book[1].replayUntil = 60
        book[1].replayStart = (ContinuousClock.now, 40)
        let done = book.finishRebuilds()
        XCTAssertEqual(done.map(\.partition), [1])
        XCTAssertEqual(done.first?.until, 60)
        XCTAssertEqual(done.first?.start?.from, 40)
        XCTAssertNil(book[1].replayUntil)
        XCTAssertNil(book[1].replayStart)
        XCTAssertEqual(book[0].replayUntil, 60, "still re-reading")
        XCTAssertEqual(book[1].position, 60)
    }

    func testLaneTopicsMapBothWays() {
        let topics = LaneTopics(source: "events.raw", partials: "app.partials")
        let s = Slot(lane: .partials, partition: 7)
        XCTAssertEqual(topics.topicPartition(s), TopicPartition(topic: "app.partials", partition: 7))
        XCTAssertEqual(topics.slot(TopicPartition(topic: "events.raw", partition: 2)), Slot(lane: .source, partition: 2))
        XCTAssertEqual(topics.slot(TopicPartition(topic: "app.partials", partition: 7)), s)
        XCTAssertNil(topics.slot(TopicPartition(topic: "other", partition: 0)))
        XCTAssertNil(LaneTopics(source: "events.raw", partials: nil).slot(TopicPartition(topic: "app.partials", partition: 0)))
    }
}
