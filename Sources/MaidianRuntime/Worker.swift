import Foundation
import Logging
import MaidianEvents
import MaidianKafka
import MaidianPipeline
import Synchronization

/// The one error type of `MaidianRuntime`.
public struct RuntimeError: Error, CustomStringConvertible {
    /// What kind of failure it was (the CLI picks the exit status by it).
    public enum Code: String, Sendable {
        /// An output could not be delivered: the worker stopped without committing past it.
        case delivery
        /// Kafka reported a fatal error.
        case fatal
        /// Setting up the worker failed.
        case setup
        /// A recording could not be read.
        case recording
        /// The whole process was frozen (SIGSTOP, a paused machine) for longer than the group waits for a
        /// heartbeat: its partitions may belong to another worker now, so it stops without writing or committing.
        case liveness
        /// Input newer than where a bounded run of the group finished a partition, in a pipeline whose windowed
        /// counts are merged: the group's mergers take nothing after their end, so it would be left out of them.
        /// The worker stops before processing it; a new group is the way on (exit status 1, as a setting).
        case finishedGroup
    }
    /// What kind of failure it was.
    public var code: Code
    /// What went wrong, for a person.
    public var message: String
    /// The error that caused it (from Kafka, the file system, a stage), if any.
    public var underlying: (any Error)?
    /// An error of kind `code`, optionally wrapping the error behind it.
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
    public var maxBatch = 250
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
    /// Output topics written under their own name despite `outputTopicSuffix` (a backfill writes the counts of
    /// the rules it recomputes into the live counts topic).
    public var liveTopics: Set<String> = []
    /// The watchdog's limit (`source.liveness_timeout`): a processing loop without a completed iteration for
    /// this long is stuck. Nil: no watchdog (freezes of the process are still detected).
    public var livenessTimeout: Duration? = .seconds(120)
    /// Called once, on the watchdog thread, when the loop is stuck. The CLI exits the process (status 3) so
    /// that the orchestrator restarts it; nil only logs.
    public var onStall: (@Sendable (String) -> Void)?
    /// A hook into the loop, for tests of failure handling only (`TestFaults`); nil in production.
    public var hook: (any WorkerHook)?
    /// Every option at its default: run until stopped, no status, no hook, a 120 s liveness timeout.
    public init() {}
}

/// A consumer-group worker: polls the raw topic in batches on a dedicated thread, runs the pipeline, produces
/// outputs and stores each input offset only once all outputs derived from it are delivered.
///
/// Polls, stage work and commits happen on the thread that calls `run()`; outputs are produced and their
/// delivery reports served on a second thread (`OutputSender`). `requestStop()` may be called from anywhere.
public final class Worker: Sendable {
    // Why Sendable: the mutable state lives in `State`, touched only by the thread inside `run()`;
    // the stop flag is atomic.
    private let stopFlag = Atomic<Bool>(false)
    private let spec: PipelineSpec
    private let registry: StageRegistry
    private let bootstrap: String
    private let options: WorkerOptions
    private let logger: Logger

    /// A worker for `spec`, its stages built from `registry`, for the cluster at `bootstrap`; not started yet.
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

/// The worker thread's state: the loop, and the parts it owns (the books of both lanes, the committer, the
/// rebalance handler).
private final class State: RebalanceHost {
    let spec: PipelineSpec
    let options: WorkerOptions
    let logger: Logger
    let engine: PipelineEngine
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    /// Produces the outputs and counts their delivery reports (in its `OffsetTracker`) on a thread of its own.
    let sender: OutputSender
    let liveness: Liveness
    /// The raw record headers the decoder reads (wire format §1), looked up in every record.
    static let ipHeader = KafkaHeaderName("ip")
    static let receivedAtHeader = KafkaHeaderName("received_at")
    static let uaHeader = KafkaHeaderName("ua")
    static let projectHeader = KafkaHeaderName("project")
    var batch = EventBatch()
    /// Records of a poll past the batch bound (`source.limits.max_batch_bytes`): the next batch.
    var rest = EventBatch()
    var output = OutputBuffer()
    var internalRecords: [InternalRecord] = []
    /// Per output of the batch: its delivery token (`OutputSender.skip`: not produced). Reused.
    var messageTokens: [UInt64] = []
    /// The output topics' names as produced (`options.outputTopicSuffix`), by index; rebuilt when topics are added.
    var producedTopicNames: [String] = []
    /// `output.deadLetterTopic` as last told to the sender.
    var deadLetterIndex: Int32 = -1
    /// Everything kept per partition, per lane.
    let books: PartitionBooks
    let topics: LaneTopics
    let committer: Committer
    /// Lazy: the worker is its host.
    lazy var rebalances = RebalanceHandler(
        topics: topics, books: books, committer: committer, sourceKeepsState: engine.stateHorizon > 0, host: self, logger: logger)
    let sourceTopic: String
    /// The consumer group (`source.group`).
    let group: String
    /// The stage that repartitions through an internal topic, and that topic.
    let repartitioning: (any Repartitioning)?
    let internalTopic: String?
    /// State was written out at the end of a bounded run, for these held source partitions, and no source
    /// record was read since. Partials read after it do not undo it: they change the merger's state, not the
    /// windows stage's, and finishing again would send every final progress message again (one per source
    /// and internal partition), which comes back as more partials: a loop that kept bounded runs busy for
    /// seconds after their end.
    var finishedState = false
    var finishedHeld: [Int32] = []
    /// Bounded runs: when this worker had merged, delivered and committed everything it holds. It then stays in
    /// the group until every partition of the group is committed at its end (`groupIsDone`), for at most
    /// `groupWait`: leaving earlier revokes every other member (eager rebalance), which waits out the
    /// group's join timer and re-reads the leaver's partitions from their replay points before it can finish.
    var ownWorkDoneAt: ContinuousClock.Instant?
    var lastGroupCheck: ContinuousClock.Instant?
    let groupWait: Duration
    /// Partitions of the internal topic (0 without one).
    var partialsPartitions: Int32 = 0
    /// How long a stopping worker keeps polling for a rebalance to end so that it can commit.
    let stopCommitWait: Duration
    /// Records produced per output topic index since the last `reportBatch` (for metrics).
    var producedSinceReport: [Int] = []
    /// Where the loop's time went, logged when the worker stops.
    var profile = LoopProfile()
    /// Where partitions without a committed offset start (`RebalanceHandler.freshStart`).
    let freshStart: Int64?

