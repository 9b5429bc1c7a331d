import CRdKafka

extension KafkaConsumer {
    /// Commits the given next-offsets explicitly and waits for the result.
    ///
    /// Unlike `commitSync()` this does not depend on what is stored or assigned: any current member of the
    /// group may commit any partition's offset. A worker uses it to commit progress it made on partitions a
    /// rebalance took away while the group was rebalancing (the broker then answers
    /// `REBALANCE_IN_PROGRESS`, see `isRebalanceError`).
    ///
    /// Blocks: call from a dedicated thread.
    public func commitSync(offsets: [TopicPartition: Int64], timeout: Duration = .seconds(10)) throws {
        try commitSync(offsets: offsets, metadata: [:], timeout: timeout)
    }

    func commitSync(offsets: [TopicPartition: Int64], metadata: [TopicPartition: String], timeout: Duration) throws {
        if offsets.isEmpty { return }
        let list = PartitionList(offsets.keys, offsets: offsets)
        for (tp, text) in metadata { list.setMetadata(tp, text) }
        // The result comes back on a private queue so the wait can time out: a plain synchronous commit
        // can wait indefinitely while the group is between generations.
        guard let queue = rd_kafka_queue_new(handle.rk) else { throw KafkaError(.state, "commit: cannot create a result queue") }
        defer { rd_kafka_queue_destroy(queue) }
        let err = rd_kafka_commit_queue(handle.rk, list.pointer, queue, nil, nil)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(err, "commit offsets \(describe(offsets))", code: err == RD_KAFKA_RESP_ERR__FATAL ? .fatal : .commit)
        }
        let deadline = ContinuousClock.now + timeout
        while true {
            let left = deadline - ContinuousClock.now
            if left <= .zero { throw KafkaError(.timedOut, "commit offsets \(describe(offsets)): no answer within \(timeout)") }
            guard let event = rd_kafka_queue_poll(queue, min(left.kafkaMilliseconds, 100)) else { continue }
            defer { rd_kafka_event_destroy(event) }
            guard rd_kafka_event_type(event) == RD_KAFKA_EVENT_OFFSET_COMMIT else { continue }
            let e = rd_kafka_event_error(event)
            if e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR__NO_OFFSET {
                throw KafkaError(e, "commit offsets \(describe(offsets))", code: e == RD_KAFKA_RESP_ERR__FATAL ? .fatal : .commit)
            }
            if let result = rd_kafka_event_topic_partition_list(event) {
                let elements = UnsafeBufferPointer(start: result.pointee.elems, count: Int(result.pointee.cnt))
                for el in elements where el.err != RD_KAFKA_RESP_ERR_NO_ERROR {
                    let tp = TopicPartition(topic: String(cString: el.topic), partition: el.partition)
                    throw KafkaError(el.err, "commit offset \(el.offset) of \(tp)", code: .commit)
                }
            }
            return
        }
    }

    private func describe(_ offsets: [TopicPartition: Int64]) -> String {
        offsets.sorted { $0.key.partition < $1.key.partition }.map { "\($0.key)@\($0.value)" }.joined(separator: ",")
    }
}

extension KafkaError {
    /// The group is rebalancing or this member's generation is stale: the commit can succeed once the
    /// member has rejoined (keep the offsets and retry after the next assignment).
    public var isRebalanceError: Bool {
        guard let c = rdkafkaCode else { return false }
        return c == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS.rawValue
            || c == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION.rawValue
            || c == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID.rawValue
    }
}

/// A committed offset with the metadata string committed beside it.
public struct CommittedOffset: Sendable, Equatable {
    /// The next offset to read.
    public var offset: Int64
    /// What the committer stored with it (empty when none).
    public var metadata: String
    /// `offset` (the next one to read) with `metadata` beside it.
    public init(offset: Int64, metadata: String) {
        self.offset = offset
        self.metadata = metadata
    }
}

extension KafkaConsumer {
    /// Commits next-offsets with a metadata string each (Kafka keeps it with the offset, atomically).
    ///
    /// Blocks: call from a dedicated thread.
    public func commitSync(offsets: [TopicPartition: CommittedOffset], timeout: Duration = .seconds(10)) throws {
        try commitSync(offsets: offsets.mapValues(\.offset), metadata: offsets.compactMapValues { $0.metadata.isEmpty ? nil : $0.metadata }, timeout: timeout)
    }

    /// The group's committed offsets and their metadata; partitions without a committed offset are absent.
    ///
    /// Blocks: call from a dedicated thread.
    public func committedWithMetadata(_ tps: [TopicPartition], timeout: Duration) throws -> [TopicPartition: CommittedOffset] {
        if tps.isEmpty { return [:] }
        let list = PartitionList(tps)
        let err = rd_kafka_committed(handle.rk, list.pointer, timeout.kafkaMilliseconds)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err, "fetch committed offsets for \(tps)") }
        var result: [TopicPartition: CommittedOffset] = [:]
        for element in list.elements {
            let tp = TopicPartition(topic: String(cString: element.topic), partition: element.partition)
            if element.err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(element.err, "committed offset of \(tp)") }
            guard element.offset >= 0 else { continue }
            var text = ""
            if let m = element.metadata, element.metadata_size > 0 {
                text = String(decoding: UnsafeRawBufferPointer(start: m, count: element.metadata_size), as: UTF8.self)
            }
            result[tp] = CommittedOffset(offset: element.offset, metadata: text)
        }
        return result
    }
}
