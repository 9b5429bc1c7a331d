import Foundation
import Logging
import MaidianEvents
import MaidianKafka
import MaidianPipeline
import Synchronization

/// The one error type of `MaidianRuntime`.
public struct RuntimeError: Error, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// An output could not be delivered: the worker stopped without committing past it.
        case delivery
        /// Kafka reported a fatal error.
        case fatal
        /// Setting up the worker failed.
        case setup
        /// A recording could not be read.
        case recording
    }
    public var code: Code
    public var message: String
    public var underlying: (any Error)?
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }
    public var description: String {
        underlying.map { "\(code.rawValue): \(message): \($0)" } ?? "\(code.rawValue): \(message)"
    }
}

/// Options of one worker run.
public struct WorkerOptions: Sendable {
    /// Stop once every held partition reached the end offsets that existed at start.
    public var untilEnd = false
    /// Most records per poll.
    public var maxBatch = 2000
    /// How long a poll waits for records.
    public var pollTimeout: Duration = .milliseconds(100)
    /// How long the final flush may take before the worker gives up (and does not commit).
    public var flushTimeout: Duration = .seconds(60)
    /// Where the worker reports its phase, partitions and commits (health checks, metrics); nil: nowhere.
    public var status: WorkerStatus?
    /// Replay: per partition, the offset to stop at (records from it on are skipped); with `untilEnd` these
    /// are the end offsets. See `ReplayPlan`.
    public var stopOffsets: [Int32: Int64]?
    /// Appended to every output topic's name (a replay writes to separate topics).
    public var outputTopicSuffix = ""
    public init() {}
}

/// A consumer-group worker: polls the raw topic in batches on a dedicated thread, runs the pipeline, produces
/// outputs and stores each input offset only once all outputs derived from it are delivered.
///
/// All Kafka calls, stage work and delivery reports happen on the thread that calls `run()`;
/// `requestStop()` may be called from anywhere.
public final class Worker: Sendable {
    // Why Sendable: the mutable state lives in `State`, touched only by the thread inside `run()`;
    // the stop flag is atomic.
    private let stopFlag = Atomic<Bool>(false)
    private let spec: PipelineSpec
    private let registry: StageRegistry
    private let bootstrap: String
    private let options: WorkerOptions
    private let logger: Logger

    public init(spec: PipelineSpec, registry: StageRegistry, bootstrap: String, options: WorkerOptions, logger: Logger) {
        self.spec = spec
        self.registry = registry
        self.bootstrap = bootstrap
        self.options = options
        self.logger = logger
    }

    /// Asks the worker to stop: it finishes the batch in hand, delivers, commits and leaves the group.
    public func requestStop() {
        options.status?.stopping()
        stopFlag.store(true, ordering: .relaxed)
    }

    /// Runs until stopped or (with `untilEnd`) done. Blocks: call on a dedicated thread.
    public func run() throws {
        options.status?.workerStarted()
        defer { options.status?.workerStopped() }
        let state = try State(spec: spec, registry: registry, bootstrap: bootstrap, options: options, logger: logger)
        try state.run(stop: { self.stopFlag.load(ordering: .relaxed) })
    }

    /// Runs on a new thread and resumes when it ends; for async callers (services).
    public func runOnThread() async throws {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<Void, any Error>) in
            let thread = Thread {
                do {
                    try self.run()
                    cont.resume()
                } catch {
                    cont.resume(throwing: error)
                }
            }
            thread.name = "maidian-worker"
            thread.stackSize = 8 << 20
            thread.start()
        }
    }
}

/// The worker thread's state.
private final class State {
    let spec: PipelineSpec
    let options: WorkerOptions
    let logger: Logger
    let engine: PipelineEngine
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let tracker = OffsetTracker()
    var batch = EventBatch()
    var output = OutputBuffer()
    var producerTopics: [Int32: ProducerTopic] = [:]
    var assigned = Set<Int32>()
    var hadAssignment = false
    /// Between a revocation and the next assignment (eager rebalances come as two callbacks).
    var awaitingAssignment = false
    var endOffsets: [Int32: Int64] = [:]
    var reachedEnd = Set<Int32>()
    var failure: RuntimeError?
    let sourceTopic: String
    /// Next offsets whose outputs are all delivered but that are not known to be committed yet.
    var uncommitted: [Int32: Int64] = [:]
    var lastCommit = ContinuousClock.now
    /// State was written out at the end of a bounded run (and nothing was read since).
    var finishedState = false
    let commitInterval: Duration = .seconds(1)