    init(spec: PipelineSpec, registry: StageRegistry, bootstrap: String, options: WorkerOptions, logger: Logger) throws {
        self.spec = spec
        self.options = options
        self.logger = logger
        self.sourceTopic = spec.source.topic
        self.group = spec.source.group
        try spec.requireOutputs()
        self.engine = try PipelineEngine(spec: spec, registry: registry, logger: logger)
        self.repartitioning = engine.repartitioning
        self.internalTopic = repartitioning.map { $0.partialsTopic ?? PipelineSpec.defaultPartialsTopic(group: spec.source.group) }

        var consumerConfig: [String: String] = [
            "bootstrap.servers": bootstrap,
            "group.id": spec.source.group,
            "session.timeout.ms": String(spec.source.sessionTimeout.milliseconds),
            // A fifth of the session (librdkafka's 3 s is a third of a 10 s session): members hear of a
            // rebalance sooner and rejoin well within the group's join wait (session minus 1 s on the mock),
            // instead of being left out of the new generation and losing their partitions.
            "heartbeat.interval.ms": String(max(100, spec.source.sessionTimeout.milliseconds / 5)),
            // librdkafka compares queued.min.messages (and .kbytes) with the whole consumer queue, not one
            // partition's (the partitions' queues forward into it), and 2.0.2 stops fetching for up to a
            // second once it is reached. At 20,000 a worker emptied the queue in a fraction of that second
            // and then waited: most of a run through a broker was empty polls. 200,000 small records (about
            // 1.5 s of work) outlast the stall; the kbytes bound (64 MiB) still caps big records.
            "queued.min.messages": "200000",
            "queued.max.messages.kbytes": "65536",
            // A fetch that finds nothing waits this long before it answers (500 ms by default), and the mock
            // does not cut the wait short when data arrives meanwhile: at the end of a bounded run the last
            // partials waited out such fetches (0.7 s of empty polls per run, 0.3 s at 100). On a real broker
            // the cost is an idle worker's empty fetches, ten a second per broker instead of two.
            "fetch.wait.max.ms": "100",
            "fetch.max.bytes": "16777216",
            // Offsets are committed explicitly from what was delivered (see `Committer`).
            "enable.auto.commit": "false",
        ]
        for (k, v) in spec.source.kafka { consumerConfig[k] = v }
        self.consumer = try KafkaConsumer(config: consumerConfig, logger: logger)
        freshStart = RebalanceHandler.freshStart(autoOffsetReset: consumerConfig["auto.offset.reset"] ?? KafkaConsumer.defaultConfig["auto.offset.reset"])

        var producerConfig: [String: String] = ["bootstrap.servers": bootstrap]
        for (k, v) in spec.producerKafka { producerConfig[k] = v }
        self.producer = try KafkaProducer(config: producerConfig, logger: logger)
        options.status?.attach(counters: engine.live, statistics: consumer.statistics, topic: sourceTopic)

        // A freeze this long may outlast the group's patience: the last heartbeat can be up to one
        // heartbeat interval older than the freeze's start.
        let session = Int64(consumerConfig["session.timeout.ms"].flatMap { Int64($0) } ?? spec.source.sessionTimeout.milliseconds)
        let heartbeat = consumerConfig["heartbeat.interval.ms"].flatMap { Int64($0) } ?? 3000
        liveness = Liveness(freezeLimit: .milliseconds(max(1000, session - heartbeat)))
        stopCommitWait = .milliseconds(session + 5000)
        groupWait = .milliseconds(session)
        output.maxMessageBytes = OutputBuffer.maxMessageBytes(producerLimit: producer.maxMessageBytes)
        let topics = LaneTopics(source: sourceTopic, partials: internalTopic), books = PartitionBooks()
        self.topics = topics
        self.books = books
        let engine = engine, consumer = consumer, producer = producer, status = options.status
        committer = Committer(
            topics: topics, books: books,
            target: .init(
                commit: { try consumer.commitSync(offsets: $0) },
                isFatal: { producer.fatalError() != nil || consumer.fatalError() != nil },
                sourcePoint: { engine.replayPoint(partition: $0, next: $1) },
                sourceKeepsState: engine.stateHorizon > 0,
                committed: { status?.committed() }),
            logger: logger)
        // Last: it starts a thread, which nothing above may leave behind by throwing.
        sender = OutputSender(producer: producer, dropped: engine.live.outputsDropped, logger: logger)
    }

