import CRdKafka
import Logging

/// A topic handle of a `KafkaProducer`, cached by name. Keeps its producer's client alive.
public final class ProducerTopic {
    /// Topic name.
    public let name: String
    let rkt: OpaquePointer
    /// Keeps the rd_kafka_t alive while this topic handle exists.
    private let handle: KafkaClientHandle

    init(name: String, handle: KafkaClientHandle) throws {
        guard let rkt = rd_kafka_topic_new(handle.rk, name, nil) else {
            throw KafkaError(rd_kafka_last_error(), "create topic handle for '\(name)'")
        }
        self.name = name
        self.rkt = rkt
        self.handle = handle
    }

    deinit { rd_kafka_topic_destroy(rkt) }
}

/// Message values that librdkafka sends from where they lie instead of copying each one into a message of its
/// own (`KafkaProducer.produce(_:partition:key:in:range:token:)`): for a worker's outputs, that copy and its
/// allocation were about an eighth of the worker process's CPU (bench/README.md, issue 16, session 11).
///
/// The producer keeps the payload, and with it the bytes, until `release` was called and every message produced
/// from it has had its delivery report served (or the client is destroyed: its callback context, which holds
/// the payloads, outlives `rd_kafka_destroy`). Then `onPayloadReleased` hands it back, for its bytes to be reused.
public final class ProducerPayload {
    /// The values. A `let`, never mutated while the payload exists: the array's storage does not move, so the
    /// address taken at `init` stays valid for as long as this object keeps the array alive.
    public let bytes: [UInt8]
    let base: UnsafeRawPointer?
    /// Messages produced from it and not yet reported, plus one for the producer's hold until `release`.
    var outstanding = 1
    /// Its place among the producer's live payloads (0: none).
    var slot = 0

    /// Wraps `bytes`; hand it to one producer only.
    public init(bytes: [UInt8]) {
        self.bytes = bytes
        base = bytes.withUnsafeBytes { $0.baseAddress }
    }
}

/// A Kafka producer (idempotent by default).
///
/// Threading: not thread-safe as a Swift object: use it from one thread (typically a worker's sender
/// thread). Delivery reports (`onDelivery`) and errors (`onError`) are called on that thread, from inside
/// `poll()`, `flush()` and a `produce()` that waits for queue room. `wakePoll()`, `fatalError()` and
/// `outstanding` may be called from any thread.
///
/// Lifetime: `flush()` before releasing it; messages still queued when it is destroyed are dropped
/// without delivery reports.
public final class KafkaProducer {
    private let handle: KafkaClientHandle
    private let context: ProducerContext
    private var topics: [String: ProducerTopic] = [:]
    /// Non-NULL pointer for empty values: librdkafka sends a NULL payload as a tombstone.
    private let emptyPayload: UnsafeMutableRawPointer
    /// The queue `poll()` serves (delivery reports, errors), for `wakePoll()`; destroyed in deinit before the handle.
    private let mainQueue: OpaquePointer

    /// Defaults added under the caller's `config` (the caller wins). `murmur2_random` hashes keys
    /// like the Java client (keyless messages go to random partitions).
    public static let defaultConfig: [String: String] = [
        "enable.idempotence": "true",
        "acks": "all",
        // lz4 rather than zstd: compressing the outputs was the biggest share of librdkafka's CPU in a worker
        // (zstd level 1: about 1.3 CPU s of the producer thread per bench-3k run, lz4 about 0.8), and on a
        // machine whose cores the stages, librdkafka and the broker share, that is throughput. lz4 writes about
        // 1.6 times zstd level 1's bytes on event JSON (9 against 15 times smaller than the JSON). A user's
        // `compression.type` wins (`producer.kafka`). See bench/README.md (issue 16, session 8).
        "compression.type": "lz4",
        // librdkafka compresses each message set with a fresh context (Debian's 2.0.2 does not pass zstd the
        // input size, so level 3 sets up and clears 768 KiB of tables per set): small sets made that the
        // bigger part of a worker's producer CPU. Level 1 (about 48 KiB of tables, ratio within a few percent on
        // JSON) and 50 ms of lingering (sets of hundreds of records per partition instead of tens) cut the
        // worker's CPU through a broker by a third (bench/README.md, "Where a worker waited"). For lz4, level 1
        // is its fast mode (levels from 3 on are lz4-HC).
        "compression.level": "1",
        "linger.ms": "50",
        "partitioner": "murmur2_random",
        "queue.buffering.max.messages": "500000",
        // 256 MiB: part of a worker's memory ceiling (docs/hostile-input.md); a full queue only makes a
        // produce wait for deliveries, never loses a message.
        "queue.buffering.max.kbytes": "262144",
    ]

