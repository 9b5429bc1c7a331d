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

/// One zstd frame made of RLE blocks (byte `a`): a 4-byte declared content size that need not match the blocks, and
/// the window `1 << windowLog`. Built by hand so that the test controls exactly what the header says.
func rleFrame(windowLog: Int, declared: UInt32, blocks: [Int]) -> [UInt8] {
    var f: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD, 0x80, UInt8((windowLog - 10) << 3)]
    f += withUnsafeBytes(of: declared.littleEndian) { Array($0) }
    for (i, size) in blocks.enumerated() {
        let header = UInt32(i == blocks.count - 1 ? 1 : 0) | (1 << 1) | (UInt32(size) << 3)
        f += [UInt8(header & 0xFF), UInt8((header >> 8) & 0xFF), UInt8(header >> 16), 0x61]
    }
    return f
}