    func run(stop: @escaping () -> Bool) throws {
        // Whatever ends the run: the sender thread ends with it (after a clean end it has nothing left to produce).
        defer { sender.stop(discard: true) }
        consumer.onRebalance = { [unowned self] event in
            self.rebalances.handle(event)
            self.liveness.beat()  // a handler may block (flush, commit): that is progress, not a stall
        }
        rebalances.freshStart = freshStart
        rebalances.mergesWindows = repartitioning != nil
        consumer.startOffsets = { [unowned self] tps in self.rebalances.startOffsets(tps) }
        let sourceBook = books.source
        consumer.onPartitionEOF = { [unowned self] tp, offset in
            if tp.topic == self.sourceTopic, let end = sourceBook.endOffsets[tp.partition], offset >= end { sourceBook.reachedEnd.insert(tp.partition) }
        }
        let sourcePartitions = try consumer.partitionCount(topic: sourceTopic, timeout: .seconds(30))
        if options.untilEnd {
            for p in 0..<Int32(sourcePartitions) {
                sourceBook.endOffsets[p] = try consumer.watermarks(TopicPartition(topic: sourceTopic, partition: p), timeout: .seconds(30)).high
            }
            if let stops = options.stopOffsets { sourceBook.endOffsets = stops }
            logger.info("bounded run: end offsets \(sourceBook.endOffsets.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: " "))")
        }
        var subscribed = [sourceTopic]
        if let repartitioning, let internalTopic {
            let n: Int
            do {
                n = try consumer.partitionCount(topic: internalTopic, timeout: .seconds(30))
            } catch {
                throw RuntimeError(.setup, "the internal topic '\(internalTopic)' (windowed counts are merged through it) is missing: create it, with as many partitions as you want mergers", underlying: error)
            }
            repartitioning.connect(partialsTopic: internalTopic, partialsPartitions: Int32(n), sourcePartitions: Int32(sourcePartitions))
            partialsPartitions = Int32(n)
            subscribed.append(internalTopic)
            logger.info("merging windowed counts through '\(internalTopic)' (\(n) partitions) over \(sourcePartitions) source partitions")
        }
        try consumer.subscribe(subscribed)
        logger.info("worker started", metadata: ["topic": "\(sourceTopic)", "group": "\(spec.source.group)", "version": "\(MaidianBuild.version)"])

        let topicIndex = batch.topicIndex(sourceTopic)
        let partialsBook = books.partials
        let hookContext = options.hook.map { _ in
            WorkerHookContext(
                logger: logger, fatal: { [producer] in producer.fatalError() != nil },
                raiseFatal: { [producer] in producer.triggerFatalErrorForTesting($0) }, stop: stop)
        }
        var finished = false
        // The watchdog watches the loop (start-up waits on metadata with timeouts of its own).
        liveness.beat()
        liveness.start(timeout: options.livenessTimeout, logger: logger, onStall: options.onStall)
        defer { liveness.stop() }
        while !stop() {
            options.status?.turn()
            liveness.beat()
            let iterationStart = ContinuousClock.now
            batch.reset()
            output.reset()
            internalRecords.removeAll(keepingCapacity: true)
            if !rest.records.isEmpty {
                // The rest of the last poll, past the batch bound (`source.limits.max_batch_bytes`).
                rest.moveRecords(from: 0, to: &batch)
                rest.reset()
            } else {
                let pollStart = ContinuousClock.now
                let assignedBefore = rebalances.hadAssignment
                profile.startCPU()
                let got = try consumer.poll(maxMessages: options.maxBatch, timeout: options.pollTimeout) { msg in
                    if msg.topic == sourceTopic {
                        if let stop = options.stopOffsets?[msg.partition], msg.offset >= stop { sourceBook.reachedEnd.insert(msg.partition); return }
                        batch.appendRecord(
                            topic: topicIndex, partition: msg.partition, offset: msg.offset, timestamp: msg.timestamp ?? 0,
                            key: msg.key.count > 0 ? msg.key : nil, value: msg.value,
                            ip: msg.header(Self.ipHeader), receivedAt: msg.header(Self.receivedAtHeader),
                            ua: msg.header(Self.uaHeader), project: msg.header(Self.projectHeader))
                    } else {
                        internalRecords.append(InternalRecord(
                            partition: msg.partition, offset: msg.offset, key: Array(msg.key), value: Array(msg.value), index: 0))
                    }
                }
                profile.add(.poll, since: pollStart)
                // Before the first assignment every poll is empty (the group's first join waits 3 s on the mock).
                // Not the poll that brought the assignment: its wait before it was for the group, not for records.
                if got == 0 && assignedBefore { profile.emptyPoll(took: ContinuousClock.now - pollStart) }
            }
            try checkFrozen(since: iterationStart)
            let polled = ContinuousClock.now
            // Records of partitions revoked during this poll belong to their new owner now.
            for r in 0..<batch.records.count where !sourceBook.isHeld(batch.records[r].partition) {
                batch.records[r].status = .dropped
            }
            internalRecords.removeAll { !partialsBook.isHeld($0.partition) }
            try keepReadingContiguous()
            for r in 0..<batch.records.count {
                let reading = sourceBook[batch.records[r].partition]
                if let until = reading.replayUntil, batch.records[r].offset < until {
                    batch.records[r].replay = true
                } else if let finished = reading.finishedBefore, batch.records[r].offset >= finished, batch.records[r].status != .dropped {
                    throw inputAfterFinish(batch.records[r].partition, offset: batch.records[r].offset, finished: finished)
                }
            }
            if !batch.records.isEmpty || !internalRecords.isEmpty {
                if !batch.records.isEmpty {
                    finishedState = false
                    ownWorkDoneAt = nil
                }
                if let hook = options.hook, let hookContext { hook.willProcess(records: batch.records.count + internalRecords.count, worker: hookContext) }
                if !batch.records.isEmpty { try engine.process(&batch, output: &output, rest: &rest) }
                // Numbered after the source records the batch kept: `process` moves the ones past the batch bound
                // (`source.limits.max_batch_bytes`) to the next batch.
                for k in internalRecords.indices {
                    internalRecords[k].index = Int32(batch.records.count + k)
                    if let until = partialsBook[internalRecords[k].partition].replayUntil, internalRecords[k].offset < until {
                        internalRecords[k].replay = true
                    }
                }
                if !internalRecords.isEmpty { try repartitioning?.merger.process(internalRecords, output: &output) }
                for r in batch.records where r.status != .dropped {
                    sourceBook[r.partition].position = r.offset + 1
                    if options.untilEnd, let end = sourceBook.endOffsets[r.partition], r.offset + 1 >= end { sourceBook.reachedEnd.insert(r.partition) }
                }
                for r in internalRecords { partialsBook[r.partition].position = r.offset + 1 }
                rememberMergerPoints()
            }
            // Not once the held partitions' final progress is out: an idle progress after it would move their
            // watermark back from the end, and the mergers would wait for a second final one.
            if !rebalances.awaitingAssignment && !(finishedState && finishedHeld == rebalances.heldSource) {
                repartitioning?.tick(held: rebalances.heldSource, output: &output)
            }
            var phaseStart = profile.add(.stages, since: polled)
            try checkFrozen(since: iterationStart)
            try produceOutputs()
            if !batch.records.isEmpty || !internalRecords.isEmpty { reportBatch(since: polled) }
            phaseStart = profile.add(.produce, since: phaseStart)
            try checkFailure()
            storeOffsets()
            phaseStart = profile.add(.deliveries, since: phaseStart)
            if let failure = rebalances.failure { throw failure }
            // No commits between a revocation and the next assignment: librdkafka completes the unassign
            // (and rejoins) only once no commit is outstanding.
            if !rebalances.awaitingAssignment && committer.isDue {
                committer.commit(final: false)
                profile.add(.commits, since: phaseStart)
            }
            // Revoked because another member left: done here too if that member was the last one working.
            if ownWorkDoneAt != nil && rebalances.awaitingAssignment && leaveGroupNow() { finished = true; break }
            let heldSource = rebalances.heldSource
            // Not while records read are waiting past the batch bound (`rest`): librdkafka reports a partition's
            // end once it has fetched up to it, which may be before its last records are processed.
            if options.untilEnd && rebalances.hadAssignment && !rebalances.awaitingAssignment && rest.records.isEmpty
                && heldSource.allSatisfy({ sourceBook.reachedEnd.contains($0) }) {
                if !finishedState || finishedHeld != heldSource {
                    logger.info("reached the end offsets of all \(heldSource.count) held source partitions")
                    batch.reset()
                    output.reset()
                    internalRecords.removeAll(keepingCapacity: true)
                    repartitioning?.tick(held: heldSource, output: &output)
                    try engine.finish(output: &output)
                    // Every window is written out here: the commit of this position says so (`ReplayPoint.finished`).
                    if repartitioning != nil {
                        for p in heldSource {
                            // A partition with no record and no commit (empty at the start) ends at 0.
                            guard let position = sourceBook[p].position ?? (sourceBook.endOffsets[p] == 0 ? 0 : nil) else { continue }
                            sourceBook[p].finishedAt = position
                            committer.recommitFinished(p, at: position)
                        }
                    }
                    try produceOutputs()
                    // This worker's mergers read these partials back before it can end: send them now.
                    if repartitioning != nil { sender.push() }
                    reportBatch(since: ContinuousClock.now)
                    finishedState = true
                    finishedHeld = heldSource
                    ownWorkDoneAt = nil
                }
                if let merger = repartitioning?.merger, !partialsBook.held.allSatisfy({ merger.isComplete(partition: $0) }) {
                    continue  // windows of other workers' partitions are still coming
                }
                try drain()
                // A group rebalancing right now refuses commits: keep polling (which rejoins and commits
                // in the assignment handler) rather than leave progress uncommitted.
                if committer.commit(final: true) {
                    if ownWorkDoneAt == nil {
                        logger.info("bounded run done: every held partition merged, delivered and committed")
                        ownWorkDoneAt = .now
                    }
                    if leaveGroupNow() {
                        finished = true
                        break
                    }
                }
            }
        }
        options.status?.stopping()
        try drain()
        if !finished && !committer.commit(final: true) { try awaitCommitAfterRebalance() }
        try consumer.close()
        profile.senderCPU = sender.stop()
        if engine.spec.source.decodeThreads > 1 { profile.inflateCPU = .nanoseconds(Int64(engine.decoder.helperCPUSeconds * 1e9)) }
        logger.info("loop profile: \(profile.summary)")
        logger.notice("worker stopped; what each stage did:")
        for line in engine.summaryLines() { logger.notice("  \(line)") }
        if let merger = repartitioning?.merger {
            for c in merger.counters { logger.notice("  merge.\(c.name)=\(c.value)") }
        }
    }

