import Logging
import MaidianKafka
import MaidianPipeline
@testable import MaidianRuntime
import XCTest

/// `ReplayPlan` on the mock cluster: what a restart commits for the group's internal partitions.
final class ReplayPlanTests: XCTestCase {
    /// A restart starts the merge of windowed counts over: the internal partitions are committed at their end
    /// with a replay point that says nothing was written. Left alone, a merger would re-read the earlier run's
    /// partials and final progress ("the end"), after which it takes nothing: the restarted replay's windowed
    /// counts would all be left out. (The mock takes offsets only for a group it has never seen, so the
    /// internal topic here holds another run's messages under a fresh group name.)
    func testARestartStartsTheMergeOverAtTheEndOfTheInternalTopic() throws {
        var logger = Logger(label: "replay-plan-tests")
        logger.logLevel = .critical
        let broker = try EmbeddedBroker(brokers: 1, logger: logger)
        try broker.createTopic("events.raw", partitions: 2)
        let internalTopic = "replay-plan-test.partials"
        try broker.createTopic(internalTopic, partitions: 2)
        let producer = try KafkaProducer(config: ["bootstrap.servers": broker.bootstrapServers], logger: logger)
        for i in 0..<10 {
            try producer.produce(topicName: "events.raw", partition: Int32(i % 2), key: [], value: Array("[]".utf8), headers: [],
                                 timestamp: 1_763_700_000_000 + Int64(i), token: UInt64(i + 1))
        }
        for i in 0..<7 {
            try producer.produce(topicName: internalTopic, partition: Int32(i % 2), key: [], value: [1, 2], headers: [],
                                 timestamp: 1_763_700_000_000, token: UInt64(100 + i))
        }
        try producer.flush(timeout: .seconds(20))

        let group = "replay-plan-test-\(UInt32.random(in: 0 ... .max))"
        let plan = try ReplayPlan.make(bootstrap: broker.bootstrapServers, topic: "events.raw", group: group, from: 0, to: nil,
                                       restart: true, internalTopic: internalTopic, logger: logger)
        XCTAssertEqual(plan.records, 10)

        let reader = try KafkaConsumer(config: ["bootstrap.servers": broker.bootstrapServers, "group.id": group], logger: logger)
        defer { try? reader.close() }
        let tps = (0..<Int32(2)).map { TopicPartition(topic: internalTopic, partition: $0) }
        let committed = try reader.committedWithMetadata(tps, timeout: .seconds(10))
        for (tp, end) in zip(tps, [Int64(4), 3]) {
            XCTAssertEqual(committed[tp]?.offset, end, "\(tp): at its end")
            let point = committed[tp].flatMap { ReplayPoint(metadata: $0.metadata) }
            XCTAssertEqual(point, ReplayPoint(offset: end, maxEventTime: nil), "\(tp): nothing re-read, nothing written yet")
        }
    }

    /// Without a restart the internal partitions are left to the group: an interrupted replay resumes its merge.
    func testWithoutARestartTheInternalTopicIsLeftAlone() throws {
        var logger = Logger(label: "replay-plan-tests")
        logger.logLevel = .critical
        let broker = try EmbeddedBroker(brokers: 1, logger: logger)
        try broker.createTopic("events.raw", partitions: 1)
        try broker.createTopic("g.partials", partitions: 1)
        let group = "replay-plan-test-\(UInt32.random(in: 0 ... .max))"
        _ = try ReplayPlan.make(bootstrap: broker.bootstrapServers, topic: "events.raw", group: group, from: 0, to: nil,
                                internalTopic: "g.partials", logger: logger)
        let reader = try KafkaConsumer(config: ["bootstrap.servers": broker.bootstrapServers, "group.id": group], logger: logger)
        defer { try? reader.close() }
        XCTAssertEqual(try reader.committed([TopicPartition(topic: "g.partials", partition: 0)], timeout: .seconds(10)), [:])
    }
}
