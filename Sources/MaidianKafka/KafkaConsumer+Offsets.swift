import CRdKafka

extension KafkaConsumer {
    /// Asks the partition leaders for the first offset whose record timestamp is at or after each given time
    /// (ms since the epoch): Kafka's ListOffsets by timestamp. A partition without such a record maps to nil.
    ///
    /// librdkafka's mock cluster does not implement the lookup: it answers nil for every partition. Use
    /// `firstOffset(atOrAfter:in:timeout:)`, which checks the answer and falls back to a search.
    ///
    /// Blocks: call from a dedicated thread.
    public func offsetsForTimes(_ times: [TopicPartition: Int64], timeout: Duration) throws -> [TopicPartition: Int64?] {
        try checkOpen("offsetsForTimes")
        guard !times.isEmpty else { return [:] }
        let list = PartitionList(times.keys, offsets: times)
        let err = rd_kafka_offsets_for_times(handle.rk, list.pointer, timeout.kafkaMilliseconds)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(err, "look up offsets by time for \(times.keys.sorted { $0.partition < $1.partition })")
        }
        var result: [TopicPartition: Int64?] = [:]
        for element in list.elements {
            let tp = TopicPartition(topic: String(cString: element.topic), partition: element.partition)
            guard element.err == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(element.err, "look up offset by time for \(tp)")
            }
            result[tp] = element.offset >= 0 ? element.offset : nil
        }
        return result
    }

    /// How `firstOffset(atOrAfter:in:timeout:)` found its answer.
    public enum OffsetLookup: String, Sendable {
        /// The broker's ListOffsets by timestamp.
        case broker
        /// A binary search over record timestamps (the broker could not answer).
        case search
        /// No lookup needed: the partition is empty, or every record is older than the time.
        case bounds
    }

    /// The first offset of `tp` whose record timestamp is at or after `timestamp` (ms), or the high
    /// watermark when there is none: where to start reading "from `timestamp`". See `firstOffsets`.
    ///
    /// Blocks: call from a dedicated thread.
    public func firstOffset(
        atOrAfter timestamp: Int64, in tp: TopicPartition, timeout: Duration
    ) throws -> (offset: Int64, lookup: OffsetLookup) {
        try firstOffsets(atOrAfter: timestamp, in: [tp], timeout: timeout)[tp]!
    }

    /// For each partition, the first offset whose record timestamp is at or after `timestamp` (ms), or the
    /// high watermark when there is none.
    ///
    /// Asks the brokers first (`offsetsForTimes`). A broker answer of "none" is checked against the
    /// partition's last record: when that record is not older than `timestamp` the broker cannot look up by
    /// time (librdkafka's mock cluster), and the offset is found by a binary search that reads records
    /// (all partitions' searches advance together, one fetch per step). The search assumes timestamps do
    /// not decrease along a partition (true for broker LogAppendTime and for producers that send in time
    /// order); otherwise it finds some offset where they cross `timestamp`.
    ///
    /// Uses `assign()`: call it on a consumer that is not subscribed to a group, preferably one configured
    /// for small fetches (`fetch.message.max.bytes`, `queued.min.messages`), since each step fetches.
    ///
    /// Blocks: call from a dedicated thread.
    public func firstOffsets(
        atOrAfter timestamp: Int64, in tps: [TopicPartition], timeout: Duration
    ) throws -> [TopicPartition: (offset: Int64, lookup: OffsetLookup)] {
        let began = ContinuousClock.now
        var steps = 0
        var result: [TopicPartition: (offset: Int64, lookup: OffsetLookup)] = [:]
        var bounds: [TopicPartition: (low: Int64, high: Int64)] = [:]
        for tp in tps {
            let w = try watermarks(tp, timeout: timeout)
            if w.low >= w.high { result[tp] = (w.high, .bounds) } else { bounds[tp] = w }
        }
        if bounds.isEmpty { return result }
        let answers = try offsetsForTimes(bounds.mapValues { _ in timestamp }, timeout: timeout)
        for (tp, answer) in answers {
            if let offset = answer, let b = bounds[tp] {
                result[tp] = (min(max(offset, b.low), b.high), .broker)
                bounds[tp] = nil
            }
        }
        if bounds.isEmpty { return result }
        defer { try? assign([:]) }
        // "None" is right when the newest record is older than `timestamp`.
        let lasts = try records(atOrAfter: bounds.mapValues { $0.high - 1 }, timeout: timeout)
        // Binary search for the first offset whose record's timestamp is >= timestamp; `hi` always qualifies.
        var search: [TopicPartition: (lo: Int64, hi: Int64)] = [:]
        for (tp, b) in bounds {
            if let last = lasts[tp]?.last, last.timestamp >= timestamp {
                search[tp] = (b.low, b.high - 1)
            } else {
                result[tp] = (b.high, .bounds)
            }
        }
        // Each step reads the records one fetch returns from `mid` on (consecutive offsets), which often
        // ends a search early.
        while true {
            let open = search.filter { $0.value.lo < $0.value.hi }
            if open.isEmpty { break }
            let mids = open.mapValues { $0.lo + ($0.hi - $0.lo) / 2 }
            let runs = try records(atOrAfter: mids, timeout: timeout)
            steps += 1
            for (tp, mid) in mids {
                let run = runs[tp]!
                var (lo, hi) = search[tp]!
                if let i = run.firstIndex(where: { $0.timestamp >= timestamp }) {
                    if i == 0 {
                        hi = min(hi, mid)  // no record in mid..<run[0].offset: starting at mid reads run[0] first
                    } else {
                        // run[i - 1] is older and nothing lies between the two: run[i] is the answer.
                        hi = min(hi, run[i].offset)
                        lo = hi
                    }
                } else {
                    lo = run.last!.offset + 1
                }
                search[tp] = (lo, hi)
            }
        }
        for (tp, range) in search { result[tp] = (range.hi, .search) }
        logger.debug("offsets at or after \(timestamp) of \(search.count) partitions found by searching: \(steps) steps in \(ContinuousClock.now - began)")
        return result
    }

    /// For each partition, offsets and timestamps (ms; -1 when a record has none) of consecutive records
    /// from the first record at or after the given offset; never empty.
    private func records(
        atOrAfter offsets: [TopicPartition: Int64], timeout: Duration
    ) throws -> [TopicPartition: [(offset: Int64, timestamp: Int64)]] {
        try assign(offsets)
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var found: [TopicPartition: [(offset: Int64, timestamp: Int64)]] = [:]
        while found.count < offsets.count {
            if clock.now >= deadline {
                let missing = offsets.keys.filter { found[$0] == nil }.map { "\($0)@\(offsets[$0]!)" }
                throw KafkaError(.timedOut, "no record at or after \(missing.joined(separator: ", ")) within \(timeout)")
            }
            _ = try poll(maxMessages: 1000, timeout: .milliseconds(100)) { m in
                let tp = m.topicPartition
                guard let start = offsets[tp], m.offset >= start else { return }
                // Consecutive only: a gap (compaction, transaction markers) ends the run.
                if let prev = found[tp]?.last, m.offset != prev.offset + 1 { return }
                found[tp, default: []].append((m.offset, m.timestamp ?? -1))
            }
        }
        return found
    }

    /// Stops fetching from these partitions (their position is kept) until `resume`.
    public func pause(_ tps: [TopicPartition]) throws {
        try checkOpen("pause")
        try check(tps.isEmpty ? RD_KAFKA_RESP_ERR_NO_ERROR : rd_kafka_pause_partitions(handle.rk, PartitionList(tps).pointer), "pause \(tps)")
    }

    /// Fetches from paused partitions again.
    public func resume(_ tps: [TopicPartition]) throws {
        try checkOpen("resume")
        try check(tps.isEmpty ? RD_KAFKA_RESP_ERR_NO_ERROR : rd_kafka_resume_partitions(handle.rk, PartitionList(tps).pointer), "resume \(tps)")
    }

    private func check(_ err: rd_kafka_resp_err_t, _ what: @autoclosure () -> String) throws {
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err, what()) }
    }
}