    /// A bounded run whose own work is done (`ownWorkDoneAt`): whether to leave the group now, i.e. every
    /// partition of the group is committed at its end, or `groupWait` has passed.
    func leaveGroupNow() -> Bool {
        guard let doneAt = ownWorkDoneAt else { return false }
        let now = ContinuousClock.now
        if now - doneAt >= groupWait {
            logger.info("leaving the group after waiting \(groupWait) for its other members to finish")
            return true
        }
        if let last = lastGroupCheck, now - last < .milliseconds(200) { return false }
        lastGroupCheck = now
        do {
            if try groupIsDone() {
                logger.info("leaving the group: every partition is committed at its end")
                return true
            }
        } catch {
            logger.debug("could not check whether the group is done: \(error)")
        }
        return false
    }

    /// Whether every source partition of a bounded run is committed at its end offset, and every partition of
    /// the internal topic with a replay point whose written-up-to mark is the end (its merger had every source's
    /// final progress and wrote everything): then no member has anything left to do, and leaving revokes nobody
    /// who still works. One OffsetFetch round trip (asking 32 high watermarks one by one took seconds).
    func groupIsDone() throws -> Bool {
        var tps = books.source.endOffsets.keys.map { TopicPartition(topic: sourceTopic, partition: $0) }
        if let internalTopic { tps += (0..<partialsPartitions).map { TopicPartition(topic: internalTopic, partition: $0) } }
        let committed = try consumer.committedWithMetadata(tps, timeout: .seconds(5))
        return tps.allSatisfy { tp in
            if tp.topic == sourceTopic {
                let end = books.source.endOffsets[tp.partition] ?? 0
                return end <= 0 || (committed[tp]?.offset ?? -1) >= end
            }
            return committed[tp].flatMap { ReplayPoint(metadata: $0.metadata) }?.maxEventTime == .max
        }
    }