    /// Creates a producer.
    ///
    /// - Parameter config: librdkafka properties (`bootstrap.servers`, ...) over `defaultConfig`.
    /// - Parameter logger: receives librdkafka's log lines (syslog levels 0–3 as error, 4 as warning,
    ///   the rest as debug) and client errors.
    /// - Throws: `KafkaError(.config)` for a rejected property.
    public init(config: [String: String], logger: Logger) throws {
        let context = ProducerContext(logger: logger, role: "producer")
        self.context = context
        let merged = Self.defaultConfig.merging(config) { _, caller in caller }
        handle = try KafkaClientHandle(type: RD_KAFKA_PRODUCER, config: merged, context: context) { conf in
            rd_kafka_conf_set_dr_msg_cb(conf, producerDeliveryCallback)
        }
        emptyPayload = .allocate(byteCount: 1, alignment: 1)
        mainQueue = rd_kafka_queue_get_main(handle.rk)!
    }

    deinit {
        rd_kafka_queue_destroy(mainQueue)
        emptyPayload.deallocate()
    }

    /// Makes a `poll()` waiting on another thread return now (or the next one at once, if none is waiting):
    /// how a sender thread that waits for delivery reports learns that there is more to produce. Thread-safe.
    public func wakePoll() {
        rd_kafka_queue_yield(mainQueue)
    }

    /// Called for each delivery report with the message's token and nil on success, or a
    /// `KafkaError(.delivery)` naming topic and partition. Runs inside `poll()`, `flush()` or a
    /// `produce()` that waits for room, on the calling thread.
    public var onDelivery: ((UInt64, KafkaError?) -> Void)? {
        get { context.onDelivery }
        set { context.onDelivery = newValue }
    }

    /// Called before `onDelivery` for a delivery report whose error is permanent for its message
    /// (`KafkaError.isPermanentForMessage`), with the topic's name and the message's value (valid only during
    /// the call): what is needed to dead-letter it. Runs where `onDelivery` runs.
    public var onRefused: ((UInt64, KafkaError, String, UnsafeRawBufferPointer) -> Void)? {
        get { context.onRefused }
        set { context.onRefused = newValue }
    }

    /// Non-fatal client errors (broker transport, ...), after they are logged; also fatal ones when raised.
    public var onError: ((KafkaError) -> Void)? {
        get { context.onError }
        set { context.onError = newValue }
    }

    /// Called when a payload is released (see `ProducerPayload`), on the thread serving delivery reports, after
    /// the `onDelivery` of its last message; or from `release` when its messages were all reported already.
    public var onPayloadReleased: ((ProducerPayload) -> Void)? {
        get { context.onPayloadReleased }
        set { context.onPayloadReleased = newValue }
    }

    /// The largest delivery token: the opaque of a message carries its payload's place in the bits above.
    public static let maxToken: UInt64 = (1 << 48) - 1

    /// The handle of topic `name` (created once, then cached).
    public func topic(_ name: String) throws -> ProducerTopic {
        if let topic = topics[name] { return topic }
        let topic = try ProducerTopic(name: name, handle: handle)
        topics[name] = topic
        return topic
    }

    /// Enqueues a message (the bytes are copied). An empty `key` sends no key; an empty `value` an
    /// empty (not null) value. `partition` nil lets the partitioner choose by key.
    /// `token` comes back in `onDelivery`.
    ///
    /// When the local queue is full it polls (serving delivery reports) and retries until there is room.
    ///
    /// Blocks while the queue is full: call from a dedicated thread.
    public func produce(
        _ topic: ProducerTopic,
        partition: Int32? = nil,
        key: UnsafeRawBufferPointer,
        value: UnsafeRawBufferPointer,
        token: UInt64
    ) throws {
        precondition(token <= Self.maxToken, "a token fits in 48 bits")
        let payload = value.baseAddress.map { UnsafeMutableRawPointer(mutating: $0) } ?? emptyPayload
        try enqueue(topic, partition: partition, flags: RD_KAFKA_MSG_F_COPY, value: payload, count: value.count, key: key, opaque: token)
    }

