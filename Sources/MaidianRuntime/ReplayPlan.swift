import Logging
import MaidianKafka
import MaidianPipeline

/// Where a replay of the raw topic starts and stops, per partition (`maidian replay`).
///
/// A replay reads the raw topic again from a time, under a consumer group of its own, and writes to
/// separate output topics, so that new rules or stages apply to old data without touching the live job.
///
/// - Start: the first offset whose record timestamp is at or after `from` (Kafka's lookup by time, or a
///   binary search over record timestamps where the broker cannot look up, see
///   `KafkaConsumer.firstOffset(atOrAfter:in:timeout:)`). The plan **commits** these offsets for the replay
///   group before the worker joins it, like `kafka-consumer-groups --reset-offsets --to-datetime`, so the
///   worker starts there through the ordinary group protocol. A replay group that already has committed
///   offsets resumes from them (an interrupted replay continues) unless `restart` is set. A restart also starts
///   the group's merge of windowed counts over: its internal partitions are committed at their end with an
///   empty replay point, so that the earlier run's partials (and its final progress, after which a merger takes
///   nothing) are not read again (docs/recovery.md §3a).
/// - Stop: the first offset whose timestamp is after `to`, and never past the end offset the partition had
///   when the plan was made. The worker skips records from the stop offset on and finishes like
///   `run --until-end` once every partition reached its stop offset.
public struct ReplayPlan: Sendable {
    /// One partition's range.
    public struct Partition: Sendable, Equatable {
        /// The raw topic's partition.
        public var partition: Int32
        /// First offset to process.
        public var start: Int64
        /// First offset not to process.
        public var stop: Int64
        /// The replay group had committed offsets here before (an interrupted replay resumes).
        public var resumed: Bool
        /// How the start offset was found (nil when resumed).
        public var startLookup: KafkaConsumer.OffsetLookup?
        /// Records to process.
        public var records: Int64 { max(0, stop - start) }
    }

    /// The raw topic.
    public var topic: String
    /// The replay's consumer group.
    public var group: String
    /// Start time in ms since the epoch (record timestamps).
    public var from: Int64
    /// End time in ms, inclusive; nil: up to the end offsets the partitions had when the plan was made.
    public var to: Int64?
    /// Each partition's range of offsets, in partition order.
    public var partitions: [Partition]

    /// Records the replay will process, over all partitions.
    public var records: Int64 { partitions.reduce(0) { $0 + $1.records } }

    /// The stop offsets, for `WorkerOptions.stopOffsets`.
    public var stopOffsets: [Int32: Int64] {
        Dictionary(uniqueKeysWithValues: partitions.map { ($0.partition, $0.stop) })
    }

    /// The default group of a replay: `<group>.replay-<from in ms>`.
    public static func defaultGroup(liveGroup: String, from: Int64) -> String { "\(liveGroup).replay-\(from)" }

    /// Looks up every partition's range and commits the start offsets for `group` (see the type's
    /// description). Blocks: call from a thread that may block.
    ///
    /// - Parameters:
    ///   - from: Start time, ms since the epoch (record timestamps).
    ///   - to: End time, ms, inclusive; nil: up to the end offsets at the time of the call.
    ///   - kafka: Extra librdkafka consumer properties (the pipeline's `source.kafka`: security settings, ...).
    ///   - internalTopic: The group's internal partials topic when the pipeline merges windowed counts.
    public static func make(
        bootstrap: String, topic: String, group: String, from: Int64, to: Int64?, restart: Bool = false,
        internalTopic: String? = nil, kafka: [String: String] = [:], timeout: Duration = .seconds(30), logger: Logger
    ) throws -> ReplayPlan {
        var config = kafka
        config["bootstrap.servers"] = bootstrap
        config["group.id"] = group
        config["enable.auto.commit"] = "false"
        // Each search probe fetches: keep fetches small.
        config["fetch.message.max.bytes"] = "262144"
        config["queued.min.messages"] = "16"
        config["fetch.wait.max.ms"] = "50"
        let consumer = try KafkaConsumer(config: config, logger: logger)
        defer { try? consumer.close() }

        let count = try consumer.partitionCount(topic: topic, timeout: timeout)
        let tps = (0..<Int32(count)).map { TopicPartition(topic: topic, partition: $0) }
        let committed = restart ? [:] : try consumer.committed(tps, timeout: timeout)
        var highs: [TopicPartition: Int64] = [:]
        for tp in tps { highs[tp] = try consumer.watermarks(tp, timeout: timeout).high }
        let stops = try to.map { try consumer.firstOffsets(atOrAfter: $0 + 1, in: tps, timeout: timeout) }
        let fresh = tps.filter { committed[$0] == nil }
        let starts = try consumer.firstOffsets(atOrAfter: from, in: fresh, timeout: timeout)
        var partitions: [Partition] = []
        var toCommit: [TopicPartition: Int64] = [:]
        for tp in tps {
            let stop = min(highs[tp]!, stops?[tp]?.offset ?? Int64.max)
            if let resumeAt = committed[tp] {
                partitions.append(Partition(partition: tp.partition, start: min(resumeAt, stop), stop: stop, resumed: true, startLookup: nil))
            } else {
                let (start, lookup) = starts[tp]!
                partitions.append(Partition(partition: tp.partition, start: min(start, stop), stop: stop, resumed: false, startLookup: lookup))
                toCommit[tp] = min(start, stop)
            }
        }
        var commits = toCommit.mapValues { CommittedOffset(offset: $0, metadata: "") }
        if restart, let internalTopic {
            let count = try consumer.partitionCount(topic: internalTopic, timeout: timeout)
            var ends: [Int32: Int64] = [:]
            for q in 0..<Int32(count) { ends[q] = try consumer.watermarks(TopicPartition(topic: internalTopic, partition: q), timeout: timeout).high }
            commits.merge(restartedMerge(topic: internalTopic, ends: ends)) { a, _ in a }
            logger.info("replay restart: the merge of windowed counts starts over at the end of \(internalTopic)")
        }
        do {
            try consumer.commitSync(offsets: commits, timeout: timeout)
        } catch let e as KafkaError where e.isRebalanceError {
            // Kafka takes offsets from outside a group only while it has no members (librdkafka's mock
            // cluster: only for a group it has never seen).
            throw KafkaError(.commit, "cannot set the start offsets of group '\(group)': it has members (a replay of it running?); "
                                 + "wait for it or choose another --group", underlying: e)
        }
        let plan = ReplayPlan(topic: topic, group: group, from: from, to: to, partitions: partitions)
        for p in partitions {
            let how = p.resumed ? "resumed from the group's committed offset" : "start found by \(p.startLookup?.rawValue ?? "?")"
            logger.info("replay \(topic)[\(p.partition)]: offsets \(p.start)..<\(p.stop) (\(p.records) records; \(how))")
        }
        return plan
    }

    /// The commits that start a group's merge over at the end of its internal topic (`restart`): each partition
    /// at its end offset, with a replay point that says nothing was written yet (not "the end", after which a
    /// merger takes nothing).
    static func restartedMerge(topic: String, ends: [Int32: Int64]) -> [TopicPartition: CommittedOffset] {
        var out: [TopicPartition: CommittedOffset] = [:]
        for (q, end) in ends {
            out[TopicPartition(topic: topic, partition: q)] = CommittedOffset(offset: end, metadata: ReplayPoint(offset: end, maxEventTime: nil).metadata)
        }
        return out
    }
}
