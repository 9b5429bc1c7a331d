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
    /// Replay: per source partition, the offset to stop at (records from it on are skipped); with `untilEnd`
    /// these are the end offsets. See `ReplayPlan`.
    public var stopOffsets: [Int32: Int64]?
    /// Appended to every output topic's name but the internal one (a replay writes to separate topics).
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
    typealias Slot = OffsetTracker.Slot

    let spec: PipelineSpec
    let options: WorkerOptions
    let logger: Logger
    let engine: PipelineEngine
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let tracker = OffsetTracker()
    var batch = EventBatch()
    var output = OutputBuffer()
    var internalRecords: [InternalRecord] = []
    var producerTopics: [Int32: ProducerTopic] = [:]
    /// Held partitions of the source topic (0) and of the internal topic (1).
    var assigned = Set<Slot>()
    var hadAssignment = false
    /// Between a revocation and the next assignment (eager rebalances come as two callbacks).
    var awaitingAssignment = false
    /// Revoked in an eager rebalance: their state is kept in case the next assignment gives them back.
    var revokedPending = Set<Slot>()
    var endOffsets: [Int32: Int64] = [:]
    var reachedEnd = Set<Int32>()
    var failure: RuntimeError?
    let sourceTopic: String
    /// The stage that repartitions through an internal topic, and that topic.
    let repartitioning: (any Repartitioning)?
    let internalTopic: String?
    /// Next offset to read per held partition (after the last record handed to the pipeline).
    var position: [Slot: Int64] = [:]
    /// Records before these offsets are re-read only to rebuild state: their outputs were delivered before.
    var replayUntil: [Slot: Int64] = [:]
    /// Next offsets whose outputs are all delivered but that are not known to be committed yet.
    var uncommitted: [Slot: Int64] = [:]
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
        self.repartitioning = engine.repartitioning
        self.internalTopic = repartitioning.map { $0.partialsTopic ?? PipelineSpec.defaultPartialsTopic(group: spec.source.group) }

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

    func slot(_ tp: TopicPartition) -> Slot? {
        if tp.topic == sourceTopic { return Slot(topic: 0, partition: tp.partition) }
        if tp.topic == internalTopic { return Slot(topic: 1, partition: tp.partition) }
        return nil
    }

    func topicPartition(_ s: Slot) -> TopicPartition {
        TopicPartition(topic: s.topic == 0 ? sourceTopic : internalTopic!, partition: s.partition)
    }

    var heldSource: [Int32] { assigned.filter { $0.topic == 0 }.map(\.partition).sorted() }

    func run(stop: () -> Bool) throws {
        producer.onDelivery = { [tracker] token, error in
            tracker.delivered(token: token, error: error.map { "\($0)" })
        }
        consumer.onRebalance = { [unowned self] event in self.rebalance(event) }
        consumer.startOffsets = { [unowned self] tps in self.startOffsets(tps) }
        consumer.onPartitionEOF = { [unowned self] tp, offset in
            if tp.topic == self.sourceTopic, let end = self.endOffsets[tp.partition], offset >= end { self.reachedEnd.insert(tp.partition) }
        }
        let sourcePartitions = try consumer.partitionCount(topic: sourceTopic, timeout: .seconds(30))
        if options.untilEnd {
            for p in 0..<Int32(sourcePartitions) {
                endOffsets[p] = try consumer.watermarks(TopicPartition(topic: sourceTopic, partition: p), timeout: .seconds(30)).high
            }
            if let stops = options.stopOffsets { endOffsets = stops }
            logger.info("bounded run: end offsets \(endOffsets.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: " "))")
        }
        var topics = [sourceTopic]
        if let repartitioning, let internalTopic {
            let n: Int
            do {
                n = try consumer.partitionCount(topic: internalTopic, timeout: .seconds(30))
            } catch {
                throw RuntimeError(.setup, "the internal topic '\(internalTopic)' (windowed counts are merged through it) is missing: create it, with as many partitions as you want mergers", underlying: error)
            }
            repartitioning.connect(partialsTopic: internalTopic, partialsPartitions: Int32(n), sourcePartitions: Int32(sourcePartitions))
            topics.append(internalTopic)
            logger.info("merging windowed counts through '\(internalTopic)' (\(n) partitions) over \(sourcePartitions) source partitions")
        }
        try consumer.subscribe(topics)
        logger.info("worker started", metadata: ["topic": "\(sourceTopic)", "group": "\(spec.source.group)"])

        let topicIndex = batch.topicIndex(sourceTopic)
        while !stop() {
            options.status?.turn()
            batch.reset()
            output.reset()
            internalRecords.removeAll(keepingCapacity: true)
            _ = try consumer.poll(maxMessages: options.maxBatch, timeout: options.pollTimeout) { msg in
                if msg.topic == sourceTopic {
                    if let stop = options.stopOffsets?[msg.partition], msg.offset >= stop { reachedEnd.insert(msg.partition); return }
                    batch.appendRecord(
                        topic: topicIndex, partition: msg.partition, offset: msg.offset, timestamp: msg.timestamp ?? 0,
                        key: msg.key.count > 0 ? msg.key : nil, value: msg.value,
                        ip: msg.header("ip"), receivedAt: msg.header("received_at"),
                        ua: msg.header("ua"), project: msg.header("project"))
                } else {
                    internalRecords.append(InternalRecord(
                        partition: msg.partition, offset: msg.offset, key: Array(msg.key), value: Array(msg.value), index: 0))
                }
            }
            // Records of partitions revoked during this poll belong to their new owner now.
            for r in 0..<batch.records.count where !assigned.contains(Slot(topic: 0, partition: batch.records[r].partition)) {
                batch.records[r].status = .dropped
            }
            internalRecords.removeAll { !assigned.contains(Slot(topic: 1, partition: $0.partition)) }
            for k in internalRecords.indices {
                internalRecords[k].index = Int32(batch.records.count + k)
                if let until = replayUntil[Slot(topic: 1, partition: internalRecords[k].partition)], internalRecords[k].offset < until {
                    internalRecords[k].replay = true
                }
            }
            for r in 0..<batch.records.count {
                if let until = replayUntil[Slot(topic: 0, partition: batch.records[r].partition)], batch.records[r].offset < until {
                    batch.records[r].replay = true
                }
            }
            if !batch.records.isEmpty || !internalRecords.isEmpty {
                finishedState = false
                if !batch.records.isEmpty { try engine.process(&batch, output: &output) }
                if !internalRecords.isEmpty { try repartitioning?.merger.process(internalRecords, output: &output) }
                for r in batch.records where r.status != .dropped {
                    position[Slot(topic: 0, partition: r.partition)] = r.offset + 1
                    if options.untilEnd, let end = endOffsets[r.partition], r.offset + 1 >= end { reachedEnd.insert(r.partition) }
                }
                for r in internalRecords { position[Slot(topic: 1, partition: r.partition)] = r.offset + 1 }
            }
            if !awaitingAssignment { repartitioning?.tick(held: heldSource, output: &output) }
            try produceOutputs()
            _ = producer.poll(timeout: .zero)
            try checkFailure()
            storeOffsets()
            if let failure { throw failure }
            // No commits between a revocation and the next assignment: librdkafka completes the unassign
            // (and rejoins) only once no commit is outstanding.
            if !awaitingAssignment && ContinuousClock.now - lastCommit >= commitInterval { commitDelivered(final: false) }
            if options.untilEnd && hadAssignment && !awaitingAssignment
                && heldSource.allSatisfy({ reachedEnd.contains($0) }) {
                if !finishedState {
                    logger.info("reached the end offsets of all \(heldSource.count) held source partitions")
                    batch.reset()
                    output.reset()
                    internalRecords.removeAll(keepingCapacity: true)
                    repartitioning?.tick(held: heldSource, output: &output)
                    try engine.finish(output: &output)
                    try produceOutputs()
                    finishedState = true
                }
                let held = assigned.filter { $0.topic == 1 }
                if let merger = repartitioning?.merger, !held.allSatisfy({ merger.isComplete(partition: $0.partition) }) {
                    continue  // windows of other workers' partitions are still coming
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
            logger.warning("leaving with uncommitted offsets \(uncommitted.sorted { $0.key < $1.key }.map { "\(topicPartition($0.key))@\($0.value)" }): their records will be read again")
        }
        try consumer.close()
        logger.notice("worker stopped; what each stage did:")
        for line in engine.summaryLines() { logger.notice("  \(line)") }
        if let merger = repartitioning?.merger {
            for c in merger.counters { logger.notice("  merge.\(c.name)=\(c.value)") }
        }
    }

    /// Produces the batch's outputs, registering each record with the tracker first. Outputs of records
    /// re-read to rebuild state are not produced again.
    func produceOutputs() throws {
        let n = batch.records.count + internalRecords.count
        var perRecord = [Int32](repeating: 0, count: n)
        var replayed = [Bool](repeating: false, count: n)
        for (r, rec) in batch.records.enumerated() where rec.replay { replayed[r] = true }
        for (k, rec) in internalRecords.enumerated() where rec.replay { replayed[batch.records.count + k] = true }
        for m in output.messages where m.record >= 0 && !replayed[Int(m.record)] { perRecord[Int(m.record)] += 1 }
        var tokens = [UInt64](repeating: OffsetTracker.stateToken, count: n)
        for (r, rec) in batch.records.enumerated() where rec.status != .dropped {
            tokens[r] = tracker.add(partition: Slot(topic: 0, partition: rec.partition), offset: rec.offset, outputs: perRecord[r])
        }
        for (k, rec) in internalRecords.enumerated() {
            let r = batch.records.count + k
            tokens[r] = tracker.add(partition: Slot(topic: 1, partition: rec.partition), offset: rec.offset, outputs: perRecord[r])
        }
        for m in output.messages where m.record < 0 {
            _ = m
            tracker.addOutputs(token: OffsetTracker.stateToken, 1)
        }
        try output.bytes.withUnsafeBytes { bytes in
            for m in output.messages {
                if m.record >= 0 && replayed[Int(m.record)] { continue }
                let topic = try producerTopic(m.topic)
                let key = m.key.isPresent ? UnsafeRawBufferPointer(rebasing: bytes[Int(m.key.start)..<Int(m.key.end)]) : UnsafeRawBufferPointer(start: nil, count: 0)
                let value = UnsafeRawBufferPointer(rebasing: bytes[Int(m.value.start)..<Int(m.value.end)])
                let token = m.record >= 0 ? tokens[Int(m.record)] : OffsetTracker.stateToken
                do {
                    try producer.produce(topic, partition: m.partition >= 0 ? m.partition : nil, key: key, value: value, token: token)
                } catch let e as KafkaError where e.code != .fatal {
                    // Refused at once (e.g. the broker answered the topic's metadata with an error): the same
                    // as a failed delivery report. Nothing past this record is committed.
                    throw RuntimeError(.delivery, "an output could not be produced; stopping without committing past it", underlying: e)
                }
            }
        }
        for (s, until) in replayUntil where (position[s] ?? 0) >= until {
            replayUntil[s] = nil
            logger.info("\(topicPartition(s)): state rebuilt up to offset \(until)")
        }
    }

    func producerTopic(_ index: Int32) throws -> ProducerTopic {
        if let t = producerTopics[index] { return t }
        let name = output.topics[Int(index)]
        let t = try producer.topic(name == internalTopic ? name : name + options.outputTopicSuffix)
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
        for (s, next) in tracker.takeAdvanced() where assigned.contains(s) {
            uncommitted[s] = next
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

    /// Where re-reading must start to rebuild the state that a commit of `next` leaves behind.
    func replayPoint(_ s: Slot, next: Int64) -> ReplayPoint? {
        if s.topic == 0 { return engine.replayPoint(partition: s.partition, next: next) }
        guard let from = repartitioning?.merger.replayFrom(partition: s.partition) else { return nil }
        return ReplayPoint(offset: min(from, next), maxEventTime: nil)
    }

    /// Commits the delivered offsets not yet committed, each with its replay point as metadata. Returns
    /// whether nothing is left uncommitted. A rebalancing group refuses commits: the offsets are kept and
    /// committed after the next assignment.
    @discardableResult
    func commitDelivered(final: Bool) -> Bool {
        lastCommit = ContinuousClock.now
        if uncommitted.isEmpty { return true }
        var offsets: [TopicPartition: CommittedOffset] = [:]
        for (s, next) in uncommitted {
            offsets[topicPartition(s)] = CommittedOffset(offset: next, metadata: replayPoint(s, next: next)?.metadata ?? "")
        }
        do {
            try consumer.commitSync(offsets: offsets)
            options.status?.committed()
            for (tp, c) in offsets {
                if let s = slot(tp), uncommitted[s] == c.offset { uncommitted[s] = nil }
            }
            return uncommitted.isEmpty
        } catch let e as KafkaError where e.isRebalanceError {
            if final { logger.info("commit deferred until the group has rebalanced: \(e.message)") }
            return false
        } catch {
            logger.warning("commit failed: \(error)")
            return false
        }
    }

    /// Where newly assigned partitions start: partitions this worker kept state for start where it left
    /// off; others start at their replay point (committed as metadata) and re-read up to the committed
    /// offset to rebuild state without writing outputs again.
    func startOffsets(_ tps: [TopicPartition]) -> [TopicPartition: Int64] {
        let slots = tps.compactMap { slot($0) }
        var committed: [TopicPartition: CommittedOffset] = [:]
        do {
            committed = try consumer.committedWithMetadata(tps, timeout: .seconds(30))
        } catch {
            logger.error("could not read committed offsets of \(tps): \(error); starting from the group's committed offsets without state")
        }
        var starts: [TopicPartition: Int64] = [:]
        for s in slots {
            let tp = topicPartition(s)
            let c = committed[tp]
            if revokedPending.contains(s), let pos = position[s], c?.offset == pos {
                revokedPending.remove(s)
                continue  // given back after an eager rebalance: the state in memory is current
            }
            revokedPending.remove(s)
            dropState([s])
            guard let c else { continue }
            position[s] = c.offset
            guard let point = ReplayPoint(metadata: c.metadata), point.offset < c.offset else { continue }
            position[s] = point.offset
            if s.topic == 0 { engine.restore(partition: s.partition, from: point) }
            starts[tp] = point.offset
            replayUntil[s] = c.offset
            logger.info("\(tp): re-reading from offset \(point.offset) to rebuild state up to the committed offset \(c.offset)")
        }
        // Partitions an eager rebalance took and did not give back.
        dropState(Array(revokedPending))
        revokedPending.removeAll()
        return starts
    }

    func dropState(_ slots: [Slot]) {
        let source = slots.filter { $0.topic == 0 }.map(\.partition)
        let merged = slots.filter { $0.topic == 1 }.map(\.partition)
        if !source.isEmpty { engine.partitionsRevoked(source) }
        if !merged.isEmpty { repartitioning?.merger.partitionsRevoked(merged) }
        for s in slots {
            position[s] = nil
            replayUntil[s] = nil
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
            for tp in tps {
                guard let s = slot(tp) else { continue }
                assigned.insert(s)
                if s.topic == 0, let end = endOffsets[tp.partition], end == 0 { reachedEnd.insert(tp.partition) }
            }
            options.status?.assignmentChanged(heldSource, assigned: true)
            logger.info("assigned partitions \(tps.map { "\($0.topic)/\($0.partition)" }.sorted())")
        case .revoked(let tps):
            logger.info("revoked partitions \(tps.map { "\($0.topic)/\($0.partition)" }.sorted())")
            do {
                try drain()
                commitDelivered(final: false)
            } catch {
                logger.error("could not deliver on revocation: \(error)")
                if failure == nil { failure = error as? RuntimeError }
            }
            for tp in tps {
                guard let s = slot(tp) else { continue }
                assigned.remove(s)
                // Kept until the next assignment shows whether the partition comes back.
                revokedPending.insert(s)
                if s.topic == 0 { reachedEnd.remove(tp.partition) }
            }
            options.status?.assignmentChanged(heldSource, assigned: false)
            awaitingAssignment = true
        case .lost(let tps):
            logger.warning("lost partitions \(tps.map { "\($0.topic)/\($0.partition)" }.sorted()): no commit for them")
            let slots = tps.compactMap { slot($0) }
            for s in slots {
                uncommitted[s] = nil
                assigned.remove(s)
                if s.topic == 0 { reachedEnd.remove(s.partition) }
            }
            dropState(slots)
            options.status?.assignmentChanged(heldSource, assigned: false)
            awaitingAssignment = true
        }
    }
}
