import Foundation
import XCTest

@testable import MaidianKafka

/// librdkafka's statistics (consumer lag) and offsets by time, on the mock cluster.
final class KafkaStatisticsTests: XCTestCase {
    private let t0: Int64 = 1_763_700_000_000

    /// Produces `timestamps.count` records into one partition, record `i` with timestamp `timestamps[i]`.
    private func produce(_ broker: EmbeddedBroker, topic: String, partition: Int32, timestamps: [Int64]) throws {
        // One record per batch: a fetch of a few bytes then returns one record (probes read single records).
        let producer = try KafkaProducer(
            config: KafkaTestSupport.producerConfig(broker, extra: ["batch.num.messages": "1"]), logger: KafkaTestSupport.logger("data"))
        var failures = 0
        producer.onDelivery = { _, error in if error != nil { failures += 1 } }
        for (i, ts) in timestamps.enumerated() {
            try producer.produce(topicName: topic, partition: partition, key: Array("k\(i)".utf8), value: Array("v\(i)".utf8),
                                 timestamp: ts, token: UInt64(i + 1))
        }
        try producer.flush(timeout: .seconds(20))
        XCTAssertEqual(failures, 0)
    }

    func testParseKeepsRealPartitionsAndUnknownLagIsNil() throws {
        let json = #"""
            {"name":"c#consumer-1","type":"consumer","ts":123,"time":1763700000,"replyq":2,
             "topics":{"raw":{"topic":"raw","partitions":{
               "0":{"partition":0,"fetch_state":"active","committed_offset":4,"hi_offset":10,"consumer_lag":6,"consumer_lag_stored":5,"rxmsgs":10},
               "1":{"partition":1,"fetch_state":"none","committed_offset":-1001,"hi_offset":-1,"consumer_lag":-1,"consumer_lag_stored":-1,"rxmsgs":0},
               "-1":{"partition":-1,"fetch_state":"none","consumer_lag":-1}}}},
             "cgrp":{"state":"up","rebalance_cnt":3}}
            """#
        let s = try ConsumerStatistics.parse(Array(json.utf8))
        XCTAssertEqual(s.time, 1_763_700_000)
        XCTAssertEqual(s.replyQueue, 2)
        XCTAssertEqual(s.groupState, "up")
        XCTAssertEqual(s.rebalances, 3)
        XCTAssertEqual(s.partitions.map(\.partition), [0, 1], "the internal partition -1 is left out")
        XCTAssertEqual(s.partitions[0].consumerLag, 6)
        XCTAssertEqual(s.partitions[0].consumerLagStored, 5)
        XCTAssertEqual(s.partitions[0].committedOffset, 4)
        XCTAssertEqual(s.partitions[0].highWatermark, 10)
        XCTAssertEqual(s.partitions[0].fetchState, "active")
        XCTAssertNil(s.partitions[1].consumerLag, "-1 means unknown")
        XCTAssertNil(s.partitions[1].committedOffset)
        XCTAssertThrowsError(try ConsumerStatistics.parse(Array("{not json".utf8)))
    }

    func testConsumerLagComesFromLibrdkafkaStatistics() throws {
        let logger = KafkaTestSupport.logger("stats")
        let broker = try EmbeddedBroker(logger: logger)
        let topic = KafkaTestSupport.uniqueName("raw")
        try broker.createTopic(topic, partitions: 2)
        try produce(broker, topic: topic, partition: 0, timestamps: (0..<10).map { t0 + Int64($0) })
        try produce(broker, topic: topic, partition: 1, timestamps: (0..<4).map { t0 + Int64($0) })
        let p0 = TopicPartition(topic: topic, partition: 0)
        let p1 = TopicPartition(topic: topic, partition: 1)

        var config = KafkaTestSupport.standaloneConfig(broker)
        config["statistics.interval.ms"] = "100"
        config["enable.auto.commit"] = "false"
        let consumer = try KafkaConsumer(config: config, logger: logger)
        defer { try? consumer.close() }
        XCTAssertNil(try consumer.statistics.latest(), "no report before the first interval")
        // Committed 4 of 10 on partition 0 and 4 of 4 on partition 1: lags 6 and 0 (librdkafka counts from the committed offset).
        try consumer.commitSync(offsets: [p0: 4, p1: 4])
        try consumer.assign([p0: KafkaConsumer.stored, p1: KafkaConsumer.stored])
        var lags: [Int32: Int64] = [:]
        let found = try KafkaTestSupport.poll(consumer, for: .seconds(30), until: {
            lags = Dictionary(uniqueKeysWithValues: ((try? consumer.statistics.latest())?.partitions ?? [])
                .filter { $0.topic == topic }.compactMap { p in p.consumerLag.map { (p.partition, $0) } })
            return lags == [0: 6, 1: 0]
        })
        XCTAssertTrue(found, "consumer_lag per partition from the statistics: \(lags)")
        XCTAssertGreaterThan(consumer.statistics.reports, 0)
    }

    func testFirstOffsetByTimeSearchesWhereTheMockCannotLookUp() throws {
        let logger = KafkaTestSupport.logger("by-time")
        let broker = try EmbeddedBroker(logger: logger)
        let topic = KafkaTestSupport.uniqueName("raw")
        try broker.createTopic(topic, partitions: 2)
        // Partition 0: 100 records 10 ms apart; records 40 and 41 share a timestamp. Partition 1 stays empty.
        var timestamps = (0..<100).map { t0 + Int64($0) * 10 }
        timestamps[41] = timestamps[40]
        try produce(broker, topic: topic, partition: 0, timestamps: timestamps)
        let tp = TopicPartition(topic: topic, partition: 0)

        var config = KafkaTestSupport.standaloneConfig(broker)
        config["fetch.message.max.bytes"] = "1"
        let consumer = try KafkaConsumer(config: config, logger: logger)
        defer { try? consumer.close() }

        // The mock answers ListOffsets by timestamp with "none" (offset -1), even where records qualify.
        let answer = try consumer.offsetsForTimes([tp: t0 + 500], timeout: .seconds(10))
        XCTAssertEqual(answer.count, 1)
        XCTAssertNil(answer[tp]!, "librdkafka 2.0.2's mock cluster has no lookup by time")

        func first(_ ts: Int64, _ p: TopicPartition = tp) throws -> (Int64, KafkaConsumer.OffsetLookup) {
            let r = try consumer.firstOffset(atOrAfter: ts, in: p, timeout: .seconds(20))
            return (r.offset, r.lookup)
        }
        XCTAssertTrue(try first(t0 + 505) == (51, .search))
        XCTAssertTrue(try first(t0 + 500) == (50, .search))
        XCTAssertTrue(try first(t0 + 400) == (40, .search), "the first of two records with the same timestamp")
        XCTAssertTrue(try first(t0 + 401) == (42, .search))
        XCTAssertTrue(try first(t0 - 1) == (0, .search))
        XCTAssertTrue(try first(t0 + 990) == (99, .search))
        XCTAssertTrue(try first(t0 + 991) == (100, .bounds), "every record is older: the end offset")
        XCTAssertTrue(try first(t0, TopicPartition(topic: topic, partition: 1)) == (0, .bounds), "empty partition")
        // Every answer agrees with a scan of the timestamps.
        for probe in stride(from: t0 - 5, through: t0 + 1000, by: 71) {
            let want = Int64(timestamps.firstIndex { $0 >= probe } ?? timestamps.count)
            XCTAssertEqual(try first(probe).0, want, "first offset at or after \(probe - t0)")
        }
    }
}
