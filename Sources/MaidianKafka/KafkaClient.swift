import CRdKafka
import Logging

/// State the C callbacks of one client reach through the handle's opaque.
///
/// Threading: `logger` is immutable and is the only member the log callback touches (it runs on
/// librdkafka's own threads). Everything else is touched only by callbacks librdkafka serves
/// inside poll/consume/flush/close, i.e. on the thread that owns the client.
class ClientContext {
    let logger: Logger
    /// What the client is, for messages ("consumer", "producer", "mock cluster").
    let role: String
    /// Non-fatal client-level errors (broker down, resolve failures, ...).
    var onError: ((KafkaError) -> Void)?
    /// The latest statistics report (with `statistics.interval.ms` > 0); thread-safe.
    let statistics = KafkaStatisticsSource()

    init(logger: Logger, role: String) {
        self.logger = logger
        self.role = role
    }

    /// Called by the error callback, on the polling thread.
    func clientError(_ err: rd_kafka_resp_err_t, reason: String, rk: OpaquePointer) {
        if err == RD_KAFKA_RESP_ERR__FATAL {
            // The fatal cause is kept by librdkafka; poll()/produce() read it with rd_kafka_fatal_error.
            let fatal = raisedFatalError(rk) ?? KafkaError(.fatal, "\(role): \(reason)", rdkafkaCode: err.rawValue)
            logger.error("kafka \(role) fatal error: \(fatal)")
            onError?(fatal)
            return
        }
        let error = KafkaError(Code(err), "\(role): \(reason)", rdkafkaCode: err.rawValue)
        // Transport errors are routine (librdkafka reconnects by itself): warning, not error.
        if error.code == .brokerTransport {
            logger.warning("kafka \(error)")
        } else {
            logger.error("kafka \(error)")
        }
        onError?(error)
    }

    typealias Code = KafkaError.Code
}

/// The fatal error of a client instance, if one was raised.
func raisedFatalError(_ rk: OpaquePointer) -> KafkaError? {
    var buffer = [CChar](repeating: 0, count: 512)
    let err = rd_kafka_fatal_error(rk, &buffer, buffer.count)
    guard err != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
    return KafkaError(.fatal, "fatal error: \(cString(buffer))", rdkafkaCode: err.rawValue)
}

/// A String from a NUL-terminated char buffer.
func cString(_ buffer: [CChar]) -> String {
    buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

/// Owns one `rd_kafka_t` and the context its callbacks use.
///
/// `context` is a stored property, so it is released only after `deinit` has returned from
/// `rd_kafka_destroy`: no callback can see a dangling opaque. Topic handles keep this object alive.
final class KafkaClientHandle {
    let rk: OpaquePointer
    let context: ClientContext

    /// Creates the client. `configure` may add callbacks to the conf before the instance is created.
    init(
        type: rd_kafka_type_t,
        config: [String: String],
        context: ClientContext,
        configure: (OpaquePointer) -> Void = { _ in }
    ) throws {
        let conf = rd_kafka_conf_new()!
        var errstr = [CChar](repeating: 0, count: 512)
        for (key, value) in config.sorted(by: { $0.key < $1.key }) {
            if rd_kafka_conf_set(conf, key, value, &errstr, errstr.count) != RD_KAFKA_CONF_OK {
                rd_kafka_conf_destroy(conf)
                throw KafkaError(.config, "\(context.role) property '\(key)': \(cString(errstr))")
            }
        }
        rd_kafka_conf_set_log_cb(conf, clientLogCallback)
        rd_kafka_conf_set_error_cb(conf, clientErrorCallback)
        rd_kafka_conf_set_stats_cb(conf, clientStatsCallback)
        configure(conf)
        // Unretained: this handle holds `context` strongly and destroys the rd_kafka_t before releasing it.
        rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(context).toOpaque())
        guard let rk = rd_kafka_new(type, conf, &errstr, errstr.count) else {
            rd_kafka_conf_destroy(conf)  // rd_kafka_new takes the conf only on success
            throw KafkaError(.config, "creating kafka \(context.role) failed: \(cString(errstr))")
        }
        self.rk = rk
        self.context = context
    }

    /// Flags for `rd_kafka_destroy_flags` (e.g. `RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE`).
    var destroyFlags: Int32 = 0

    deinit {
        rd_kafka_destroy_flags(rk, destroyFlags)
    }

    /// Partition count of `topic` from a metadata request. Blocks.
    func partitionCount(topic: String, timeout: Duration) throws -> Int {
        guard let rkt = rd_kafka_topic_new(rk, topic, nil) else {
            throw KafkaError(rd_kafka_last_error(), "partitionCount: topic handle for '\(topic)'")
        }
        defer { rd_kafka_topic_destroy(rkt) }
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let err = rd_kafka_metadata(rk, 0, rkt, &metadata, timeout.kafkaMilliseconds)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
            throw KafkaError(err, "metadata request for topic '\(topic)'")
        }
        defer { rd_kafka_metadata_destroy(metadata) }
        let topics = UnsafeBufferPointer(start: metadata.pointee.topics, count: Int(metadata.pointee.topic_cnt))
        guard let entry = topics.first(where: { String(cString: $0.topic) == topic }) else {
            throw KafkaError(.unknownTopicOrPartition, "metadata for topic '\(topic)' is missing")
        }
        if entry.err != RD_KAFKA_RESP_ERR_NO_ERROR && entry.partition_cnt == 0 {
            throw KafkaError(entry.err, "metadata for topic '\(topic)'")
        }
        return Int(entry.partition_cnt)
    }
}

