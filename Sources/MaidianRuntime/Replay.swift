import Logging
import MaidianKafka

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
///   offsets resumes from them (an interrupted replay continues) unless `restart` is set.
/// - Stop: the first offset whose timestamp is after `to`, and never past the end offset the partition had
///   when the plan was made. The worker skips records from the stop offset on and finishes like
///   `run --until-end` once every partition reached its stop offset.
public struct ReplayPlan: Sendable {
    /// One partition's range.
    public struct Partition: Sendable, Equatable {
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
    public var from: Int64
    public var to: Int64?
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
    public static func make(
        bootstrap: String, topic: String, group: String, from: Int64, to: Int64?, restart: Bool = false,
        kafka: [String: String] = [:], timeout: Duration = .seconds(30), logger: Logger
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
        do {
            try consumer.commitSync(offsets: toCommit, timeout: timeout)
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
}

/// Progress of a replay as a person reads it: done/total, rate and ETA.
public struct ReplayProgress: Sendable {
    public var done: Int64
    public var total: Int64
    /// Records per second (recently).
    public var rate: Double

    public init(done: Int64, total: Int64, rate: Double) {
        self.done = done
        self.total = total
        self.rate = rate
    }

    /// Seconds left at the current rate; nil before there is a rate.
    public var etaSeconds: Int? {
        guard rate > 0 else { return nil }
        return Int((Double(max(0, total - done)) / rate).rounded(.up))
    }

    public var fraction: Double { total > 0 ? min(1, Double(done) / Double(total)) : 1 }

    /// `[████████░░░░░░░░]  52%  12,345/23,456 records  3,210 rec/s  ETA 0:03`
    public func bar(width: Int = 24) -> String {
        let filled = Int((fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        return "[\(bar)] \(percent)  \(summary)"
    }

    /// `replay: 12345/23456 records (52%), 3210 records/s, ETA 0:03`
    public var line: String { "replay: \(done)/\(total) records (\(percentText)), \(Int(rate)) records/s, ETA \(eta)" }

    private var percentText: String { "\(Int((fraction * 100).rounded(.down)))%" }

    /// Right-aligned in 4 columns, so the bar's text does not jump.
    private var percent: String { String(repeating: " ", count: max(0, 4 - percentText.count)) + percentText }

    private var summary: String { "\(Self.grouped(done))/\(Self.grouped(total)) records  \(Self.grouped(Int64(rate))) rec/s  ETA \(eta)" }

    private var eta: String {
        guard let s = etaSeconds else { return "-:--" }
        let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60)
        let mmss = "\(m < 10 && h > 0 ? "0" : "")\(m):\(sec < 10 ? "0" : "")\(sec)"
        return h > 0 ? "\(h):\(mmss)" : mmss
    }

    static func grouped(_ n: Int64) -> String {
        let digits = Array(String(n))
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return out
    }
}

/// Records per second since the newest sample that is at least 10 s old (or the oldest one), not counting
/// the wait before the first record (a group join).
public struct RateMeter: Sendable {
    public init() {}

    private var samples: [(time: ContinuousClock.Instant, done: Int64)] = []

    /// Adds a sample; returns the rate.
    public mutating func add(_ done: Int64, at time: ContinuousClock.Instant) -> Double {
        samples.append((time, done))
        // Keep one sample older than the window as the base; drop samples from before any progress.
        while samples.count > 2 && (time - samples[1].time >= .seconds(10) || samples[1].done == 0) { samples.removeFirst() }
        guard let first = samples.first, done > first.done else { return 0 }
        let span = time - first.time
        let seconds = Double(span.components.seconds) + Double(span.components.attoseconds) / 1e18
        return seconds > 0 ? Double(done - first.done) / seconds : 0
    }
}
