@testable import MaidianEvents

/// A batch decoded from one record (topic `raw`, offset 0) holding `events` (JSON objects).
func decodedBatch(_ events: [String], partition: Int32 = 0) -> EventBatch {
    var batch = EventBatch()
    let t = batch.topicIndex("raw")
    let value = Array(("[" + events.joined(separator: ",") + "]").utf8)
    value.withUnsafeBytes { v in
        batch.appendRecord(topic: t, partition: partition, offset: 0, timestamp: 0, key: nil, value: v, ip: nil, receivedAt: nil, ua: nil, project: nil)
    }
    RecordDecoder().decodeAll(&batch)
    return batch
}