/// librdkafka log lines → swift-log. Runs on librdkafka's threads: touches only the immutable logger.
private func clientLogCallback(_ rk: OpaquePointer?, _ level: Int32, _ facility: UnsafePointer<CChar>?, _ line: UnsafePointer<CChar>?) {
    guard let rk, let opaque = rd_kafka_opaque(rk), let line else { return }
    let context = Unmanaged<ClientContext>.fromOpaque(opaque).takeUnretainedValue()
    let facilityName = facility.map { String(cString: $0) } ?? "-"
    var swiftLevel: Logger.Level
    switch level {  // syslog levels
    case ...3: swiftLevel = .error
    case 4: swiftLevel = .warning
    default: swiftLevel = .debug
    }
    // Connection failures (facility FAIL) also reach the error callback, which logs them: one line per fault.
    if facilityName == "FAIL" { swiftLevel = .debug }
    context.logger.log(
        level: swiftLevel,
        "rdkafka \(facilityName): \(String(cString: line))",
        metadata: ["kafka.client": "\(String(cString: rd_kafka_name(rk)))"]
    )
}

/// Client-level errors; served on the thread that polls the client.
private func clientErrorCallback(_ rk: OpaquePointer?, _ err: Int32, _ reason: UnsafePointer<CChar>?, _ opaque: UnsafeMutableRawPointer?) {
    guard let rk, let opaque else { return }
    let context = Unmanaged<ClientContext>.fromOpaque(opaque).takeUnretainedValue()
    context.clientError(rd_kafka_resp_err_t(err), reason: reason.map { String(cString: $0) } ?? "", rk: rk)
}

/// Statistics reports (`statistics.interval.ms`); served on the thread that polls the client. Only copies the
/// JSON (parsing happens when someone asks, see `KafkaStatisticsSource`). Returns 0: librdkafka frees `json`.
private func clientStatsCallback(
    _ rk: OpaquePointer?, _ json: UnsafeMutablePointer<CChar>?, _ length: Int, _ opaque: UnsafeMutableRawPointer?
) -> Int32 {
    guard let json, let opaque else { return 0 }
    let context = Unmanaged<ClientContext>.fromOpaque(opaque).takeUnretainedValue()
    context.statistics.store(UnsafeRawBufferPointer(start: json, count: length))
    return 0
}
