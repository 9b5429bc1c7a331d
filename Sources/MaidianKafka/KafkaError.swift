import CRdKafka

/// The one error type of `MaidianKafka`.
///
/// `message` says what failed and where (topic/partition, property, broker);
/// `rdkafkaCode` carries librdkafka's `rd_kafka_resp_err_t` when there is one.
public struct KafkaError: Error, CustomStringConvertible {
    /// Broad category, for deciding what to do (retry, stop, report).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// Stable name of the category, e.g. `"brokerTransport"`.
        public let name: String
        private init(_ name: String) { self.name = name }

        /// Brokers unreachable or connection lost; librdkafka retries by itself.
        public static let brokerTransport = Code("brokerTransport")
        /// The client instance is unusable (e.g. idempotent producer sequence lost): stop, do not commit.
        public static let fatal = Code("fatal")
        /// A configuration property was rejected.
        public static let config = Code("config")
        /// A produced message was not delivered.
        public static let delivery = Code("delivery")
        /// The call does not fit the client's state (closed, not assigned, ...).
        public static let state = Code("state")
        /// A blocking call ran out of time.
        public static let timedOut = Code("timedOut")
        /// The producer queue is full.
        public static let queueFull = Code("queueFull")
        /// The topic or partition does not exist.
        public static let unknownTopicOrPartition = Code("unknownTopicOrPartition")
        /// A bad argument was passed.
        public static let invalidArgument = Code("invalidArgument")
        /// An error reported by the consumer while fetching.
        public static let consume = Code("consume")
        /// Offset commit failed.
        public static let commit = Code("commit")
        /// Any other broker or client error; see `rdkafkaCode`.
        public static let other = Code("other")

        /// The category's name.
        public var description: String { name }
    }

    /// Category.
    public var code: Code
    /// What failed and where.
    public var message: String
    /// A lower-level cause, if any.
    public var underlying: (any Error)?
    /// librdkafka's `rd_kafka_resp_err_t` value, if the error came from librdkafka.
    public var rdkafkaCode: Int32?

    /// Creates an error.
    public init(_ code: Code, _ message: String, rdkafkaCode: Int32? = nil, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.rdkafkaCode = rdkafkaCode
        self.underlying = underlying
    }

    /// librdkafka's symbolic name of `rdkafkaCode` (e.g. `_PARTITION_EOF`, `TOPIC_AUTHORIZATION_FAILED`).
    public var rdkafkaName: String? {
        guard let rdkafkaCode else { return nil }
        return String(cString: rd_kafka_err2name(rd_kafka_resp_err_t(rdkafkaCode)))
    }

    /// Whether Kafka refused this one message for good, for what it is (too large, a corrupt or invalid
    /// record), so that retrying or stopping cannot help and the worker goes on without it. Errors of a
    /// whole topic or of the connection (authorization, unknown topic, timeouts) are not: the worker stops.
    public var isPermanentForMessage: Bool {
        guard let rdkafkaCode else { return false }
        switch rd_kafka_resp_err_t(rdkafkaCode) {
        case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, RD_KAFKA_RESP_ERR_INVALID_MSG, RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE,
             RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE, RD_KAFKA_RESP_ERR_INVALID_RECORD, RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP:
            return true
        default:
            return false
        }
    }

    /// `kafka <code> error: <message> [<rdkafka name> (<code>)]`: words for a person reading a log, no
    /// Swift type names.
    public var description: String {
        var text = "kafka \(code) error: \(message)"
        if let rdkafkaCode, let name = rdkafkaName { text += " [\(name) (\(rdkafkaCode))]" }
        if let underlying { text += " (caused by: \(underlying))" }
        return text
    }
}

extension KafkaError {
    /// Builds an error from a librdkafka code; `code` defaults to the category of `err`.
    init(_ err: rd_kafka_resp_err_t, _ what: String, code: Code? = nil) {
        let reason = String(cString: rd_kafka_err2str(err))
        self.init(code ?? Code(err), "\(what): \(reason)", rdkafkaCode: err.rawValue)
    }

    /// Builds an error from a `rd_kafka_error_t` and destroys it.
    init(consuming error: OpaquePointer, _ what: String, code: Code? = nil) {
        let err = rd_kafka_error_code(error)
        let reason = String(cString: rd_kafka_error_string(error))
        let fatal = rd_kafka_error_is_fatal(error) != 0
        rd_kafka_error_destroy(error)
        self.init(fatal ? .fatal : (code ?? Code(err)), "\(what): \(reason)", rdkafkaCode: err.rawValue)
    }
}

extension KafkaError.Code {
    /// Category of a librdkafka error code.
    init(_ err: rd_kafka_resp_err_t) {
        switch err {
        case RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__RESOLVE,
             RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
            self = .brokerTransport
        case RD_KAFKA_RESP_ERR__FATAL: self = .fatal
        case RD_KAFKA_RESP_ERR__TIMED_OUT, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
            self = .timedOut
        case RD_KAFKA_RESP_ERR__QUEUE_FULL: self = .queueFull
        case RD_KAFKA_RESP_ERR__STATE, RD_KAFKA_RESP_ERR__DESTROY: self = .state
        case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC, RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION,
             RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
            self = .unknownTopicOrPartition
        case RD_KAFKA_RESP_ERR__INVALID_ARG, RD_KAFKA_RESP_ERR__CONFLICT, RD_KAFKA_RESP_ERR__INVALID_TYPE:
            self = .invalidArgument
        default: self = .other
        }
    }
}
