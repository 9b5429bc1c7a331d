import CRdKafka
#if canImport(Glibc)
import Glibc
#endif

/// A partition of a topic.
public struct TopicPartition: Hashable, Sendable, CustomStringConvertible {
    /// Topic name.
    public var topic: String
    /// Partition number.
    public var partition: Int32

    /// Creates a topic-partition.
    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    /// `topic[partition]`.
    public var description: String { "\(topic)[\(partition)]" }
}

/// A change of a group consumer's assignment, reported through `KafkaConsumer.onRebalance`.
///
/// With the eager protocol (`range`, `roundrobin`) `revoked`/`lost` list the whole assignment and
/// `assigned` the whole new one; with `cooperative-sticky` they list only the partitions that change.
public enum RebalanceEvent: Sendable, Equatable {
    /// The partitions are about to be consumed by this member.
    case assigned([TopicPartition])
    /// The partitions are about to be taken away in an orderly rebalance: offsets may still be committed.
    case revoked([TopicPartition])
    /// The partitions were already taken away (session lost): another member may own them; commits will fail.
    case lost([TopicPartition])
}

/// The librdkafka linked into the process.
public enum KafkaVersion {
    /// librdkafka's version string, e.g. `"2.0.2"`.
    public static var string: String { String(cString: rd_kafka_version_str()) }
    /// librdkafka's version as a hex number (`0xMMmmrrxx`).
    public static var number: Int { Int(rd_kafka_version()) }
}

// MARK: - Internal helpers

extension Duration {
    /// Milliseconds for a librdkafka timeout, clamped to 0...Int32.max (rounded up so 0.5 ms is not 0).
    var kafkaMilliseconds: Int32 {
        let (seconds, attoseconds) = components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        let ms = seconds.multipliedReportingOverflow(by: 1000)
        if ms.overflow { return Int32.max }
        let extra = (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: ms.partialValue + extra)
    }
}

/// Owns one `rd_kafka_topic_partition_list_t`.
final class PartitionList {
    let pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    /// Takes ownership of `pointer`.
    init(owning pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) {
        self.pointer = pointer
    }

    /// A list of `partitions` with `offsets[tp]` (or `RD_KAFKA_OFFSET_INVALID`).
    convenience init<C: Collection>(_ partitions: C, offsets: [TopicPartition: Int64] = [:]) where C.Element == TopicPartition {
        self.init(owning: rd_kafka_topic_partition_list_new(Int32(clamping: max(partitions.count, 1))))
        for tp in partitions {
            let element = rd_kafka_topic_partition_list_add(pointer, tp.topic, tp.partition)!
            element.pointee.offset = offsets[tp] ?? Int64(RD_KAFKA_OFFSET_INVALID)
        }
    }

    /// Sets the commit metadata of `tp` (librdkafka copies and frees it with the list).
    func setMetadata(_ tp: TopicPartition, _ text: String) {
        for i in elements.indices where elements[i].partition == tp.partition && String(cString: elements[i].topic) == tp.topic {
            let bytes = Array(text.utf8)
            let copy = malloc(max(bytes.count, 1))!
            bytes.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
            if let old = elements[i].metadata { free(old) }
            elements[i].metadata = copy
            elements[i].metadata_size = bytes.count
        }
    }

    /// A copy of a list librdkafka still owns.
    static func copy(of list: UnsafePointer<rd_kafka_topic_partition_list_t>) -> PartitionList {
        PartitionList(owning: rd_kafka_topic_partition_list_copy(list))
    }

    deinit { rd_kafka_topic_partition_list_destroy(pointer) }

    var elements: UnsafeMutableBufferPointer<rd_kafka_topic_partition_t> {
        UnsafeMutableBufferPointer(start: pointer.pointee.elems, count: Int(pointer.pointee.cnt))
    }

    var topicPartitions: [TopicPartition] { Self.topicPartitions(pointer) }

    static func topicPartitions(_ list: UnsafePointer<rd_kafka_topic_partition_list_t>?) -> [TopicPartition] {
        guard let list, list.pointee.cnt > 0, let elems = list.pointee.elems else { return [] }
        return UnsafeBufferPointer(start: elems, count: Int(list.pointee.cnt)).map {
            TopicPartition(topic: String(cString: $0.topic), partition: $0.partition)
        }
    }
}
