import Foundation
import XCTest

@testable import MaidianKafka

final class KafkaConsumerTests: XCTestCase {
    private let baseTimestamp: Int64 = 1_732_183_200_000

    /// Produces `count` messages (key `user-i%50`, value `v-i`, headers `ip` and `seq`, timestamp base+i).
    private func produceTestData(_ broker: EmbeddedBroker, topic: String, count: Int) throws {
        let producer = try KafkaProducer(config: KafkaTestSupport.producerConfig(broker), logger: KafkaTestSupport.logger("data"))
        var failures = 0
        var reports = 0
        producer.onDelivery = { _, error in
            reports += 1
            if error != nil { failures += 1 }
        }
        for i in 0..<count {
            try producer.produce(
                topicName: topic,
                key: Array("user-\(i % 50)".utf8),
                value: Array("v-\(i)".utf8),
                headers: [("ip", Array("10.0.0.\(i % 256)".utf8)), ("seq", Array("\(i)".utf8))],
                timestamp: baseTimestamp + Int64(i),
                token: UInt64(i)
            )
        }
        try producer.flush(timeout: .seconds(20))
        XCTAssertEqual(reports, count)
        XCTAssertEqual(failures, 0)
    }

    func testGroupConsumesAllCommitsAndTheNextMemberResumesFromTheCommit() throws {
        let logger = KafkaTestSupport.logger("consumer-test")
        let broker = try EmbeddedBroker(logger: logger)
        let topic = KafkaTestSupport.uniqueName("raw")
        let group = KafkaTestSupport.uniqueName("group")
        try broker.createTopic(topic, partitions: 4)
        try produceTestData(broker, topic: topic, count: 1000)
        let all = (0..<4).map { TopicPartition(topic: topic, partition: Int32($0)) }

        let consumer = try KafkaConsumer(config: KafkaTestSupport.groupConfig(broker, group: group), logger: logger)
        var events: [RebalanceEvent] = []
        var eofs: [TopicPartition: Int64] = [:]
        var next: [TopicPartition: Int64] = [:]
        var seen = Set<Int>()
        var problems: [String] = []
        consumer.onRebalance = { events.append($0) }
        consumer.onPartitionEOF = { eofs[$0] = $1 }
        let seqHeader = KafkaHeaderName("seq"), ipPrefixHeader = KafkaHeaderName("i")
        try consumer.subscribe([topic])
        let finished = try KafkaTestSupport.poll(consumer, for: .seconds(30), until: { seen.count == 1000 && eofs.count == 4 }) { message in
            if events.isEmpty { problems.append("message before any rebalance event") }
            let value = message.value.string
            guard value.hasPrefix("v-"), let i = Int(value.dropFirst(2)) else {
                problems.append("bad value \(value)")
                return
            }
            if message.key.string != "user-\(i % 50)" { problems.append("bad key for \(i): \(message.key.string)") }
            if message.header("ip")?.string != "10.0.0.\(i % 256)" { problems.append("bad ip header for \(i)") }
            if message.header("seq")?.string != "\(i)" { problems.append("bad seq header for \(i)") }
            if message.header("missing") != nil { problems.append("phantom header for \(i)") }
            if message.header(seqHeader)?.string != "\(i)" { problems.append("bad seq header (prepared name) for \(i)") }
            if message.header(ipPrefixHeader) != nil { problems.append("a prefix of a name found a header for \(i)") }
            var names: [String] = []
            message.forEachHeader { name, _ in names.append(name) }
            if names != ["ip", "seq"] { problems.append("headers of \(i): \(names)") }
            if message.timestamp != baseTimestamp + Int64(i) { problems.append("timestamp of \(i): \(String(describing: message.timestamp))") }
            if message.topic != topic { problems.append("topic \(message.topic)") }
            if !seen.insert(i).inserted { problems.append("duplicate \(i)") }
            let tp = message.topicPartition
            if let previous = next[tp], previous != message.offset { problems.append("gap on \(tp) at \(message.offset)") }
            next[tp] = message.offset + 1
        }
        XCTAssertTrue(finished, "consumed \(seen.count)/1000, EOFs \(eofs.count)/4")
        XCTAssertEqual(problems, [])
        XCTAssertEqual(events.first, .assigned(all))
        XCTAssertEqual(Set(try consumer.assignment()), Set(all))

        // EOF offsets and high watermarks both equal the next offset to read.
        XCTAssertEqual(eofs, next)
        var total: Int64 = 0
        for tp in all {
            let marks = try consumer.watermarks(tp, timeout: .seconds(5))
            XCTAssertEqual(marks.low, 0)
            XCTAssertEqual(marks.high, next[tp])
            total += marks.high
        }
        XCTAssertEqual(total, 1000)

        let (firstTP, firstNext) = try XCTUnwrap(next.first)
        XCTAssertTrue(try consumer.storeOffset(firstTP, next: firstNext))
        var rest = next
        rest[firstTP] = nil
        rest[TopicPartition(topic: topic, partition: 42)] = 5
        XCTAssertEqual(try consumer.storeOffsets(rest), [TopicPartition(topic: topic, partition: 42)])
        XCTAssertFalse(try consumer.storeOffset(TopicPartition(topic: topic, partition: 99), next: 1), "not assigned")
        try consumer.commitSync()
        try consumer.commitSync()  // nothing new stored: not an error
        XCTAssertEqual(try consumer.committed(all, timeout: .seconds(5)), next)
        try consumer.close()
        try consumer.close()  // idempotent
        XCTAssertEqual(events.last, .revoked(all))
        XCTAssertThrowsError(try consumer.poll(maxMessages: 1, timeout: .zero) { _ in }) { error in
            XCTAssertEqual((error as? KafkaError)?.code, .state)
        }

        // A new member of the same group starts at the committed offsets: nothing to consume.
        let second = try KafkaConsumer(config: KafkaTestSupport.groupConfig(broker, group: group), logger: logger)
        var secondEOFs: [TopicPartition: Int64] = [:]
        var secondCount = 0
        second.onPartitionEOF = { secondEOFs[$0] = $1 }
        try second.subscribe([topic])
        let resumed = try KafkaTestSupport.poll(second, for: .seconds(60), until: { secondEOFs.count == 4 }) { _ in
            secondCount += 1
        }
        XCTAssertTrue(resumed)
        XCTAssertEqual(secondCount, 0)
        XCTAssertEqual(secondEOFs, next)
        try second.close()
    }

