import CRdKafka
import Logging

/// A Kafka consumer-group member (librdkafka high-level consumer).
///
/// Threading: not thread-safe. Create it, poll it, store offsets, commit and close it on one
/// dedicated thread (most calls block). Callbacks (`onRebalance`, `onPartitionEOF`, `onError`) run
/// on that thread, inside `poll()` (and `close()`).
///
/// Lifetime: call `close()` before dropping the last reference so the group is left cleanly and
/// stored offsets are committed; `deinit` closes too, without calling the handlers.
/// The handlers are cleared by `close()`, which breaks cycles through closures that capture the consumer.
public final class KafkaConsumer {
    /// Internal, not private: extensions in other files of this module (explicit commits) use it.
    let handle: KafkaClientHandle
    private let context: ConsumerContext
    let logger: Logger
    /// The consumer queue (main queue forwarded into it); destroyed in deinit before the handle.
    private let queue: OpaquePointer
    /// Reused array of message pointers for `rd_kafka_consume_batch_queue`.
    private var batch: UnsafeMutablePointer<UnsafeMutablePointer<rd_kafka_message_t>?>
    private var batchCapacity: Int
    /// Topic names by librdkafka topic pointer, so messages carry a `String` without allocating.
    private var topicNames: [UnsafeMutableRawPointer: String] = [:]
    private var topicNamesGeneration = 0
    /// The last topic pointer `topicName` answered for, and its name.
    private var lastTopic: (pointer: UnsafeMutableRawPointer?, name: String) = (nil, "")
    private var closed = false

    /// Defaults added under the caller's `config` (the caller wins).
    ///
    /// `partition.assignment.strategy` defaults to `range,roundrobin` (eager): every member of a
    /// group must use the same value, and librdkafka 2.0.2's `cooperative-sticky` has known hangs
    /// and crashes around close and commits (fixed between 2.3 and 2.10). Cooperative is supported when asked for.
    public static let defaultConfig: [String: String] = [
        "enable.auto.offset.store": "false",
        "enable.auto.commit": "true",
        "auto.commit.interval.ms": "1000",
        "enable.partition.eof": "true",
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "range,roundrobin",
    ]

    /// Creates a consumer.
    ///
    /// - Parameter config: librdkafka properties over `defaultConfig`. `group.id` is required, also
    ///   for `assign()` without group management (librdkafka's high-level consumer needs one).
    /// - Parameter logger: receives librdkafka's log lines (syslog levels 0–3 as error, 4 as warning,
    ///   the rest as debug) and client errors.
    /// - Throws: `KafkaError(.config)` for a rejected property or a missing `group.id`.
    public init(config: [String: String], logger: Logger) throws {
        let context = ConsumerContext(logger: logger, role: "consumer")
        self.context = context
        self.logger = logger
        let merged = Self.defaultConfig.merging(config) { _, caller in caller }
        // What the group will use (librdkafka says so in each rebalance callback; this is for one that cannot).
        context.lastCooperative = merged["partition.assignment.strategy"]?.contains("cooperative") ?? false
        guard let group = merged["group.id"], !group.isEmpty else {
            throw KafkaError(.config, "consumer property 'group.id' is required")
        }
        handle = try KafkaClientHandle(type: RD_KAFKA_CONSUMER, config: merged, context: context) { conf in
            rd_kafka_conf_set_rebalance_cb(conf, consumerRebalanceCallback)
        }
        // Serve rebalances, errors and logs from the consumer queue we batch-consume from.
        rd_kafka_poll_set_consumer(handle.rk)
        queue = rd_kafka_queue_get_consumer(handle.rk)!
        batchCapacity = 1024
        batch = .allocate(capacity: batchCapacity)
    }

    deinit {
        // No user code during teardown.
        context.onRebalance = nil
        context.startOffsets = nil
        context.onError = nil
        context.applyPending(rk: handle.rk)
        if !closed {
            _ = rd_kafka_consumer_close(handle.rk)
            context.applyPending(rk: handle.rk)
        }
        if raisedFatalError(handle.rk) != nil {
            handle.destroyFlags = RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE
        }
        rd_kafka_queue_destroy(queue)
        batch.deallocate()
        // `handle` is released next: rd_kafka_destroy, then the context.
    }

