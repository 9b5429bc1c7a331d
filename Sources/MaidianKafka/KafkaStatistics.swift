import CRdKafka
// Foundation's JSONDecoder reads librdkafka's statistics: a few KiB every `statistics.interval.ms`, parsed
// on demand by whoever asks (a metrics scrape), never on the worker thread and never per record.
import Foundation
import Synchronization

/// What librdkafka's statistics say about one partition a consumer knows of.
public struct PartitionStatistics: Sendable, Equatable {
    /// Topic name.
    public var topic: String
    /// Partition number.
    public var partition: Int32
    /// librdkafka's `consumer_lag`: messages between the consumer's position (or committed offset) and the
    /// high watermark; nil when librdkafka does not know it (-1), e.g. for partitions not assigned.
    public var consumerLag: Int64?
    /// `consumer_lag_stored`: the same from the stored offset.
    public var consumerLagStored: Int64?
    /// `hi_offset`: the partition's high watermark as last seen; nil when unknown.
    public var highWatermark: Int64?
    /// `committed_offset`; nil when none.
    public var committedOffset: Int64?
    /// `fetch_state`, e.g. `active`, `none`, `stopped`.
    public var fetchState: String
    /// `rxmsgs`: messages fetched from this partition.
    public var messagesReceived: Int64
}

/// One statistics report of a consumer (librdkafka's `statistics.interval.ms`), reduced to what Maidian exports.
public struct ConsumerStatistics: Sendable, Equatable {
    /// Wall-clock time of the report, seconds since the epoch (`time`).
    public var time: Int64
    /// Operations waiting in the reply queue (`replyq`): a growing number means the application polls too little.
    public var replyQueue: Int64
    /// Consumer group state (`cgrp.state`, e.g. `up`), nil without a group.
    public var groupState: String?
    /// Rebalances so far (`cgrp.rebalance_cnt`).
    public var rebalances: Int64?
    /// Every real partition of every topic in the report (librdkafka's internal partition -1 left out),
    /// ordered by topic and partition.
    public var partitions: [PartitionStatistics]

    /// Parses librdkafka's statistics JSON.
    public static func parse(_ json: [UInt8]) throws -> ConsumerStatistics {
        let raw: RawStatistics
        do {
            raw = try JSONDecoder().decode(RawStatistics.self, from: Data(json))
        } catch {
            throw KafkaError(.other, "librdkafka statistics could not be parsed", underlying: error)
        }
        var partitions: [PartitionStatistics] = []
        for (name, topic) in raw.topics ?? [:] {
            for (_, p) in topic.partitions ?? [:] where p.partition >= 0 {
                partitions.append(PartitionStatistics(
                    topic: name, partition: p.partition,
                    consumerLag: known(p.consumer_lag), consumerLagStored: known(p.consumer_lag_stored),
                    highWatermark: known(p.hi_offset), committedOffset: known(p.committed_offset),
                    fetchState: p.fetch_state ?? "", messagesReceived: p.rxmsgs ?? 0))
            }
        }
        partitions.sort { ($0.topic, $0.partition) < ($1.topic, $1.partition) }
        return ConsumerStatistics(
            time: raw.time ?? 0, replyQueue: raw.replyq ?? 0, groupState: raw.cgrp?.state,
            rebalances: raw.cgrp?.rebalance_cnt, partitions: partitions)
    }

    private static func known(_ v: Int64?) -> Int64? {
        guard let v, v >= 0 else { return nil }
        return v
    }
}

/// The latest statistics report of a client, as handed over by librdkafka's statistics callback.
///
/// The callback (on the thread that polls the client) only copies the JSON bytes in; `latest()` parses on
/// the caller's thread and caches the result until the next report. Thread-safe.
public final class KafkaStatisticsSource: Sendable {
    private struct Slot {
        var json: [UInt8] = []
        var generation = 0
        var parsed: ConsumerStatistics?
        var parsedGeneration = 0
    }
    private let slot = Mutex(Slot())

    /// A source without reports: `latest()` is nil until the first one.
    public init() {}

    /// Reports received so far.
    public var reports: Int { slot.withLock { $0.generation } }

    /// Keeps a copy of a report (called by the statistics callback).
    func store(_ json: UnsafeRawBufferPointer) {
        let copy = [UInt8](json)
        slot.withLock {
            $0.json = copy
            $0.generation += 1
        }
    }

    /// The latest report, parsed; nil before the first one (or when statistics are off).
    public func latest() throws -> ConsumerStatistics? {
        let (json, generation, cached) = slot.withLock { s in
            (s.json, s.generation, s.parsedGeneration == s.generation ? s.parsed : nil)
        }
        if let cached { return cached }
        if generation == 0 { return nil }
        let parsed = try ConsumerStatistics.parse(json)
        slot.withLock { s in
            if s.generation == generation {
                s.parsed = parsed
                s.parsedGeneration = generation
            }
        }
        return parsed
    }
}

/// The subset of librdkafka's statistics JSON (STATISTICS.md) that is read; field names are librdkafka's.
private struct RawStatistics: Decodable {
    struct Partition: Decodable {
        var partition: Int32
        var fetch_state: String?
        var committed_offset: Int64?
        var hi_offset: Int64?
        var consumer_lag: Int64?
        var consumer_lag_stored: Int64?
        var rxmsgs: Int64?
    }
    struct Topic: Decodable {
        var partitions: [String: Partition]?
    }
    struct Group: Decodable {
        var state: String?
        var rebalance_cnt: Int64?
    }
    var time: Int64?
    var replyq: Int64?
    var topics: [String: Topic]?
    var cgrp: Group?
}