    init(spec: PipelineSpec, registry: StageRegistry, bootstrap: String, options: WorkerOptions, logger: Logger) throws {
        self.spec = spec
        self.options = options
        self.logger = logger
        self.sourceTopic = spec.source.topic
        self.engine = try PipelineEngine(spec: spec, registry: registry, logger: logger)

        var consumerConfig: [String: String] = [
            "bootstrap.servers": bootstrap,
            "group.id": spec.source.group,
            "session.timeout.ms": String(spec.source.sessionTimeout.milliseconds),
            "queued.min.messages": "20000",
            "queued.max.messages.kbytes": "65536",
            "fetch.max.bytes": "16777216",
            // Offsets are committed explicitly from what was delivered (see commitDelivered).
            "enable.auto.commit": "false",
        ]
        for (k, v) in spec.source.kafka { consumerConfig[k] = v }
        self.consumer = try KafkaConsumer(config: consumerConfig, logger: logger)

        var producerConfig: [String: String] = ["bootstrap.servers": bootstrap]
        for (k, v) in spec.producerKafka { producerConfig[k] = v }
        self.producer = try KafkaProducer(config: producerConfig, logger: logger)
        options.status?.attach(counters: engine.live, statistics: consumer.statistics, topic: sourceTopic)
    }

    func run(stop: () -> Bool) throws {
        producer.onDelivery = { [tracker] token, error in
            tracker.delivered(token: token, error: error.map { "\($0)" })
        }
        consumer.onRebalance = { [unowned self] event in self.rebalance(event) }
        consumer.onPartitionEOF = { [unowned self] tp, offset in
            if let end = self.endOffsets[tp.partition], offset >= end { self.reachedEnd.insert(tp.partition) }
        }
        if options.untilEnd {
            let n = try consumer.partitionCount(topic: sourceTopic, timeout: .seconds(30))
            for p in 0..<Int32(n) {
                endOffsets[p] = try consumer.watermarks(TopicPartition(topic: sourceTopic, partition: p), timeout: .seconds(30)).high
            }
            if let stops = options.stopOffsets { endOffsets = stops }
            logger.info("bounded run: end offsets \(endOffsets.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: " "))")
        }
        try consumer.subscribe([sourceTopic])
        logger.info("worker started", metadata: ["topic": "\(sourceTopic)", "group": "\(spec.source.group)"])

        let topicIndex = batch.topicIndex(sourceTopic)
        while !stop() {
            options.status?.turn()
            batch.reset()
            output.reset()
            _ = try consumer.poll(maxMessages: options.maxBatch, timeout: options.pollTimeout) { msg in
                if let stop = options.stopOffsets?[msg.partition], msg.offset >= stop { reachedEnd.insert(msg.partition); return }
                batch.appendRecord(
                    topic: topicIndex, partition: msg.partition, offset: msg.offset, timestamp: msg.timestamp ?? 0,
                    key: msg.key.count > 0 ? msg.key : nil, value: msg.value,
                    ip: msg.header("ip"), receivedAt: msg.header("received_at"),
                    ua: msg.header("ua"), project: msg.header("project"))
            }
            if !batch.records.isEmpty {
                finishedState = false
                // Records of partitions revoked during this poll belong to their new owner now.
                for r in 0..<batch.records.count where !assigned.contains(batch.records[r].partition) {
                    batch.records[r].status = .dropped
                }
                try engine.process(&batch, output: &output)
                try produceOutputs()
                for r in batch.records where r.status != .dropped && options.untilEnd {
                    if let end = endOffsets[r.partition], r.offset + 1 >= end { reachedEnd.insert(r.partition) }
                }
            }
            _ = producer.poll(timeout: .zero)
            try checkFailure()
            storeOffsets()
            if let failure { throw failure }
            // No commits between a revocation and the next assignment: librdkafka completes the unassign
            // (and rejoins) only once no commit is outstanding.
            if !awaitingAssignment && ContinuousClock.now - lastCommit >= commitInterval { commitDelivered(final: false) }
            if options.untilEnd && hadAssignment && !awaitingAssignment && assigned.allSatisfy({ reachedEnd.contains($0) }) {
                // (a refused final commit is retried once the group has rebalanced)
                logger.info("reached the end offsets of all \(assigned.count) held partitions")
                if !finishedState {
                    batch.reset()
                    output.reset()
                    try engine.finish(output: &output)
                    try produceOutputs()
                    finishedState = true
                }
                try drain()
                // A group rebalancing right now refuses commits: keep polling (which rejoins and commits
                // in the assignment handler) rather than leave progress uncommitted.
                if commitDelivered(final: true) { break }
            }
        }
        options.status?.stopping()
        try drain()
        if !commitDelivered(final: true) {
            logger.warning("leaving with uncommitted offsets \(uncommitted.sorted { $0.key < $1.key }): their records will be read again")
        }
        try consumer.close()
        logger.notice("worker stopped; what each stage did:")
        for line in engine.summaryLines() { logger.notice("  \(line)") }
    }