    /// Starts a second member once the first owns every partition; returns both members' events.
    private func splitBetweenTwoMembers(strategy: String?) throws -> (first: [RebalanceEvent], second: [RebalanceEvent]) {
        let logger = KafkaTestSupport.logger("group-split-test")
        let broker = try EmbeddedBroker(logger: logger)
        let topic = KafkaTestSupport.uniqueName("split")
        let group = KafkaTestSupport.uniqueName("group")
        try broker.createTopic(topic, partitions: 4)
        try produceTestData(broker, topic: topic, count: 40)
        let all = Set((0..<4).map { TopicPartition(topic: topic, partition: Int32($0)) })
        let extra = strategy.map { ["partition.assignment.strategy": $0] } ?? [:]

        let first = try KafkaConsumer(config: KafkaTestSupport.groupConfig(broker, group: group, extra: extra), logger: logger)
        let second = try KafkaConsumer(config: KafkaTestSupport.groupConfig(broker, group: group, extra: extra), logger: logger)
        var firstEvents: [RebalanceEvent] = []
        var secondEvents: [RebalanceEvent] = []
        var values = Set<String>()
        var assignmentAtEvents: [String] = []
        first.onRebalance = { event in
            firstEvents.append(event)
            // The handler runs before the change is applied.
            assignmentAtEvents.append("\(event): \((try? first.assignment().count) ?? -1)")
        }
        second.onRebalance = { secondEvents.append($0) }
        try first.subscribe([topic])
        let owned = try KafkaTestSupport.poll(first, for: .seconds(60), until: { values.count == 40 }) { values.insert($0.value.string) }
        XCTAssertTrue(owned)
        XCTAssertEqual(Set(try first.assignment()), all)

        // Both members poll from this one thread, in turns.
        try second.subscribe([topic])
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(40)
        var split = false
        while clock.now < deadline, !split {
            for consumer in [first, second] {
                _ = try consumer.poll(maxMessages: 100, timeout: .milliseconds(50)) { values.insert($0.value.string) }
            }
            let a = Set(try first.assignment())
            let b = Set(try second.assignment())
            split = !a.isEmpty && !b.isEmpty && a.isDisjoint(with: b) && a.union(b) == all
        }
        XCTAssertTrue(split, "first \(firstEvents), second \(secondEvents)")
        XCTAssertEqual(try first.assignment().count, 2)
        XCTAssertEqual(try second.assignment().count, 2)
        XCTAssertEqual(values.count, 40)
        XCTAssertTrue(assignmentAtEvents.first?.hasSuffix(": 0") ?? false, "\(assignmentAtEvents)")
        KafkaTestSupport.closeTogether([first, second])
        return (firstEvents, secondEvents)
    }

