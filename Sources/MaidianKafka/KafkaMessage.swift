import CRdKafka

/// A consumed message, viewed in place in librdkafka's buffers.
///
/// Valid only inside the `KafkaConsumer.poll` closure it is passed to: `key`, `value` and header
/// buffers point into memory freed when the closure returns. Copy what must outlive it.
public struct KafkaMessage {
    /// Topic name.
    public var topic: String
    /// Partition.
    public var partition: Int32
    /// Offset of this message. The offset to store/commit after processing it is `offset + 1`.
    public var offset: Int64
    /// Message timestamp (ms since the epoch), create or log-append time; nil when the broker has none.
    public var timestamp: Int64?
    /// Key bytes; empty if the message has no key.
    public var key: UnsafeRawBufferPointer
    /// Whether the message has a key (a null key and an empty key both give an empty `key`).
    public var hasKey: Bool
    /// Value bytes; empty if the message has no value (tombstone).
    public var value: UnsafeRawBufferPointer

    /// The librdkafka message; owned by the consumer's batch.
    let raw: UnsafeMutablePointer<rd_kafka_message_t>

    /// The topic-partition of this message.
    public var topicPartition: TopicPartition { TopicPartition(topic: topic, partition: partition) }

    init(raw: UnsafeMutablePointer<rd_kafka_message_t>, topic: String) {
        self.raw = raw
        self.topic = topic
        let m = raw.pointee
        partition = m.partition
        offset = m.offset
        var type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let ts = rd_kafka_message_timestamp(raw, &type)
        timestamp = type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : ts
        key = UnsafeRawBufferPointer(start: m.key, count: m.key != nil ? m.key_len : 0)
        hasKey = m.key != nil
        value = UnsafeRawBufferPointer(start: m.payload, count: m.payload != nil ? m.len : 0)
    }

    /// Parsed headers, or nil when the message has none. (librdkafka parses them on first use.)
    private var headers: OpaquePointer? {
        var headers: OpaquePointer?
        guard rd_kafka_message_headers(raw, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return headers
    }

    /// The value of the first header called `name` (case-sensitive); nil if there is none.
    /// A header with a null value gives an empty buffer. Valid only inside the poll closure.
    public func header(_ name: String) -> UnsafeRawBufferPointer? {
        header(KafkaHeaderName(name))
    }

    /// The value of the first header called `name`, as `header(_: String)`. For names looked up in every
    /// message: the C string is made once, where a `String` argument is converted (allocated) per call.
    public func header(_ name: KafkaHeaderName) -> UnsafeRawBufferPointer? {
        guard let headers else { return nil }
        var value: UnsafeRawPointer?
        var size = 0
        let err = name.cString.withUnsafeBufferPointer { rd_kafka_header_get(headers, 0, $0.baseAddress, &value, &size) }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return UnsafeRawBufferPointer(start: value, count: value != nil ? size : 0)
    }

    /// Calls `body` with each header's name and value, in message order. Values are valid only inside the poll closure.
    public func forEachHeader(_ body: (String, UnsafeRawBufferPointer) throws -> Void) rethrows {
        guard let headers else { return }
        var index = 0
        var name: UnsafePointer<CChar>?
        var value: UnsafeRawPointer?
        var size = 0
        while rd_kafka_header_get_all(headers, index, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
            try body(name.map { String(cString: $0) } ?? "", UnsafeRawBufferPointer(start: value, count: value != nil ? size : 0))
            index += 1
        }
    }
}

/// A header name made ready for `KafkaMessage.header(_:)` once: its NUL-terminated bytes.
public struct KafkaHeaderName: Sendable {
    let cString: ContiguousArray<CChar>

    /// The header called `name` (case-sensitive).
    public init(_ name: String) { cString = name.utf8CString }
}