    /// Called before the consumer applies an assignment change, on the polling thread inside
    /// `poll()` (or `close()`). For `revoked`/`lost` it runs before the partitions are unassigned,
    /// so the handler can flush outputs, `storeOffset` and `commitSync` (a `lost` commit fails).
    /// Messages fetched before the change was announced are passed to the poll closure first.
    public var onRebalance: ((RebalanceEvent) -> Void)? {
        get { context.onRebalance }
        set { context.onRebalance = newValue }
    }

    /// Called inside `poll()` when the consumer reaches the end of a partition: (partition, offset of the next message).
    public var onPartitionEOF: ((TopicPartition, Int64) -> Void)?

    /// The latest librdkafka statistics report of this consumer (set `statistics.interval.ms` to get
    /// reports). Thread-safe: read it from anywhere, e.g. a metrics endpoint.
    public var statistics: KafkaStatisticsSource { handle.context.statistics }

    /// Called with newly assigned partitions right after `onRebalance(.assigned)` and before they are
    /// assigned: the offsets it returns are where reading starts (others start at the committed offset).
    /// Runs on the polling thread; it may call blocking consumer methods such as `committedWithMetadata`.
    public var startOffsets: (([TopicPartition]) -> [TopicPartition: Int64])? {
        get { context.startOffsets }
        set { context.startOffsets = newValue }
    }

    /// Non-fatal errors (broker transport, consume errors of a partition), after they are logged.
    /// Fatal errors are thrown by `poll()` instead.
    public var onError: ((KafkaError) -> Void)? {
        get { context.onError }
        set { context.onError = newValue }
    }