    func testTwoMembersSplitThePartitions() throws {
        let (first, second) = try splitBetweenTwoMembers(strategy: nil)
        // Eager: the first member gives everything back, then gets its half (a slow machine may add
        // rounds of revoke/assign; the close adds a last revoke).
        guard first.count >= 4, case .assigned(let initial) = first[0], case .revoked(let revoked) = first[1],
              case .assigned(let half) = first[first.count - 2], case .revoked = first[first.count - 1] else {
            return XCTFail("\(first)")
        }
        XCTAssertEqual(initial.count, 4)
        XCTAssertEqual(Set(revoked), Set(initial))
        XCTAssertEqual(half.count, 2)
        let secondAssigned = second.compactMap { if case .assigned(let tps) = $0 { tps } else { nil } }
        XCTAssertEqual(Set(half).union(secondAssigned.last ?? []).count, 4)
    }

    func testCooperativeStickyMovesOnlyTheRevokedPartitions() throws {
        let (first, second) = try splitBetweenTwoMembers(strategy: "cooperative-sticky")
        // Cooperative: the first member keeps two partitions and revokes only the other two.
        guard first.count >= 2, case .assigned(let initial) = first[0], case .revoked(let revoked) = first[1] else {
            return XCTFail("\(first)")
        }
        XCTAssertEqual(initial.count, 4)
        XCTAssertEqual(revoked.count, 2)
        let moved = second.compactMap { if case .assigned(let tps) = $0 { tps } else { nil } }.flatMap { $0 }
        XCTAssertTrue(Set(revoked).isSubset(of: Set(moved)), "revoked \(revoked), second got \(moved)")
        XCTAssertFalse(first.contains { if case .lost = $0 { true } else { false } }, "\(first)")
    }

    func testWatermarksReportTheProducedCountPerPartition() throws {
        let logger = KafkaTestSupport.logger("watermarks-test")
        let broker = try EmbeddedBroker(logger: logger)
        let topic = KafkaTestSupport.uniqueName("marks")
        try broker.createTopic(topic, partitions: 3)
        let producer = try KafkaProducer(config: KafkaTestSupport.producerConfig(broker), logger: logger)
        let counts: [Int32: Int] = [0: 7, 1: 0, 2: 13]
        var token: UInt64 = 0
        for (partition, count) in counts {
            for _ in 0..<count {
                try producer.produce(topicName: topic, partition: partition, key: [], value: [], token: token)
                token += 1
            }
        }
        try producer.flush(timeout: .seconds(10))

        let consumer = try KafkaConsumer(config: KafkaTestSupport.standaloneConfig(broker), logger: logger)
        for (partition, count) in counts {
            let marks = try consumer.watermarks(TopicPartition(topic: topic, partition: partition), timeout: .seconds(5))
            XCTAssertEqual(marks.low, 0)
            XCTAssertEqual(marks.high, Int64(count), "partition \(partition)")
        }

        // Manual assignment reads them back; empty values stay empty (not tombstones).
        try consumer.assign([TopicPartition(topic: topic, partition: 2): KafkaConsumer.beginning])
        var read = 0
        var eof = false
        consumer.onPartitionEOF = { _, offset in eof = offset == 13 }
        try KafkaTestSupport.poll(consumer, for: .seconds(10), until: { eof }) { message in
            XCTAssertEqual(message.value.count, 0)
            XCTAssertEqual(message.key.count, 0)
            read += 1
        }
        XCTAssertEqual(read, 13)
        try consumer.close()
    }

