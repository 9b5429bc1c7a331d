import Logging
import MaidianKafka
import XCTest

@testable import MaidianRuntime

/// The librdkafka gap guard: repeats are dropped, a gap is sought back once, and accepted when seen again.
final class GapGuardTests: XCTestCase {
    let topics = LaneTopics(source: "events.raw", partials: "app.partials")
    let logger = Logger(label: "gap-guard-tests") { _ in SwiftLogNoOpLogHandler() }
    let s0 = Slot(lane: .source, partition: 0)
    let s1 = Slot(lane: .source, partition: 1)
    let q0 = Slot(lane: .partials, partition: 0)

    func testRepeatsAreDroppedAndAPartitionWithoutPositionStartsAnywhere() {
        let books = PartitionBooks()
        books.source[0].position = 10
        var gaps = GapGuard(books: books, topics: topics, logger: logger)
        XCTAssertEqual([8, 9, 10, 11].map { gaps.keep(s0, offset: $0) }, [false, false, true, true])
        XCTAssertEqual([500, 501].map { gaps.keep(s1, offset: $0) }, [true, true], "no position: reading starts where it starts")
        XCTAssertEqual(gaps.seeks, [:])
    }

    func testAGapIsSoughtBackOnceThenAccepted() {
        let books = PartitionBooks()
        books.source[0].position = 10
        books.partials[0].position = 4
        var gaps = GapGuard(books: books, topics: topics, logger: logger)
        XCTAssertTrue(gaps.keep(s0, offset: 10))
        XCTAssertFalse(gaps.keep(s0, offset: 13), "11 and 12 missing")
        XCTAssertFalse(gaps.keep(s0, offset: 14), "the rest of the partition waits for the seek")
        XCTAssertTrue(gaps.keep(q0, offset: 4), "another lane's partition 0 is not affected")
        XCTAssertEqual(gaps.seeks, [TopicPartition(topic: "events.raw", partition: 0): 11])
        XCTAssertEqual(books.source[0].acceptedGap?.from, 11)
        XCTAssertEqual(books.source[0].acceptedGap?.to, 13)

        // The worker moved the position over 10 only; after the seek the same gap comes again: real.
        books.source[0].position = 11
        var again = GapGuard(books: books, topics: topics, logger: logger)
        XCTAssertTrue(again.keep(s0, offset: 13))
        XCTAssertEqual(again.seeks, [:])
        XCTAssertNil(books.source[0].acceptedGap, "passed: forgotten")
        XCTAssertTrue(again.keep(s0, offset: 14))
    }

    func testADifferentGapAfterASeekIsSoughtAgain() {
        let books = PartitionBooks()
        books.source[0].position = 10
        var gaps = GapGuard(books: books, topics: topics, logger: logger)
        XCTAssertFalse(gaps.keep(s0, offset: 12))
        var again = GapGuard(books: books, topics: topics, logger: logger)
        XCTAssertFalse(again.keep(s0, offset: 15))
        XCTAssertEqual(again.seeks, [TopicPartition(topic: "events.raw", partition: 0): 10])
        XCTAssertEqual(books.source[0].acceptedGap?.to, 15)
    }
}