    /// The error that stops the worker before a record newer than where an earlier bounded run of the group
    /// finished its partition (`finishedBefore`, set only when the pipeline merges windows). That run wrote out
    /// every window and sent its final progress; the group's mergers take no partial after every source's final
    /// progress (a source read again sends copies then, which they cannot tell from newer input), so this
    /// record's windowed counts would be left out without a word (docs/recovery.md §3a).
    func inputAfterFinish(_ partition: Int32, offset: Int64, finished: Int64) -> RuntimeError {
        RuntimeError(.finishedGroup, "\(sourceTopic)[\(partition)] has records from offset \(offset) on, newer than offset \(finished), where a bounded run (--until-end) of group '\(group)' finished the partition: that run wrote out every window, and the group's windowed counts take nothing newer, so these records would be left out of them. Run newer input under a new group (source.group or MAIDIAN_GROUP; for `maidian replay`: --restart, or another --group), and to process a topic in installments, run one live group instead of bounded runs (docs/recovery.md §3a)")
    }

    /// Drops records read before and sends partitions with a gap back to where they should be read (`GapGuard`).
    func keepReadingContiguous() throws {
        var gaps = GapGuard(books: books, topics: topics, logger: logger)
        for r in batch.records.indices where batch.records[r].status != .dropped {
            if !gaps.keep(Slot(lane: .source, partition: batch.records[r].partition), offset: batch.records[r].offset) { batch.records[r].status = .dropped }
        }
        internalRecords.removeAll { !gaps.keep(Slot(lane: .partials, partition: $0.partition), offset: $0.offset) }
        try consumer.seek(gaps.seeks)
    }