    /// A poll hands out what arrived without waiting for a full batch: librdkafka's batch call alone waits out
    /// the whole timeout unless `maxMessages` arrive, which held the last records of a bounded run back.
    func testPollReturnsWhatArrivedWithoutWaitingOutTheTimeoutForAFullBatch() throws {
        let logger = KafkaTestSupport.logger("poll-early-test")
        let broker = try EmbeddedBroker(logger: logger)
        let topic = KafkaTestSupport.uniqueName("few")
        try broker.createTopic(topic, partitions: 1)
        try produceTestData(broker, topic: topic, count: 10)
        let consumer = try KafkaConsumer(config: KafkaTestSupport.standaloneConfig(broker), logger: logger)
        try consumer.assign([TopicPartition(topic: topic, partition: 0): KafkaConsumer.beginning])
        var offsets: [Int64] = []
        var polls = 0
        let start = ContinuousClock.now
        while offsets.count < 10 && ContinuousClock.now - start < .seconds(40) {
            polls += 1
            _ = try consumer.poll(maxMessages: 250, timeout: .seconds(15)) { offsets.append($0.offset) }
        }
        let took = ContinuousClock.now - start
        XCTAssertEqual(offsets, (0..<10).map { Int64($0) })
        // Each poll returned once something had arrived: well before one poll's timeout.
        XCTAssertLessThan(took, .seconds(7), "\(polls) poll(s)")

        // With nothing to read, a poll still waits for its timeout (no busy loop) and returns nothing.
        let idleStart = ContinuousClock.now
        var more = 0
        while ContinuousClock.now - idleStart < .milliseconds(300) {
            more += try consumer.poll(maxMessages: 250, timeout: .milliseconds(300)) { _ in }
        }
        XCTAssertEqual(more, 0)
        try consumer.close()
    }

    func testReadsHeadersWrittenByKcat() throws {
        let kcat = URL(fileURLWithPath: "/usr/bin/kcat")
        guard FileManager.default.isExecutableFile(atPath: kcat.path) else {
            throw XCTSkip("kcat is not installed")
        }
        let logger = KafkaTestSupport.logger("kcat-test")
        let broker = try EmbeddedBroker(logger: logger)
        let topic = KafkaTestSupport.uniqueName("kcat")
        try broker.createTopic(topic, partitions: 1)

        let process = Process()
        process.executableURL = kcat
        process.arguments = ["-P", "-b", broker.bootstrapServers, "-t", topic, "-p", "0", "-K", ":",
                             "-H", "ip=1.2.3.4", "-H", "received_at=1763700011951", "-H", "ip=5.6.7.8"]
        let input = Pipe()
        process.standardInput = input
        try process.run()
        input.fileHandleForWriting.write(Data("anon-1:[{\"type\":\"track\"}]\nanon-2:second\n".utf8))
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)

        let consumer = try KafkaConsumer(config: KafkaTestSupport.standaloneConfig(broker), logger: logger)
        try consumer.assign([TopicPartition(topic: topic, partition: 0): KafkaConsumer.beginning])
        var messages: [(key: String, value: String, ip: String?, receivedAt: String?, headers: [String])] = []
        try KafkaTestSupport.poll(consumer, for: .seconds(10), until: { messages.count == 2 }) { message in
            var headers: [String] = []
            message.forEachHeader { headers.append("\($0)=\($1.string)") }
            messages.append((message.key.string, message.value.string, message.header("ip")?.string,
                             message.header("received_at")?.string, headers))
        }
        XCTAssertEqual(messages.map(\.key), ["anon-1", "anon-2"])
        XCTAssertEqual(messages.map(\.value), ["[{\"type\":\"track\"}]", "second"])
        XCTAssertEqual(messages.first?.ip, "1.2.3.4", "first header of that name")
        XCTAssertEqual(messages.first?.receivedAt, "1763700011951")
        XCTAssertEqual(messages.first?.headers, ["ip=1.2.3.4", "received_at=1763700011951", "ip=5.6.7.8"])
        try consumer.close()
    }

    func testFatalErrorIsThrownFromPoll() throws {
        let logger = KafkaTestSupport.logger("consumer-fatal-test")
        let broker = try EmbeddedBroker(logger: logger)
        let consumer = try KafkaConsumer(config: KafkaTestSupport.standaloneConfig(broker), logger: logger)
        XCTAssertNil(consumer.fatalError())
        consumer.triggerFatalErrorForTesting("test")
        XCTAssertThrowsError(try consumer.poll(maxMessages: 10, timeout: .milliseconds(100)) { _ in }) { error in
            XCTAssertEqual((error as? KafkaError)?.code, .fatal, "\(error)")
        }
        XCTAssertNotNil(consumer.fatalError())
    }
}