    /// `rd_kafka_produce`, polling while the queue is full. The opaque travels as the message opaque's bit
    /// pattern: no per-message boxing.
    private func enqueue(
        _ topic: ProducerTopic, partition: Int32?, flags: Int32, value: UnsafeMutableRawPointer, count: Int,
        key: UnsafeRawBufferPointer, opaque: UInt64
    ) throws {
        let keyPointer = key.isEmpty ? nil : key.baseAddress
        let opaquePointer = UnsafeMutableRawPointer(bitPattern: UInt(opaque))
        while true {
            let rc = rd_kafka_produce(
                topic.rkt, partition ?? RD_KAFKA_PARTITION_UA, flags,
                value, count, keyPointer, key.isEmpty ? 0 : key.count, opaquePointer
            )
            if rc == 0 { return }
            let err = rd_kafka_last_error()
            guard err == RD_KAFKA_RESP_ERR__QUEUE_FULL else {
                throw produceError(err, topic: topic.name, partition: partition)
            }
            rd_kafka_poll(handle.rk, 10)
        }
    }

    /// Enqueues a message whose value is `payload.bytes[range]`, sent from there without a copy (the key is
    /// copied); `token` (at most `maxToken`) comes back in `onDelivery`. Call `release(payload)` once every
    /// message of it is produced. When the producer already holds 65,535 payloads, the value is copied instead.
    ///
    /// Blocks while the queue is full: call from a dedicated thread.
    public func produce(
        _ topic: ProducerTopic,
        partition: Int32? = nil,
        key: UnsafeRawBufferPointer,
        in payload: ProducerPayload,
        range: Range<Int>,
        token: UInt64
    ) throws {
        precondition(token <= Self.maxToken, "a token fits in 48 bits")
        precondition(range.lowerBound >= 0 && range.upperBound <= payload.bytes.count, "the value lies in the payload")
        if payload.slot == 0 && !context.hold(payload) {
            try payload.bytes.withUnsafeBytes { bytes in
                try produce(topic, partition: partition, key: key, value: UnsafeRawBufferPointer(rebasing: bytes[range]), token: token)
            }
            return
        }
        let value = range.isEmpty ? UnsafeRawPointer(emptyPayload) : payload.base! + range.lowerBound
        try enqueue(topic, partition: partition, flags: 0, value: UnsafeMutableRawPointer(mutating: value), count: range.count,
                    key: key, opaque: UInt64(payload.slot) << 48 | token)
        payload.outstanding += 1
    }

    /// Ends producing from `payload`: it is released (`onPayloadReleased`) once its messages are all reported,
    /// which may be at once.
    public func release(_ payload: ProducerPayload) {
        context.payloadDone(payload)
    }