    /// A stop request while the group rebalances: commits are refused until this member has rejoined, so
    /// keep polling (reading nothing) for up to the session timeout plus 5 s; the assignment handler
    /// commits. Progress still uncommitted after that is read again by the partitions' next owners.
    func awaitCommitAfterRebalance() throws {
        let deadline = ContinuousClock.now + stopCommitWait
        if !committer.uncommitted.isEmpty { logger.info("stopping: waiting for the rebalance to end to commit \(committer.uncommitted.count) partition(s)") }
        while !committer.uncommitted.isEmpty && ContinuousClock.now < deadline {
            liveness.beat()
            _ = try consumer.poll(maxMessages: options.maxBatch, timeout: options.pollTimeout) { _ in }
            if !rebalances.awaitingAssignment && committer.isDue { committer.commit(final: false) }
        }
        if !committer.uncommitted.isEmpty {
            logger.warning("leaving with uncommitted offsets \(committer.pendingDescription): their records will be read again")
        }
    }

    /// Stops when the whole process was frozen longer than the group waits for a heartbeat (SIGSTOP, a paused
    /// machine): another worker may own these partitions now, so nothing of this batch may be written or
    /// committed. A loop that was merely slow (the watchdog thread ran meanwhile) goes on.
    func checkFrozen(since start: ContinuousClock.Instant) throws {
        if ContinuousClock.now - start > liveness.freezeLimit && liveness.freezes == 0 {
            // Long enough for a freeze: give the watchdog thread (woken with the process) time to see it.
            Thread.sleep(forTimeInterval: 0.3)
        }
        if liveness.freezes > 0 {
            throw RuntimeError(.liveness, "the process was frozen for \(String(format: "%.1f", liveness.longestFreezeSeconds)) s, longer than the group waits for a heartbeat (session.timeout.ms minus heartbeat.interval.ms = \(liveness.freezeLimit)): its partitions may belong to another worker now; stopping without writing or committing")
        }
    }

