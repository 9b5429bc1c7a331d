import MaidianEvents
import MaidianRecording

extension Bench {
    /// One record of a recording streamed into batches (`Bench.replay`, `maidian rules test`), with its
    /// partition and offset as a keyed producer would give them.
    public struct SourceRecord: Sendable {
        var partition: Int32
        var offset: Int64
        var timestamp: Int64
        var key: [UInt8]?
        var value: [UInt8]
        var ip: [UInt8]?
        var receivedAt: [UInt8]?
        var ua: [UInt8]?
        var project: [UInt8]?
    }

    /// The records of a recording as separate values (tests that cut and replay them), partitioned like
    /// `prepare`.
    public static func sourceRecords(_ records: [RecordingRecord], partitions: Int32 = 8) -> [SourceRecord] {
        var nextOffset = [Int64](repeating: 0, count: Int(partitions))
        return records.map { SourceRecord($0, partitions: partitions, nextOffset: &nextOffset) }
    }

    @inline(__always)
    static func appendRecord(_ batch: inout EventBatch, _ topic: Int32, _ rec: SourceRecord) {
        func opt(_ a: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> Void) {
            if let a { a.withUnsafeBytes { body($0) } } else { body(nil) }
        }
        rec.value.withUnsafeBytes { value in
            opt(rec.key) { key in
                opt(rec.ip) { ip in
                    opt(rec.receivedAt) { rat in
                        opt(rec.ua) { ua in
                            opt(rec.project) { project in
                                batch.appendRecord(
                                    topic: topic, partition: rec.partition, offset: rec.offset, timestamp: rec.timestamp,
                                    key: key, value: value, ip: ip, receivedAt: rat, ua: ua, project: project)
                            }
                        }
                    }
                }
            }
        }
    }
}

extension Bench.SourceRecord {
    /// The record on the partition its key hashes to (the same hash as `Bench.prepare`), at that partition's
    /// next offset.
    init(_ r: RecordingRecord, partitions: Int32, nextOffset: inout [Int64]) {
        var p: Int32 = 0
        if let key = r.key {
            var h = Hash64()
            key.withUnsafeBufferPointer { h.add($0.baseAddress!, $0.count) }
            p = Int32(h.value % UInt64(partitions))
        }
        func header(_ n: String) -> [UInt8]? { r.headers.first { $0.0 == n }?.1 }
        self.init(
            partition: p, offset: nextOffset[Int(p)], timestamp: r.timestamp ?? 0, key: r.key, value: r.value,
            ip: header("ip"), receivedAt: header("received_at"), ua: header("ua"), project: header("project"))
        nextOffset[Int(p)] += 1
    }
}
