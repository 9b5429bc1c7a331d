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
        let payload = value.baseAddress.map { UnsafeMutableRawPointer(mutating: $0) } ?? emptyPayload
        let keyPointer = key.isEmpty ? nil : key.baseAddress
        // The token travels as the message opaque's bit pattern: no per-message boxing.
        let opaque = UnsafeMutableRawPointer(bitPattern: UInt(token))
        while true {
            let rc = rd_kafka_produce(
                topic.rkt, partition ?? RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY,
                payload, value.count, keyPointer, key.isEmpty ? 0 : key.count, opaque
            )
            if rc == 0 { return }
            let err = rd_kafka_last_error()
            guard err == RD_KAFKA_RESP_ERR__QUEUE_FULL else {
                throw produceError(err, topic: topic.name, partition: partition)
            }
            rd_kafka_poll(handle.rk, 10)
        }
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
    let token = UInt64(UInt(bitPattern: message.pointee._private))
    if message.pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR {
        context.onDelivery?(token, nil)
    } else {
        context.deliveryFailed(token: token, message: message)
    }
}