    /// Hands the batch's outputs to the sender, registering each record with the tracker first. Outputs of
    /// records re-read to rebuild state are not produced again. A partition's offset may be committed only past
    /// its last record in the batch: that record carries what the batch completed (see `OffsetTracker`).
    func produceOutputs() throws {
        try produceRefused()
        divertOversizedOutputs()
        let n = batch.records.count + internalRecords.count
        var perRecord = [Int32](repeating: 0, count: n)
        var replayed = [Bool](repeating: false, count: n)
        for (r, rec) in batch.records.enumerated() where rec.replay { replayed[r] = true }
        for (k, rec) in internalRecords.enumerated() where rec.replay { replayed[batch.records.count + k] = true }
        for m in output.messages where m.record >= 0 && !replayed[Int(m.record)] { perRecord[Int(m.record)] += 1 }
        var last: [Slot: Int] = [:]
        for (r, rec) in batch.records.enumerated() where rec.status != .dropped { last[Slot(lane: .source, partition: rec.partition)] = r }
        for (k, rec) in internalRecords.enumerated() { last[Slot(lane: .partials, partition: rec.partition)] = batch.records.count + k }
        var tokens = [UInt64](repeating: OffsetTracker.stateToken, count: n)
        let stateOutputs = output.messages.reduce(into: Int32(0)) { if $1.record < 0 { $0 += 1 } }
        // Before the outputs are handed over: a delivery report must find its record registered.
        sender.withLedger { tracker, _ in
            for (r, rec) in batch.records.enumerated() where rec.status != .dropped {
                let s = Slot(lane: .source, partition: rec.partition)
                tokens[r] = tracker.add(partition: s, offset: rec.offset, outputs: perRecord[r], commitPoint: last[s] == r)
            }
            for (k, rec) in internalRecords.enumerated() {
                let r = batch.records.count + k
                let s = Slot(lane: .partials, partition: rec.partition)
                tokens[r] = tracker.add(partition: s, offset: rec.offset, outputs: perRecord[r], commitPoint: last[s] == r)
            }
            if stateOutputs > 0 { tracker.addOutputs(token: OffsetTracker.stateToken, stateOutputs) }
        }
        messageTokens.removeAll(keepingCapacity: true)
        for m in output.messages {
            if m.record >= 0 && replayed[Int(m.record)] {
                messageTokens.append(OutputSender.skip)
                continue
            }
            messageTokens.append(m.record >= 0 ? tokens[Int(m.record)] : OffsetTracker.stateToken)
            if Int(m.topic) >= producedSinceReport.count { producedSinceReport += Array(repeating: 0, count: Int(m.topic) + 1 - producedSinceReport.count) }
            producedSinceReport[Int(m.topic)] += 1
        }
        sendBatchOutputs()
        for lane in Lane.allCases {
            for (p, until, took) in books[lane].finishRebuilds() {
                logger.info("\(topics.topicPartition(Slot(lane: lane, partition: p))): state rebuilt up to offset \(until)\(took.map { " (\(until - $0.from) records re-read in \((ContinuousClock.now - $0.at).rounded))" } ?? "")")
            }
        }
    }

    /// Replaces outputs the producer would refuse as too large by `too_large` dead letters (wire format §1),
    /// and counts those and the dead letters the writers truncated or left out.
    func divertOversizedOutputs() {
        let live = engine.live
        if output.truncatedDeadLetters > 0 {
            live.deadLettersTruncated.add(output.truncatedDeadLetters)
            output.truncatedDeadLetters = 0
        }
        if output.droppedDeadLetters > 0 {
            live.outputsDropped.add(output.droppedDeadLetters)
            logger.error("dead letters too large to produce even truncated were left out", metadata: ["count": "\(output.droppedDeadLetters)", "max_bytes": "\(output.maxMessageBytes)"])
            output.droppedDeadLetters = 0
        }
        let records = batch.records.count
        let (diverted, dropped) = OutputWriter.divertOversized(&output) { r -> OutputWriter.OutputSource? in
            if Int(r) < records { return OutputWriter.source(record: r, in: batch) }
            let k = Int(r) - records
            guard k < internalRecords.count, let internalTopic else { return nil }
            return .init(topic: internalTopic, partition: internalRecords[k].partition, offset: internalRecords[k].offset, key: nil)
        }
        if diverted + dropped == 0 { return }
        live.outputsTooLarge.add(diverted)
        live.outputsDropped.add(dropped)
        logger.warning("outputs over the producer's message size went to the dead-letter topic as too_large", metadata: [
            "diverted": "\(diverted)", "dropped": "\(dropped)", "max_bytes": "\(output.maxMessageBytes)",
        ])
    }

    /// Hands outputs (with their tokens in `messageTokens`) to the sender, with the topics' names as produced;
    /// the arrays come back empty (recycled).
    func sendOutputs(_ bytes: inout [UInt8], _ messages: inout [OutputMessage]) {
        refreshTopicNames()
        sender.send(bytes: &bytes, messages: &messages, tokens: &messageTokens, topics: producedTopicNames)
    }

    /// Hands the batch's outputs (`output`) to the sender.
    func sendBatchOutputs() {
        // Through locals: two inout accesses to `output` at once would overlap (exclusivity).
        var bytes: [UInt8] = [], messages: [OutputMessage] = []
        swap(&bytes, &output.bytes)
        swap(&messages, &output.messages)
        sendOutputs(&bytes, &messages)
        swap(&bytes, &output.bytes)
        swap(&messages, &output.messages)
    }

    /// The output topics' names as produced, and the dead-letter topic's for the sender, when topics were added.
    func refreshTopicNames() {
        if producedTopicNames.count != output.topics.count || deadLetterIndex != output.deadLetterTopic {
            producedTopicNames = output.topics.map { name in
                name == internalTopic || options.liveTopics.contains(name) ? name : name + options.outputTopicSuffix
            }
            deadLetterIndex = output.deadLetterTopic
            sender.setDeadLetterTopic(deadLetterIndex >= 0 ? producedTopicNames[Int(deadLetterIndex)] : nil)
        }
    }