    /// Produces the batch's outputs, registering each record with the tracker first.
    func produceOutputs() throws {
        var perRecord = [Int32](repeating: 0, count: batch.records.count)
        for m in output.messages where m.record >= 0 { perRecord[Int(m.record)] += 1 }
        var tokens = [UInt64](repeating: OffsetTracker.stateToken, count: batch.records.count)
        for (r, rec) in batch.records.enumerated() where rec.status != .dropped {
            tokens[r] = tracker.add(partition: rec.partition, offset: rec.offset, outputs: perRecord[r])
        }
        for m in output.messages where m.record < 0 {
            _ = m
            tracker.addOutputs(token: OffsetTracker.stateToken, 1)
        }
        try output.bytes.withUnsafeBytes { bytes in
            for m in output.messages {
                let topic = try producerTopic(m.topic)
                let key = m.key.isPresent ? UnsafeRawBufferPointer(rebasing: bytes[Int(m.key.start)..<Int(m.key.end)]) : UnsafeRawBufferPointer(start: nil, count: 0)
                let value = UnsafeRawBufferPointer(rebasing: bytes[Int(m.value.start)..<Int(m.value.end)])
                let token = m.record >= 0 ? tokens[Int(m.record)] : OffsetTracker.stateToken
                try producer.produce(topic, key: key, value: value, token: token)
            }
        }
    }

    func producerTopic(_ index: Int32) throws -> ProducerTopic {
        if let t = producerTopics[index] { return t }
        let t = try producer.topic(output.topics[Int(index)] + options.outputTopicSuffix)
        producerTopics[index] = t
        return t
    }

    func checkFailure() throws {
        if let f = tracker.firstFailure {
            throw RuntimeError(.delivery, "an output could not be delivered; stopping without committing past it: \(f)")
        }
    }

    func storeOffsets() {
        tracker.advance()
        for (p, next) in tracker.takeAdvanced() {
            uncommitted[p] = next
            do {
                _ = try consumer.storeOffset(TopicPartition(topic: sourceTopic, partition: p), next: next)
            } catch {
                logger.warning("could not store offset \(next) of partition \(p): \(error)")
            }
        }
    }

    /// Delivers everything in flight and stores the offsets it covers.
    func drain() throws {
        do {
            try producer.flush(timeout: options.flushTimeout)
        } catch {
            throw RuntimeError(.delivery, "outputs still undelivered after \(options.flushTimeout); not committing", underlying: error)
        }
        try checkFailure()
        storeOffsets()
    }

    /// Commits the delivered offsets not yet committed. Returns whether nothing is left uncommitted.
    /// A rebalancing group refuses commits; the offsets are kept and committed after the next assignment.
    @discardableResult
    func commitDelivered(final: Bool) -> Bool {
        lastCommit = ContinuousClock.now
        if uncommitted.isEmpty { return true }
        let offsets = Dictionary(uniqueKeysWithValues: uncommitted.map { (TopicPartition(topic: sourceTopic, partition: $0.key), $0.value) })
        do {
            try consumer.commitSync(offsets: offsets)
            options.status?.committed()
            for (tp, next) in offsets where uncommitted[tp.partition] == next { uncommitted[tp.partition] = nil }
            return uncommitted.isEmpty
        } catch let e as KafkaError where e.isRebalanceError {
            if final { logger.info("commit deferred until the group has rebalanced: \(e.message)") }
            return false
        } catch {
            logger.warning("commit failed: \(error)")
            return false
        }
    }

    func rebalance(_ event: RebalanceEvent) {
        switch event {
        case .assigned(let tps):
            hadAssignment = true
            awaitingAssignment = false
            // The group is stable again: commit what a refused commit left over, before the new owners
            // of those partitions (maybe this worker) read their committed offsets.
            commitDelivered(final: false)
            for tp in tps where tp.topic == sourceTopic {
                assigned.insert(tp.partition)
                if let end = endOffsets[tp.partition], end == 0 { reachedEnd.insert(tp.partition) }
            }
            options.status?.assignmentChanged(assigned, assigned: true)
            logger.info("assigned partitions \(tps.map { $0.partition }.sorted())")
        case .revoked(let tps):
            logger.info("revoked partitions \(tps.map { $0.partition }.sorted())")
            do {
                try drain()
                commitDelivered(final: false)
            } catch {
                logger.error("could not deliver on revocation: \(error)")
                if failure == nil { failure = error as? RuntimeError }
            }
            forget(tps)
            awaitingAssignment = true
        case .lost(let tps):
            logger.warning("lost partitions \(tps.map { $0.partition }.sorted()): no commit for them")
            for tp in tps { uncommitted[tp.partition] = nil }
            forget(tps)
            awaitingAssignment = true
        }
    }

    private func forget(_ tps: [TopicPartition]) {
        let ps = tps.filter { $0.topic == sourceTopic }.map(\.partition)
        for p in ps { assigned.remove(p) }
        options.status?.assignmentChanged(assigned, assigned: false)
        engine.partitionsRevoked(ps)
    }
}