    /// Joins the group (named by `group.id`) and subscribes to `topics`. Does not block.
    public func subscribe(_ topics: [String]) throws {
        try checkOpen("subscribe")
        let list = PartitionList(topics.map { TopicPartition(topic: $0, partition: RD_KAFKA_PARTITION_UA) })
        let err = rd_kafka_subscribe(handle.rk, list.pointer)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(err, "subscribe to \(topics)")
        }
    }

    /// Reads the given partitions from the given offsets without group management (no rebalances).
    /// Offsets are absolute, or `KafkaConsumer.beginning` / `.end` / `.stored`.
    public func assign(_ offsets: [TopicPartition: Int64]) throws {
        try checkOpen("assign")
        let list = PartitionList(offsets.keys, offsets: offsets)
        let err = rd_kafka_assign(handle.rk, list.pointer)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(err, "assign \(offsets.keys.sorted { ($0.topic, $0.partition) < ($1.topic, $1.partition) })")
        }
    }

    /// Logical offset: the partition's first message.
    public static let beginning = Int64(RD_KAFKA_OFFSET_BEGINNING)
    /// Logical offset: after the partition's last message.
    public static let end = Int64(RD_KAFKA_OFFSET_END)
    /// Logical offset: the group's committed offset (falls back to `auto.offset.reset`).
    public static let stored = Int64(RD_KAFKA_OFFSET_STORED)

    /// Fetches up to `maxMessages` messages, waiting up to `timeout` for the first, and calls `body`
    /// for each one in order. Returns how many messages were passed to `body`.
    ///
    /// Also serves, on this thread: partition EOFs (`onPartitionEOF`), consume errors (logged, `onError`)
    /// and rebalances (`onRebalance`, after the batch's messages). If `body` throws, the rest of the
    /// batch is dropped (those messages will be fetched again only after a rebalance or seek) and
    /// a pending rebalance is applied by the next `poll()` or `close()`.
    ///
    /// - Throws: `KafkaError(.fatal)` with librdkafka's fatal cause, `.state` after `close()`, or what `body` throws.
    ///
    /// Blocks: call from a dedicated thread.
    public func poll(maxMessages: Int, timeout: Duration, _ body: (borrowing KafkaMessage) throws -> Void) throws -> Int {
        try checkOpen("poll")
        try throwIfFatal()
        applyPendingRebalances()
        if maxMessages > batchCapacity {
            batch.deallocate()
            batchCapacity = maxMessages
            batch = .allocate(capacity: batchCapacity)
        }
        let count = try consumeBatch(maxMessages: max(maxMessages, 1), timeout: timeout)
        let batch = self.batch
        defer {
            for index in 0..<count { rd_kafka_message_destroy(batch[index]) }
        }
        var delivered = 0
        for index in 0..<count {
            guard let raw = batch[index] else { continue }
            let err = raw.pointee.err
            if err == RD_KAFKA_RESP_ERR_NO_ERROR {
                let message = KafkaMessage(raw: raw, topic: topicName(raw.pointee.rkt))
                try body(message)
                delivered += 1
            } else if err == RD_KAFKA_RESP_ERR__PARTITION_EOF {
                let tp = TopicPartition(topic: topicName(raw.pointee.rkt), partition: raw.pointee.partition)
                onPartitionEOF?(tp, raw.pointee.offset)
            } else {
                try consumeError(raw)
            }
        }
        applyPendingRebalances()
        try throwIfFatal()
        return delivered
    }

    /// Fills `batch` with up to `maxMessages` messages: what the queue holds now, or, when it holds nothing, the
    /// first message to arrive within `timeout` and what came with it. Returns how many.
    ///
    /// Why not one `rd_kafka_consume_batch_queue` with the timeout: it returns only once the batch is full or
    /// the timeout passed, so a poll that finds fewer messages than `maxMessages` waits out the whole timeout
    /// holding the ones it has. That made the end of a bounded run wait 100 ms per round of the last partials
    /// through the internal topic, and a starved worker wait with records in hand (bench/README.md, session 9).
    private func consumeBatch(maxMessages: Int, timeout: Duration) throws -> Int {
        context.inPoll = true
        defer { context.inPoll = false }
        var count = rd_kafka_consume_batch_queue(queue, 0, batch, maxMessages)
        if count < 0 { throw KafkaError(rd_kafka_last_error(), "consume from the consumer queue") }
        // A rebalance announced meanwhile ended the call (yield): apply it now rather than wait for messages.
        guard count == 0, context.pending.isEmpty, timeout > .zero else { return count }
        // Waits for the first message only (serving rebalances and errors as the batch call does); NULL on
        // timeout or when a rebalance callback yielded.
        guard let first = rd_kafka_consume_queue(queue, timeout.kafkaMilliseconds) else { return 0 }
        batch[0] = first
        count = 1
        if maxMessages > 1 && context.pending.isEmpty {
            let more = rd_kafka_consume_batch_queue(queue, 0, batch + 1, maxMessages - 1)
            if more > 0 { count += more }
        }
        return count
    }

    /// Moves where assigned partitions are read from (the next message returned has this offset), without
    /// waiting: messages fetched before are discarded by librdkafka, though one batch may still hold some.
    ///
    /// Call it between polls, on the polling thread (librdkafka 2.0's batch consume must not run concurrently
    /// with seek, pause or resume: KAFKA-NOTES).
    public func seek(_ offsets: [TopicPartition: Int64]) throws {
        try checkOpen("seek")
        if offsets.isEmpty { return }
        let list = PartitionList(offsets.keys, offsets: offsets)
        // Timeout 0: asynchronous (2.0.2 also divides a non-zero timeout by 1000, #4230).
        if let error = rd_kafka_seek_partitions(handle.rk, list.pointer, 0) {
            throw KafkaError(consuming: error, "seek \(offsets.keys.sorted { ($0.topic, $0.partition) < ($1.topic, $1.partition) })")
        }
        for element in list.elements where element.err != RD_KAFKA_RESP_ERR_NO_ERROR && element.err != RD_KAFKA_RESP_ERR__IN_PROGRESS {
            throw KafkaError(element.err, "seek \(String(cString: element.topic))[\(element.partition)] to \(element.offset)")
        }
    }

    /// Stores `next` (the offset of the next message to read, i.e. last processed + 1) for the next commit.
    ///
    /// - Returns: false when the partition is not assigned to this consumer any more (nothing stored).
    @discardableResult
    public func storeOffset(_ tp: TopicPartition, next: Int64) throws -> Bool {
        try checkOpen("storeOffset")
        let list = PartitionList([tp], offsets: [tp: next])
        let err = rd_kafka_offsets_store(handle.rk, list.pointer)
        let partitionErr = list.elements.first?.err ?? err
        switch partitionErr {
        case RD_KAFKA_RESP_ERR_NO_ERROR: return true
        case RD_KAFKA_RESP_ERR__STATE, RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION: return false
        default: throw KafkaError(partitionErr, "store offset \(next) for \(tp)")
        }
    }

    /// Stores several offsets at once (values are next offsets to read, as in `storeOffset`).
    ///
    /// - Returns: the partitions that are not assigned to this consumer any more (nothing stored for them).
    @discardableResult
    public func storeOffsets(_ offsets: [TopicPartition: Int64]) throws -> [TopicPartition] {
        try checkOpen("storeOffsets")
        guard !offsets.isEmpty else { return [] }
        let list = PartitionList(offsets.keys, offsets: offsets)
        _ = rd_kafka_offsets_store(handle.rk, list.pointer)
        var notAssigned: [TopicPartition] = []
        for element in list.elements {
            switch element.err {
            case RD_KAFKA_RESP_ERR_NO_ERROR: continue
            case RD_KAFKA_RESP_ERR__STATE, RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
                notAssigned.append(TopicPartition(topic: String(cString: element.topic), partition: element.partition))
            default:
                let tp = TopicPartition(topic: String(cString: element.topic), partition: element.partition)
                throw KafkaError(element.err, "store offset \(element.offset) for \(tp)")
            }
        }
        return notAssigned
    }

    /// Commits the stored offsets and waits for the result. Nothing stored is not an error.
    ///
    /// Blocks: call from a dedicated thread.
    public func commitSync() throws {
        try checkOpen("commitSync")
        let err = rd_kafka_commit(handle.rk, nil, 0)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR__NO_OFFSET else {
            throw KafkaError(err, "commit stored offsets", code: err == RD_KAFKA_RESP_ERR__FATAL ? .fatal : .commit)
        }
    }

    /// The partitions currently assigned to this consumer.
    public func assignment() throws -> [TopicPartition] {
        try checkOpen("assignment")
        var list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        let err = rd_kafka_assignment(handle.rk, &list)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let list else {
            throw KafkaError(err, "read assignment")
        }
        return PartitionList(owning: list).topicPartitions
    }

    /// Low and high watermark offsets of a partition, asked of the partition leader.
    /// `high` is the offset the next produced message will get.
    ///
    /// Blocks: call from a dedicated thread.
    public func watermarks(_ tp: TopicPartition, timeout: Duration) throws -> (low: Int64, high: Int64) {
        try checkOpen("watermarks")
        var low: Int64 = -1
        var high: Int64 = -1
        let err = rd_kafka_query_watermark_offsets(handle.rk, tp.topic, tp.partition, &low, &high, timeout.kafkaMilliseconds)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(err, "query watermarks of \(tp)")
        }
        return (low, high)
    }

    /// Partition count of `topic`, from a metadata request.
    ///
    /// Blocks: call from a dedicated thread.
    public func partitionCount(topic: String, timeout: Duration) throws -> Int {
        try checkOpen("partitionCount")
        return try handle.partitionCount(topic: topic, timeout: timeout)
    }

    /// The group's committed offsets (next offset to read) for `tps`; partitions without a committed offset are absent.
    ///
    /// Blocks: call from a dedicated thread.
    public func committed(_ tps: [TopicPartition], timeout: Duration) throws -> [TopicPartition: Int64] {
        try checkOpen("committed")
        let list = PartitionList(tps)
        let err = rd_kafka_committed(handle.rk, list.pointer, timeout.kafkaMilliseconds)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(err, "fetch committed offsets for \(tps)")
        }
        var result: [TopicPartition: Int64] = [:]
        for element in list.elements {
            let tp = TopicPartition(topic: String(cString: element.topic), partition: element.partition)
            if element.err != RD_KAFKA_RESP_ERR_NO_ERROR {
                throw KafkaError(element.err, "committed offset of \(tp)")
            }
            if element.offset >= 0 { result[tp] = element.offset }
        }
        return result
    }

    /// The fatal error of this consumer, if one was raised (then stop without committing).
    public func fatalError() -> KafkaError? {
        raisedFatalError(handle.rk)
    }

    /// Leaves the group: a pending rebalance is applied, the revoke of the current assignment is
    /// reported to `onRebalance`, stored offsets are committed (when `enable.auto.commit` is on)
    /// and the partitions are released. Then clears the handlers. Idempotent.
    ///
    /// Blocks: call from a dedicated thread (the polling thread).
    public func close() throws {
        guard !closed else { return }
        applyPendingRebalances()
        let err = rd_kafka_consumer_close(handle.rk)
        applyPendingRebalances()
        closed = true
        context.onRebalance = nil
        context.onError = nil
        onPartitionEOF = nil
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(err, "close consumer")
        }
    }

    /// Makes librdkafka raise a fatal error, for tests of fatal-error handling.
    func triggerFatalErrorForTesting(_ reason: String) {
        _ = rd_kafka_test_fatal_error(handle.rk, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, reason)
    }

    // MARK: - Private

    func checkOpen(_ operation: String) throws {
        if closed { throw KafkaError(.state, "consumer \(operation): the consumer is closed") }
    }

    private func throwIfFatal() throws {
        if let fatal = raisedFatalError(handle.rk) { throw fatal }
    }

    private func applyPendingRebalances() {
        guard !context.pending.isEmpty else { return }
        context.applyPending(rk: handle.rk)
    }

    /// Cached topic name of a message's topic handle.
    private func topicName(_ rkt: OpaquePointer?) -> String {
        guard let rkt else { return "" }
        if topicNamesGeneration != context.revocations {
            // Topic objects may be freed once unassigned: do not trust old pointers.
            topicNames.removeAll(keepingCapacity: true)
            lastTopic = (nil, "")
            topicNamesGeneration = context.revocations
        }
        let key = UnsafeMutableRawPointer(rkt)
        // A poll's messages come in runs of one topic: the last answer spares a dictionary look-up each.
        if key == lastTopic.pointer { return lastTopic.name }
        let name: String
        if let known = topicNames[key] {
            name = known
        } else {
            name = String(cString: rd_kafka_topic_name(rkt))
            topicNames[key] = name
        }
        lastTopic = (key, name)
        return name
    }

    private func consumeError(_ raw: UnsafeMutablePointer<rd_kafka_message_t>) throws {
        let err = raw.pointee.err
        let reason = String(cString: rd_kafka_message_errstr(raw))
        var place = "consumer"
        if raw.pointee.rkt != nil {
            let tp = TopicPartition(topic: topicName(raw.pointee.rkt), partition: raw.pointee.partition)
            place = tp.partition >= 0 ? "consume from \(tp)" : "consume from topic '\(tp.topic)'"
        }
        if err == RD_KAFKA_RESP_ERR__FATAL {
            throw raisedFatalError(handle.rk) ?? KafkaError(.fatal, "\(place): \(reason)", rdkafkaCode: err.rawValue)
        }
        let code = KafkaError.Code(err)
        let error = KafkaError(code == .other ? .consume : code, "\(place): \(reason)", rdkafkaCode: err.rawValue)
        logger.warning("kafka \(error)")
        context.onError?(error)
    }
}

