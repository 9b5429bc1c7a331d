import Foundation
import Logging
import MaidianKafka
import MaidianRecording
import XCTest

/// `maidian record` and `maidian produce` on the mock cluster: record → produce → record gives the same bytes.
final class RecordProduceTests: XCTestCase {
    func testRecordProduceRecordIsByteIdentical() throws {
        let sample = try Integration.sharedFile("traffic/sample.ndjson")
        let broker = try EmbeddedBroker(brokers: 1, logger: Logger(label: "record-produce"))
        for t in ["raw.a", "raw.b", "raw.c", "raw.d"] { try broker.createTopic(t, partitions: 4) }
        let bootstrap = broker.bootstrapServers
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("record-produce-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let bin = Integration.binary.path

        // An independent client loads the sample into raw.a.
        let loaded = try Integration.run(Integration.python, Integration.pythonArgs("kafka_produce_recording.py", [bootstrap, "raw.a", sample.path]), timeout: 180)
        XCTAssertEqual(loaded.trimmingCharacters(in: .whitespacesAndNewlines), "9568")

        let a = dir.appendingPathComponent("a.ndjson").path
        let out = try Integration.run(bin, ["record", "--brokers", bootstrap, "--topic", "raw.a", "--out", a, "--log-level", "warning"])
        XCTAssertTrue(out.hasPrefix("recorded 9568 records from raw.a (4 partitions)"), out)
        // Every record of the sample, with key, headers, timestamp and value as they were (the order across
        // partitions is by timestamp, which may order records with equal timestamps differently than the file).
        let aText = try String(contentsOfFile: a, encoding: .utf8)
        XCTAssertEqual(aText.split(separator: "\n").sorted(), try String(contentsOf: sample, encoding: .utf8).split(separator: "\n").sorted())
        let timestamps = try Recording.read(path: a).map { $0.timestamp ?? -1 }
        XCTAssertEqual(timestamps, timestamps.sorted(), "partitions merged by record timestamp")

        // Maidian's producer writes it into raw.b (by key, murmur2): the same records come back. raw.a was
        // partitioned by the Python client's own partitioner, so records with equal timestamps may merge in
        // another order; from a topic partitioned as `maidian produce` does, the bytes are the same:
        // record → produce → record is byte-identical.
        let produced = try Integration.run(bin, ["produce", a, "--brokers", bootstrap, "--topic", "raw.b", "--log-level", "warning"])
        XCTAssertTrue(produced.hasPrefix("produced 9568 records to raw.b"), produced)
        let b = dir.appendingPathComponent("b.ndjson").path
        try Integration.run(bin, ["record", "--brokers", bootstrap, "--topic", "raw.b", "--out", b, "--log-level", "warning"])
        let bText = try String(contentsOfFile: b, encoding: .utf8)
        XCTAssertEqual(bText.split(separator: "\n").sorted(), aText.split(separator: "\n").sorted())
        try Integration.run(bin, ["produce", b, "--brokers", bootstrap, "--topic", "raw.c", "--log-level", "warning"])
        let c2 = dir.appendingPathComponent("c2.ndjson").path
        try Integration.run(bin, ["record", "--brokers", bootstrap, "--topic", "raw.c", "--out", c2, "--log-level", "warning"])
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: c2)), try Data(contentsOf: URL(fileURLWithPath: b)), "record → produce → record is byte-identical")

        // --limit keeps the first records in time; .zst compresses.
        let c = dir.appendingPathComponent("c.ndjson.zst").path
        try Integration.run(bin, ["record", "--brokers", bootstrap, "--topic", "raw.b", "--out", c, "--limit", "500", "--log-level", "warning"])
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: c)).prefix(4)), [0x28, 0xB5, 0x2F, 0xFD], "zstd frame")
        let first500 = bText.split(separator: "\n", omittingEmptySubsequences: false).prefix(500).joined(separator: "\n") + "\n"
        XCTAssertEqual(try Recording.read(path: c), try Recording.parse(Array(first500.utf8)))

        // --rate: 200 records at 100/s cannot take less than 1.99 s; what arrives is the same recording.
        let d = dir.appendingPathComponent("d.ndjson").path
        try first500.split(separator: "\n").prefix(200).map { $0 + "\n" }.joined().write(toFile: d, atomically: true, encoding: .utf8)
        let started = Date()
        try Integration.run(bin, ["produce", d, "--brokers", bootstrap, "--topic", "raw.d", "--rate", "100", "--log-level", "warning"])
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 1.99, "the rate limit was not applied")
        let e = dir.appendingPathComponent("e.ndjson").path
        try Integration.run(bin, ["record", "--brokers", bootstrap, "--topic", "raw.d", "--out", e, "--log-level", "warning"])
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: e)), try Data(contentsOf: URL(fileURLWithPath: d)))
        withExtendedLifetime(broker) {}
    }
}