    /// Enqueues a message with optional headers and timestamp (ms); copies everything. For tests and
    /// tools: it allocates per call. `headers` are written in order; a name may repeat.
    ///
    /// Uses `rd_kafka_produceva` with an application-owned header list (`RD_KAFKA_VTYPE_HEADERS`),
    /// which avoids librdkafka 2.0.2's double free (#4627, only with `RD_KAFKA_VTYPE_HEADER`):
    /// librdkafka owns the list on success, we destroy it on failure.
    ///
    /// Blocks while the queue is full: call from a dedicated thread.
    public func produce(
        topicName: String,
        partition: Int32? = nil,
        key: [UInt8],
        value: [UInt8],
        headers: [(String, [UInt8])] = [],
        timestamp: Int64? = nil,
        token: UInt64
    ) throws {
        precondition(token <= Self.maxToken, "a token fits in 48 bits")
        let topic = try self.topic(topicName)
        var headerList: OpaquePointer?
        if !headers.isEmpty {
            headerList = rd_kafka_headers_new(headers.count)
            for (name, bytes) in headers {
                let err = bytes.withUnsafeBytes { buffer in
                    rd_kafka_header_add(headerList, name, -1, buffer.baseAddress ?? UnsafeRawPointer(emptyPayload), buffer.count)
                }
                if err != RD_KAFKA_RESP_ERR_NO_ERROR {
                    rd_kafka_headers_destroy(headerList)
                    throw KafkaError(err, "add header '\(name)' for topic '\(topicName)'")
                }
            }
        }
        try key.withUnsafeBytes { keyBytes in
            try value.withUnsafeBytes { valueBytes in
                var vus: [rd_kafka_vu_t] = []
                func add(_ type: rd_kafka_vtype_t, _ set: (inout rd_kafka_vu_t) -> Void) {
                    var vu = rd_kafka_vu_t()
                    vu.vtype = type
                    set(&vu)
                    vus.append(vu)
                }
                add(RD_KAFKA_VTYPE_RKT) { $0.u.rkt = topic.rkt }
                add(RD_KAFKA_VTYPE_PARTITION) { $0.u.i32 = partition ?? RD_KAFKA_PARTITION_UA }
                add(RD_KAFKA_VTYPE_MSGFLAGS) { $0.u.i = RD_KAFKA_MSG_F_COPY }
                if !keyBytes.isEmpty {
                    add(RD_KAFKA_VTYPE_KEY) {
                        $0.u.mem.ptr = UnsafeMutableRawPointer(mutating: keyBytes.baseAddress)
                        $0.u.mem.size = keyBytes.count
                    }
                }
                add(RD_KAFKA_VTYPE_VALUE) {
                    $0.u.mem.ptr = valueBytes.baseAddress.map { UnsafeMutableRawPointer(mutating: $0) } ?? emptyPayload
                    $0.u.mem.size = valueBytes.count
                }
                add(RD_KAFKA_VTYPE_OPAQUE) { $0.u.ptr = UnsafeMutableRawPointer(bitPattern: UInt(token)) }
                if let timestamp { add(RD_KAFKA_VTYPE_TIMESTAMP) { $0.u.i64 = timestamp } }
                if let headerList { add(RD_KAFKA_VTYPE_HEADERS) { $0.u.headers = headerList } }
                while true {
                    guard let error = rd_kafka_produceva(handle.rk, vus, vus.count) else {
                        return  // librdkafka now owns headerList
                    }
                    let err = rd_kafka_error_code(error)
                    rd_kafka_error_destroy(error)
                    guard err == RD_KAFKA_RESP_ERR__QUEUE_FULL else {
                        if let headerList { rd_kafka_headers_destroy(headerList) }  // still ours on failure
                        throw produceError(err, topic: topicName, partition: partition)
                    }
                    rd_kafka_poll(handle.rk, 10)
                }
            }
        }
    }

    /// Serves delivery reports and errors, waiting up to `timeout` for the first. Returns how many events were served.
    ///
    /// Blocks: call from a dedicated thread.
    @discardableResult
    public func poll(timeout: Duration = .zero) -> Int {
        Int(rd_kafka_poll(handle.rk, timeout.kafkaMilliseconds))
    }

    /// Sends everything queued and waits until every message has its delivery report (served
    /// through `onDelivery`) or `timeout` passes.
    ///
    /// - Throws: `KafkaError(.timedOut)` with the number still outstanding, or the fatal error.
    ///
    /// Blocks: call from a dedicated thread.
    public func flush(timeout: Duration) throws {
        let err = rd_kafka_flush(handle.rk, timeout.kafkaMilliseconds)
        if let fatal = raisedFatalError(handle.rk) { throw fatal }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(err, "flush: \(outstanding) message(s) still outstanding")
        }
    }

    /// The producer's `message.max.bytes` as configured (librdkafka's default 1,000,000): it refuses a
    /// message whose key, value and record framing pass it (MSG_SIZE_TOO_LARGE).
    public var maxMessageBytes: Int {
        var buffer = [CChar](repeating: 0, count: 32)
        var size = buffer.count
        guard let conf = rd_kafka_conf(handle.rk), rd_kafka_conf_get(conf, "message.max.bytes", &buffer, &size) == RD_KAFKA_CONF_OK,
              let value = Int(String(cString: buffer)) else { return 1_000_000 }
        return value
    }

    /// Messages and requests not yet delivered/reported (`rd_kafka_outq_len`).
    public var outstanding: Int { Int(rd_kafka_outq_len(handle.rk)) }

    /// The fatal error of this producer (e.g. idempotence guarantees lost), if one was raised: stop producing.
    public func fatalError() -> KafkaError? {
        raisedFatalError(handle.rk)
    }

    /// Partition count of `topic`, from a metadata request.
    ///
    /// Blocks: call from a dedicated thread.
    public func partitionCount(topic: String, timeout: Duration) throws -> Int {
        try handle.partitionCount(topic: topic, timeout: timeout)
    }

    /// Makes librdkafka raise a fatal error (`rd_kafka_test_fatal_error`), for tests of fatal-error
    /// handling only: the worker calls it for `TestFaults.fatalAfterRecords`.
    public func triggerFatalErrorForTesting(_ reason: String) {
        _ = rd_kafka_test_fatal_error(handle.rk, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, reason)
    }

    private func produceError(_ err: rd_kafka_resp_err_t, topic: String, partition: Int32?) -> KafkaError {
        // produceva reports the fatal error's own code, produce reports _FATAL: check the instance either way.
        if let fatal = raisedFatalError(handle.rk) { return fatal }
        let place = partition.map { "\(topic)[\($0)]" } ?? "topic '\(topic)'"
        return KafkaError(err, "produce to \(place)")
    }
}