/// A rebalance librdkafka announced and the consumer has not applied yet.
struct PendingRebalance {
    let err: rd_kafka_resp_err_t
    /// Owned copy: librdkafka frees its list when the callback returns.
    let partitions: PartitionList
    let cooperative: Bool
    let lost: Bool
}

/// Callback state of a consumer.
final class ConsumerContext: ClientContext {
    var onRebalance: ((RebalanceEvent) -> Void)?
    var startOffsets: (([TopicPartition]) -> [TopicPartition: Int64])?
    /// True while the polling thread is inside `rd_kafka_consume_batch_queue`.
    var inPoll = false
    /// Rebalances announced during a batch: applied after the batch's messages were handed out,
    /// because the batch API must not race assign/unassign (librdkafka 2.0 known issue), and so
    /// messages fetched before a revoke are processed before the revoke handler commits.
    var pending: [PendingRebalance] = []
    /// Count of revokes/losses applied, to invalidate caches of topic pointers.
    var revocations = 0
    /// Whether the group's rebalance protocol was COOPERATIVE when librdkafka last told (it may not, at close).
    var lastCooperative = false

    /// The rebalance callback: defer inside a batch, else (consumer close) apply now.
    func rebalance(rk: OpaquePointer, err: rd_kafka_resp_err_t, partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?) {
        // NULL once the group handle stops answering (a rebalance callback during close): the last protocol seen.
        if let protocolName = rd_kafka_rebalance_protocol(rk) { lastCooperative = String(cString: protocolName) == "COOPERATIVE" }
        let cooperative = lastCooperative
        let list = partitions.map { PartitionList.copy(of: $0) } ?? PartitionList([TopicPartition]())
        let lost = err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS && rd_kafka_assignment_lost(rk) != 0
        pending.append(PendingRebalance(err: err, partitions: list, cooperative: cooperative, lost: lost))
        if inPoll {
            rd_kafka_yield(rk)  // end the batch wait early: the group waits for our (un)assign
        } else {
            applyPending(rk: rk)
        }
    }

