import CRdKafka
import Logging

/// librdkafka's in-process mock Kafka cluster, for tests and demos.
///
/// Brokers listen on 127.0.0.1 (random ports), ids 1...brokers; any client on the machine can
/// connect. The cluster lives as long as this object. See the mock's limits in KAFKA-NOTES.md
/// (5 MiB per partition, no admin API, same assignment strategy for all group members).
///
/// `@unchecked Sendable`: its state is immutable after init, the mock's fault-injection calls are
/// thread-safe (each is a request to the mock cluster's own thread that waits for the reply), and
/// the client handle that owns the cluster is never polled or otherwise used.
public final class EmbeddedBroker: @unchecked Sendable {
    /// The client instance the cluster is attached to; destroyed after the cluster.
    private let handle: KafkaClientHandle
    private let cluster: OpaquePointer
    /// `host:port,...` of the brokers, for `bootstrap.servers`.
    public let bootstrapServers: String
    /// Number of brokers (ids 1...brokerCount).
    public let brokerCount: Int

    /// Starts a mock cluster with `brokers` brokers. Its log lines go to `logger`.
    public init(brokers: Int = 1, logger: Logger) throws {
        let context = ClientContext(logger: logger, role: "mock cluster")
        handle = try KafkaClientHandle(
            type: RD_KAFKA_PRODUCER,
            // The owning client connects nowhere: silence its "no bootstrap.servers" chatter.
            config: ["log_level": "3"],
            context: context
        )
        guard let cluster = rd_kafka_mock_cluster_new(handle.rk, Int32(clamping: brokers)) else {
            throw KafkaError(.other, "could not start a mock cluster with \(brokers) broker(s)")
        }
        self.cluster = cluster
        self.brokerCount = brokers
        bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
    }

    deinit {
        // Before the owning rd_kafka_t (released right after this): the cluster uses it.
        rd_kafka_mock_cluster_destroy(cluster)
    }

    /// Creates a topic (the mock has no CreateTopics API). A topic first named by a client is
    /// otherwise auto-created with 4 partitions.
    public func createTopic(_ name: String, partitions: Int, replicationFactor: Int = 1) throws {
        try check(
            rd_kafka_mock_topic_create(cluster, name, Int32(clamping: partitions), Int32(clamping: replicationFactor)),
            "create topic '\(name)' with \(partitions) partition(s)"
        )
    }

    /// Disconnects broker `id` (-1: all) and refuses connections. Does not move partition leadership.
    public func setBrokerDown(_ id: Int32) throws {
        try check(rd_kafka_mock_broker_set_down(cluster, id), "set broker \(id) down")
    }

    /// Lets broker `id` (-1: all) accept connections again.
    public func setBrokerUp(_ id: Int32) throws {
        try check(rd_kafka_mock_broker_set_up(cluster, id), "set broker \(id) up")
    }

    /// Makes broker `brokerId` (-1: none) the leader of a partition.
    public func setPartitionLeader(topic: String, partition: Int32, brokerId: Int32) throws {
        try check(
            rd_kafka_mock_partition_set_leader(cluster, topic, partition, brokerId),
            "set leader of \(topic)[\(partition)] to broker \(brokerId)"
        )
    }

    /// Coordinator kinds for `setCoordinator`.
    public enum CoordinatorType: String, Sendable {
        case group
        case transaction
    }

    /// Makes broker `brokerId` the coordinator of a group or transactional id.
    public func setCoordinator(_ type: CoordinatorType, key: String, brokerId: Int32) throws {
        try check(
            rd_kafka_mock_coordinator_set(cluster, type.rawValue, key, brokerId),
            "set \(type.rawValue) coordinator of '\(key)' to broker \(brokerId)"
        )
    }

    /// Delays every response of broker `id` (-1: all) by `milliseconds`.
    public func setBrokerRTT(_ id: Int32, milliseconds: Int) throws {
        try check(rd_kafka_mock_broker_set_rtt(cluster, id, Int32(clamping: milliseconds)), "set RTT of broker \(id)")
    }

    /// Makes the next `errors.count` requests with `apiKey` (0 Produce, 1 Fetch, 8 OffsetCommit, ...)
    /// fail with these librdkafka error codes, in order. `-195` (`_TRANSPORT`) disconnects instead.
    public func pushRequestErrors(apiKey: Int16, errors: [Int32]) {
        let codes = errors.map { rd_kafka_resp_err_t($0) }
        codes.withUnsafeBufferPointer {
            rd_kafka_mock_push_request_errors_array(cluster, apiKey, $0.count, $0.baseAddress)
        }
    }

    /// Makes the next `errors.count` requests with `apiKey` that broker `brokerId` receives fail with these
    /// librdkafka error codes, in order; other brokers answer as usual. Errors meant for one client (a worker's
    /// producer) reach only it when its partitions' leader is a broker no other client sends that request to.
    public func pushRequestErrors(apiKey: Int16, errors: [Int32], brokerId: Int32) throws {
        let codes = errors.map { rd_kafka_resp_err_t($0) }
        try codes.withUnsafeBufferPointer {
            try check(maidian_mock_broker_push_request_errors(cluster, brokerId, apiKey, $0.count, $0.baseAddress),
                      "push \(errors.count) errors for API \(apiKey) onto broker \(brokerId)")
        }
    }

    /// Forgets errors pushed for `apiKey` and not used yet.
    public func clearRequestErrors(apiKey: Int16) {
        rd_kafka_mock_clear_request_errors(cluster, apiKey)
    }

    private func check(_ err: rd_kafka_resp_err_t, _ what: String) throws {
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err, "mock cluster: \(what)") }
    }
}