/// Callback state of a producer.
final class ProducerContext: ClientContext {
    var onDelivery: ((UInt64, KafkaError?) -> Void)?
    var onRefused: ((UInt64, KafkaError, String, UnsafeRawBufferPointer) -> Void)?
    var onPayloadReleased: ((ProducerPayload) -> Void)?
    /// Payloads held by their slot (a message's opaque carries the slot above its token); slot 0 is "none".
    /// Here rather than in the producer: this context is released only after `rd_kafka_destroy` returned, so
    /// bytes librdkafka may still read stay alive until it is gone.
    private var payloads: [ProducerPayload?] = [nil]
    private var freeSlots: [Int] = []

    /// Gives `payload` a slot; false when every slot is taken (its values are then copied).
    func hold(_ payload: ProducerPayload) -> Bool {
        if let slot = freeSlots.popLast() {
            payloads[slot] = payload
            payload.slot = slot
        } else if payloads.count <= 0xFFFF {
            payload.slot = payloads.count
            payloads.append(payload)
        } else {
            return false
        }
        return true
    }

    /// One of the payload's holds is over (a message reported, or the producer's until `release`).
    func payloadDone(_ payload: ProducerPayload) {
        payload.outstanding -= 1
        guard payload.outstanding == 0 else { return }
        if payload.slot != 0 {
            payloads[payload.slot] = nil
            freeSlots.append(payload.slot)
            payload.slot = 0
        }
        onPayloadReleased?(payload)
    }

    /// The message with this slot was reported.
    func reported(slot: Int) {
        guard slot > 0, slot < payloads.count, let payload = payloads[slot] else { return }
        payloadDone(payload)
    }

    func deliveryFailed(token: UInt64, message: UnsafePointer<rd_kafka_message_t>) {
        let m = message.pointee
        let topic = m.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? "?"
        let place = m.partition >= 0 ? "\(topic)[\(m.partition)]" : "topic '\(topic)'"
        let error = KafkaError(m.err, "delivery to \(place) failed", code: m.err == RD_KAFKA_RESP_ERR__FATAL ? .fatal : .delivery)
        logger.debug("kafka producer: \(error)")
        if error.isPermanentForMessage, let onRefused {
            onRefused(token, error, topic, UnsafeRawBufferPointer(start: m.payload, count: m.payload == nil ? 0 : m.len))
        }
        onDelivery?(token, error)
    }
}

/// Delivery reports; served inside rd_kafka_poll/rd_kafka_flush on the calling thread.
private func producerDeliveryCallback(
    _ rk: OpaquePointer?,
    _ message: UnsafePointer<rd_kafka_message_t>?,
    _ opaque: UnsafeMutableRawPointer?
) {
    guard let message, let opaque else { return }
    // Unretained: the opaque is the producer's context, alive until after rd_kafka_destroy (see KafkaClientHandle).
    let context = Unmanaged<ProducerContext>.fromOpaque(opaque).takeUnretainedValue()
    let opaqueBits = UInt64(UInt(bitPattern: message.pointee._private))
    let token = opaqueBits & KafkaProducer.maxToken
    if message.pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR {
        context.onDelivery?(token, nil)
    } else {
        context.deliveryFailed(token: token, message: message)
    }
    // After the report: `onRefused` may still read the value in the payload.
    context.reported(slot: Int(opaqueBits >> 48))
}