    /// Reports each pending rebalance to `onRebalance`, then applies it.
    func applyPending(rk: OpaquePointer) {
        while !pending.isEmpty {
            let change = pending.removeFirst()
            let tps = change.partitions.topicPartitions
            let list = change.partitions.pointer
            switch change.err {
            case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
                // Debug: the application logs assignments (one line per event).
                logger.debug("kafka consumer assigned \(tps)")
                onRebalance?(.assigned(tps))
                if let starts = startOffsets?(tps), !starts.isEmpty {
                    for i in change.partitions.elements.indices {
                        let e = change.partitions.elements[i]
                        if let o = starts[TopicPartition(topic: String(cString: e.topic), partition: e.partition)] {
                            change.partitions.elements[i].offset = o
                        }
                    }
                }
                if change.cooperative {
                    if let error = rd_kafka_incremental_assign(rk, list) {
                        report(KafkaError(consuming: error, "incremental assign of \(tps)"))
                    }
                } else {
                    let err = rd_kafka_assign(rk, list)
                    if err != RD_KAFKA_RESP_ERR_NO_ERROR { report(KafkaError(err, "assign \(tps)")) }
                }
            case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
                logger.debug("kafka consumer \(change.lost ? "lost" : "revoked") \(tps)")
                onRebalance?(change.lost ? .lost(tps) : .revoked(tps))
                revocations += 1
                if change.cooperative {
                    if let error = rd_kafka_incremental_unassign(rk, list) {
                        report(KafkaError(consuming: error, "incremental unassign of \(tps)"))
                    }
                } else {
                    let err = rd_kafka_assign(rk, nil)
                    if err != RD_KAFKA_RESP_ERR_NO_ERROR { report(KafkaError(err, "unassign \(tps)")) }
                }
            default:
                // A rebalance error: drop the assignment, as librdkafka documents.
                report(KafkaError(change.err, "rebalance failed"))
                revocations += 1
                _ = rd_kafka_assign(rk, nil)
            }
        }
    }

    private func report(_ error: KafkaError) {
        logger.error("kafka consumer: \(error)")
        onError?(error)
    }
}

/// librdkafka's rebalance callback; served inside consume_batch_queue / consumer_close on the polling thread.
private func consumerRebalanceCallback(
    _ rk: OpaquePointer?,
    _ err: rd_kafka_resp_err_t,
    _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
    _ opaque: UnsafeMutableRawPointer?
) {
    guard let rk else { return }
    guard let opaque else {
        _ = rd_kafka_assign(rk, nil)
        return
    }
    // Unretained: the opaque is the consumer's context, alive until after rd_kafka_destroy (see KafkaClientHandle).
    let context = Unmanaged<ConsumerContext>.fromOpaque(opaque).takeUnretainedValue()
    context.rebalance(rk: rk, err: err, partitions: partitions)
}
