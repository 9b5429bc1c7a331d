import Logging
import MaidianKafka

/// Keeps every held partition read without gaps or repeats from its position: its state and the offsets
/// committed for it assume so. librdkafka 2.0.2's batch consume can skip or repeat messages when a
/// partition is paused and resumed meanwhile (fixed in 2.1.0), which every cooperative rebalance does to the
/// partitions a member keeps; and a batch fetched before a rebalance can hold records of a partition that
/// was assigned again since. Records already read are dropped; at a gap the partition's records are dropped
/// and it is sought back to its position. A gap seen again right after such a seek is real (offsets taken by
/// transaction markers) and accepted.
///
/// One per batch: `keep` each record in offset order per partition, then seek to `seeks`.
struct GapGuard {
    let books: PartitionBooks
    let topics: LaneTopics
    let logger: Logger
    /// Next offset expected per partition within this batch.
    private var next: [Slot: Int64] = [:]
    /// Partitions whose remaining records in this batch are dropped (a seek brings them again).
    private var broken = Set<Slot>()
    /// Where to seek the partitions with a gap.
    private(set) var seeks: [TopicPartition: Int64] = [:]

    init(books: PartitionBooks, topics: LaneTopics, logger: Logger) {
        self.books = books
        self.topics = topics
        self.logger = logger
    }

    /// Whether the record at `offset` of `s` is the next one to read.
    mutating func keep(_ s: Slot, offset: Int64) -> Bool {
        if broken.contains(s) { return false }
        let book = books[s.lane]
        guard let expected = next[s] ?? book[s.partition].position else {
            next[s] = offset + 1
            return true
        }
        if offset < expected { return false }  // read before
        if offset > expected {
            if let gap = book[s.partition].acceptedGap, gap == (expected, offset) {
                logger.warning("\(topics.topicPartition(s)): offsets \(expected)..<\(offset) do not exist (again after a seek): going on")
            } else {
                logger.warning("\(topics.topicPartition(s)): expected offset \(expected), got \(offset): reading it again from \(expected)")
                book[s.partition].acceptedGap = (expected, offset)
                seeks[topics.topicPartition(s)] = expected
                broken.insert(s)
                return false
            }
        }
        if let gap = book[s.partition].acceptedGap, offset >= gap.from { book[s.partition].acceptedGap = nil }
        next[s] = offset + 1
        return true
    }
}