    /// Produces the dead letters of the outputs Kafka refused for good since the last call.
    func produceRefused() throws {
        let waiting = sender.withLedger { tracker, refused in
            refused.waiting.isEmpty ? [] : refused.takeWaiting().map { ($0, tracker.record(token: $0.token)) }
        }
        // Non-empty only with a dead-letter topic: outputs are kept for one only when the sender knows it.
        guard !waiting.isEmpty else { return }
        var letters = OutputBuffer()
        messageTokens.removeAll(keepingCapacity: true)
        for (r, record) in waiting {
            let from = record.map { record in
                OutputWriter.OutputSource(topic: topics.topicPartition(record.partition).topic, partition: record.partition.partition, offset: record.offset, key: nil)
            }
            let start = letters.begin()
            r.head.withUnsafeBytes { OutputWriter.writeTooLarge(topic: r.topic, head: $0, detail: r.detail, source: from, into: &letters.bytes) }
            // Each dead letter completes the record its refused output came from (its token).
            letters.finish(topic: output.deadLetterTopic, record: -1, keyStart: start, valueStart: start, hasKey: false)
            messageTokens.append(r.token)
            engine.live.outputsTooLarge.add(1)
        }
        sendOutputs(&letters.bytes, &letters.messages)
    }

    /// Tells the status (metrics) how long the batch took since `polled`, its newest live event time, and
    /// what was produced per topic since the last report.
    func reportBatch(since polled: ContinuousClock.Instant) {
        guard let status = options.status else { return }
        var newest: Int64?
        for i in 0..<batch.eventCount where batch.isLive(i) && batch.time(i) > (newest ?? .min) { newest = batch.time(i) }
        var produced: [(topic: String, count: Int)] = []
        for (i, n) in producedSinceReport.enumerated() where n > 0 {
            let name = output.topics[i]
            produced.append((name == internalTopic ? name : name + options.outputTopicSuffix, n))
            producedSinceReport[i] = 0
        }
        status.batchDone(latency: ContinuousClock.now - polled, newestEventTime: newest, produced: produced)
    }

    /// After a batch: the merger's replay point of each internal partition it read, as of the batch's end.
    func rememberMergerPoints() {
        guard let merger = repartitioning?.merger, !internalRecords.isEmpty else { return }
        var next: [Int32: Int64] = [:]
        for r in internalRecords { next[r.partition] = r.offset + 1 }
        for (q, n) in next {
            let written = merger.writtenUpTo(partition: q)
            let point: ReplayPoint
            if let from = merger.replayFrom(partition: q), from.offset < n {
                point = ReplayPoint(offset: from.offset, maxEventTime: written, item: from.item)
            } else {
                point = ReplayPoint(offset: n, maxEventTime: written)
            }
            books.partials[q].mergerPoints.append((n, point))
        }
    }

    func checkFailure() throws {
        if let f = producer.fatalError() ?? consumer.fatalError() {
            throw RuntimeError(.fatal, "librdkafka raised a fatal error; stopping without committing", underlying: f)
        }
        if let f = sender.failure { throw f }
        if let f = sender.withLedger({ tracker, _ in tracker.firstFailure }) {
            throw RuntimeError(.delivery, "an output could not be delivered; stopping without committing past it: \(f)")
        }
    }

    func storeOffsets() {
        committer.store(sender.withLedger { tracker, _ in
            tracker.advance()
            return tracker.takeAdvanced()
        })
    }

    /// Delivers everything in flight and stores the offsets it covers.
    func drain() throws {
        let start = ContinuousClock.now
        profile.startCPU()
        defer { profile.add(.flush, since: start) }
        do {
            try sender.flush(timeout: options.flushTimeout)
            // Outputs refused during the flush are dead-lettered, and those dead letters delivered too.
            while sender.withLedger({ !$1.waiting.isEmpty }) {
                try produceRefused()
                try sender.flush(timeout: options.flushTimeout)
            }
        } catch let e as RuntimeError {
            throw e
        } catch {
            throw RuntimeError(.delivery, "outputs still undelivered after \(options.flushTimeout); not committing", underlying: error)
        }
        liveness.beat()
        try checkFailure()
        storeOffsets()
    }

    // MARK: RebalanceHost

    func committedOffsets(_ tps: [TopicPartition]) throws -> [TopicPartition: CommittedOffset] {
        try consumer.committedWithMetadata(tps, timeout: .seconds(30))
    }

    func forgetState(_ lane: Lane, _ partitions: [Int32]) {
        switch lane {
        case .source: engine.partitionsRevoked(partitions)
        case .partials: repartitioning?.merger.partitionsRevoked(partitions)
        }
    }

    func restore(_ s: Slot, from point: ReplayPoint) {
        switch s.lane {
        case .source: engine.restore(partition: s.partition, from: point)
        case .partials: repartitioning?.merger.restore(partition: s.partition, from: point)
        }
    }

    func assignmentChanged(assigned: Bool) {
        options.status?.assignmentChanged(rebalances.heldSource, assigned: assigned)
    }
}
