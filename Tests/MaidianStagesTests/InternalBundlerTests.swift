import MaidianEvents
import XCTest

@testable import MaidianStages

/// Internal messages packed per internal partition (`InternalBundler`) and read back (`bundleItems`).
final class InternalBundlerTests: XCTestCase {
    static let topic = "maidian.partials"

    func partial(_ source: Int32, key: String, count: Int64) -> (key: [UInt8], value: [UInt8]) {
        var users = UserSet()
        users.insert(UInt64(count))
        let head = Array(#"{"metric":"pv","rule":"\#(key)","window_start":0,"window_end":60000,"dims":{}"#.utf8)
        var value: [UInt8] = []
        InternalMessage.partial(PartialAggregate(sourcePartition: source, windowEnd: 60_000, head: head, count: count, users: users,
                                                 isDwell: false, sumMs: 0, durations: DurationDigest())).encode(into: &value)
        return (Array(key.utf8), value)
    }

    func progress(_ source: Int32) -> [UInt8] {
        var value: [UInt8] = []
        InternalMessage.progress(source: source, watermark: 120_000, idle: false).encode(into: &value)
        return value
    }

    /// What the records written to `output` hold, message by message, per internal partition in order:
    /// (record, key or nil, value), whether the record was a bundle or a message alone.
    func unpacked(_ output: OutputBuffer) throws -> [Int32: [(record: Int32, key: [UInt8]?, value: [UInt8])]] {
        var got: [Int32: [(record: Int32, key: [UInt8]?, value: [UInt8])]] = [:]
        for m in output.messages {
            let value = Array(output.bytes[Int(m.value.start)..<Int(m.value.end)])
            if InternalMessage.isBundle(value) {
                XCTAssertFalse(m.key.isPresent, "a bundle has no key of its own")
                for item in try InternalMessage.bundleItems(value) {
                    got[m.partition, default: []].append((m.record, item.key.map { Array(value[$0]) }, Array(value[item.value])))
                }
            } else {
                let key = m.key.isPresent ? Array(output.bytes[Int(m.key.start)..<Int(m.key.end)]) : nil
                got[m.partition, default: []].append((m.record, key, value))
            }
        }
        return got
    }

    func add(_ b: inout InternalBundler, _ out: inout OutputBuffer, partition: Int32, record: Int32, key: [UInt8]?, value: [UInt8]) {
        let topic = out.topicIndex(Self.topic)
        if let key {
            key.withByteView { k in b.add(partition: partition, record: record, key: k, output: &out, topic: topic) { $0.append(contentsOf: value) } }
        } else {
            b.add(partition: partition, record: record, key: nil, output: &out, topic: topic) { $0.append(contentsOf: value) }
        }
    }

    func testOneRecordPerInternalPartitionWithEveryMessageInOrder() throws {
        var b = InternalBundler()
        var out = OutputBuffer()
        let topic = out.topicIndex(Self.topic)
        let a = partial(0, key: "a", count: 1), c = partial(0, key: "c", count: 3), d = partial(0, key: "d", count: 4)
        add(&b, &out, partition: 2, record: 7, key: a.key, value: a.value)
        add(&b, &out, partition: 0, record: 7, key: c.key, value: c.value)
        add(&b, &out, partition: 2, record: 7, key: d.key, value: d.value)
        for q: Int32 in 0..<3 { add(&b, &out, partition: q, record: 7, key: nil, value: progress(0)) }
        XCTAssertEqual(out.messages.count, 0, "nothing is written before the flush")
        b.flush(output: &out, topic: topic)
        XCTAssertEqual(out.messages.count, 3, "one record per internal partition")
        XCTAssertEqual(out.messages.map(\.partition), [2, 0, 1], "in the order the partitions got their first message")
        XCTAssertTrue(out.messages.allSatisfy { $0.record == 7 })
        let got = try unpacked(out)
        XCTAssertEqual(got[2]?.map(\.key), [a.key, d.key, nil])
        XCTAssertEqual(got[2]?.map(\.value), [a.value, d.value, progress(0)])
        XCTAssertEqual(got[0]?.map(\.value), [c.value, progress(0)])
        // Partition 1 got only the progress: written alone, as a message of its own (no bundle, no key).
        let alone = try XCTUnwrap(out.messages.first { $0.partition == 1 })
        XCTAssertFalse(alone.key.isPresent)
        XCTAssertEqual(Array(out.bytes[Int(alone.value.start)..<Int(alone.value.end)]), progress(0))
        XCTAssertEqual(try InternalMessage.decode(progress(0)), .progress(source: 0, watermark: 120_000, idle: false))
        // A flush with nothing collected writes nothing.
        b.flush(output: &out, topic: topic)
        XCTAssertEqual(out.messages.count, 3)
    }

    func testAPartialAloneKeepsItsKey() throws {
        var b = InternalBundler()
        var out = OutputBuffer()
        let a = partial(1, key: "pv|home|0|", count: 2)
        add(&b, &out, partition: 0, record: 3, key: a.key, value: a.value)
        b.flush(output: &out, topic: out.topicIndex(Self.topic))
        XCTAssertEqual(out.messages.count, 1)
        XCTAssertEqual(out.keyString(0), "pv|home|0|")
        XCTAssertEqual(Array(out.bytes[Int(out.messages[0].value.start)..<Int(out.messages[0].value.end)]), a.value)
    }

    /// Messages of different input records never share a record: each record's outputs are attributed to it.
    func testAnotherRecordStartsAnotherBundle() throws {
        var b = InternalBundler()
        var out = OutputBuffer()
        let a = partial(0, key: "a", count: 1), c = partial(0, key: "c", count: 2), d = partial(1, key: "d", count: 3)
        add(&b, &out, partition: 0, record: 1, key: a.key, value: a.value)
        add(&b, &out, partition: 0, record: 1, key: c.key, value: c.value)
        add(&b, &out, partition: 0, record: 4, key: d.key, value: d.value)
        b.flush(output: &out, topic: out.topicIndex(Self.topic))
        let got = try XCTUnwrap(try unpacked(out)[0])
        XCTAssertEqual(got.map(\.record), [1, 1, 4])
        XCTAssertEqual(got.map(\.value), [a.value, c.value, d.value])
        XCTAssertEqual(out.messages.count, 2)
    }

    /// Under a small producer limit, bundles are cut before they pass it; every message is still there, in order.
    func testBundlesStayUnderTheProducerLimit() throws {
        for limit in [200, 333, 700, 5_000] {
            var b = InternalBundler()
            var out = OutputBuffer()
            out.maxMessageBytes = limit
            var sent: [[UInt8]] = []
            for i in 0..<60 {
                let p = partial(0, key: "key\(i)", count: Int64(i))
                sent.append(p.value)
                add(&b, &out, partition: 0, record: 0, key: p.key, value: p.value)
            }
            b.flush(output: &out, topic: out.topicIndex(Self.topic))
            for m in out.messages {
                XCTAssertLessThanOrEqual(Int(m.value.end - m.value.start) + (m.key.isPresent ? Int(m.key.end - m.key.start) : 0), limit, "limit \(limit)")
            }
            XCTAssertEqual(try unpacked(out)[0]?.map(\.value), sent, "limit \(limit)")
            XCTAssertGreaterThan(out.messages.count, 1, "limit \(limit)")
        }
    }

    /// A bundle is taken whole or not at all: any cut, a count past what the bytes hold, a bad key length, a
    /// bundle inside a bundle or bytes after the last item are errors, never a crash or a partial read.
    func testMalformedBundlesAreRejected() throws {
        var b = InternalBundler()
        var out = OutputBuffer()
        let a = partial(0, key: "a", count: 1), c = partial(1, key: "c", count: 2)
        add(&b, &out, partition: 0, record: 0, key: a.key, value: a.value)
        add(&b, &out, partition: 0, record: 0, key: nil, value: progress(0))
        add(&b, &out, partition: 0, record: 0, key: c.key, value: c.value)
        b.flush(output: &out, topic: out.topicIndex(Self.topic))
        let bundle = Array(out.bytes[Int(out.messages[0].value.start)..<Int(out.messages[0].value.end)])
        XCTAssertEqual(try InternalMessage.bundleItems(bundle).count, 3)
        for cut in 0..<bundle.count {
            XCTAssertThrowsError(try InternalMessage.bundleItems(Array(bundle[..<cut])), "cut at \(cut)")
        }
        XCTAssertThrowsError(try InternalMessage.bundleItems(bundle + [0]), "a byte after the items")
        var lie = bundle
        lie[2] = 0xFF; lie[3] = 0xFF; lie[4] = 0xFF; lie[5] = 0x7F
        XCTAssertThrowsError(try InternalMessage.bundleItems(lie), "a count past the bytes")
        var badKey = bundle
        badKey[6] = 0xFE; badKey[7] = 0xFF; badKey[8] = 0xFF; badKey[9] = 0xFF  // -2
        XCTAssertThrowsError(try InternalMessage.bundleItems(badKey), "a key length of -2")
        var nested: [UInt8] = [1, 6, 1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]
        nested.appendLE(Int32(bundle.count))
        nested += bundle
        XCTAssertThrowsError(try InternalMessage.bundleItems(nested), "a bundle inside a bundle")
        XCTAssertThrowsError(try InternalMessage.decode(bundle), "a bundle is not one message")
    }
}
