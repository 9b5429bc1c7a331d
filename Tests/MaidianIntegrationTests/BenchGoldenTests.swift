import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import MaidianRecording
import MaidianRuntime
import MaidianStages
import MaidianTools
import XCTest

/// What `maidian bench` times is the whole job: run the way the benchmark runs (in memory, one thread, the
/// partials merged as a worker holding every internal partition merges them), the full pipeline's outputs on
/// the sample traffic are the golden answers.
final class BenchGoldenTests: XCTestCase {
    func testBenchOfTheFullPipelineWritesTheGoldenAnswers() throws {
        let sample = Integration.shared.appendingPathComponent("traffic/sample.ndjson")
        guard FileManager.default.fileExists(atPath: sample.path) else {
            XCTFail("missing \(sample.path): the golden test needs testdata/traffic")
            return
        }
        let expected = try JSONSerialization.jsonObject(
            with: Data(contentsOf: Integration.shared.appendingPathComponent("traffic/sample.expected.json"))) as! [String: Any]
        let env = [
            "MAIDIAN_GEO_DB": Integration.shared.appendingPathComponent("geo/test-city.mmdb").path,
            "MAIDIAN_RULES": Integration.shared.appendingPathComponent("traffic/rules-sample.yaml").path,
        ]
        let spec = try PipelineSpec.load(path: Integration.root.appendingPathComponent("pipelines/app-analytics.yaml").path, environment: env)
        let source = Bench.prepare(try Recording.read(path: sample.path), partitions: 8)

        func run(merge: Bool, batchSize: Int = 1000, spec: PipelineSpec = spec, internalPartitions: Int32? = nil) throws -> (BenchResult, [Integration.DumpedRecord]) {
            let engine = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Logger(label: "bench-golden"))
            var records: [Integration.DumpedRecord] = []
            let result = try Bench.run(engine: engine, records: source, topic: spec.source.topic, batchSize: batchSize, merge: merge,
                                       internalPartitions: internalPartitions) { _, out in
                for (i, m) in out.messages.enumerated() {
                    records.append((out.topics[Int(m.topic)], out.keyString(i), out.valueString(i)))
                }
            }
            return (result, records)
        }

        let (result, records) = try run(merge: true)
        try GoldenChecks.checkWindows(records: records, expected: expected)
        XCTAssertEqual(records.filter { $0.topic == "events.enriched" }.count, expected["enriched"] as? Int)
        XCTAssertEqual(records.filter { $0.topic == "events.dlq" }.count, (expected["dlq"] as! [String: Int]).values.reduce(0, +))
        let counts = records.filter { $0.topic == "metrics.counts" }.count
        XCTAssertGreaterThan(counts, 3000, "metrics.counts records come from the merge")
        XCTAssertEqual(result.mergedMessages, counts)
        XCTAssertEqual(result.outputMessages, records.count, "every output is counted")

        // Without the merge, the partials stay unmerged: no metrics.counts at all.
        let (unmerged, unmergedRecords) = try run(merge: false)
        XCTAssertEqual(unmerged.mergedMessages, 0)
        XCTAssertFalse(unmergedRecords.contains { $0.topic == "metrics.counts" })
        XCTAssertEqual(unmerged.outputMessages + counts, result.outputMessages)

        // The batch size (a worker's `max_batch`) changes how often partials and progress go to the internal
        // topic, never what comes out.
        func external(_ records: [Integration.DumpedRecord]) -> [String] {
            records.filter { !$0.topic.hasSuffix(".partials") }.map { "\($0.topic) \($0.key ?? "-") \($0.value)" }.sorted()
        }
        let want = external(records)
        for batchSize in [97, 250, 2_000] {
            let (_, other) = try run(merge: true, batchSize: batchSize)
            XCTAssertTrue(external(other) == want, "outputs with batches of \(batchSize) records")
        }
        // A small batch bound (`source.limits.max_batch_bytes`, issue 13) cuts each poll into several batches:
        // the same outputs.
        var bounded = spec
        bounded.source.limits.maxBatchBytes = 300_000
        let (cutResult, cut) = try run(merge: true, spec: bounded)
        XCTAssertEqual(cutResult.records, result.records)
        XCTAssertTrue(external(cut) == want, "outputs with batches cut at 300 kB")
        // Nor does the internal topic's partition count: each of the 8 source partitions tells every internal
        // partition its progress, so fewer internal partitions carry fewer internal records.
        let internalRecords = records.filter { $0.topic.hasSuffix(".partials") }.count
        var fewer = internalRecords
        for n: Int32 in [3, 1] {
            let (_, other) = try run(merge: true, internalPartitions: n)
            XCTAssertTrue(external(other) == want, "outputs through \(n) internal partitions")
            let count = other.filter { $0.topic.hasSuffix(".partials") }.count
            XCTAssertLessThan(count, fewer, "internal records through \(n) internal partitions")
            fewer = count
        }
    }
}

/// Issue 13: one record of each hostile class of the input edge through the whole sample pipeline, as
/// `maidian bench` runs it: nothing traps, and each lands where SPEC says.
extension BenchGoldenTests {
    func testHostileRecordsThroughTheFullPipeline() throws {
        let env = [
            "MAIDIAN_GEO_DB": Integration.shared.appendingPathComponent("geo/test-city.mmdb").path,
            "MAIDIAN_RULES": Integration.shared.appendingPathComponent("traffic/rules-sample.yaml").path,
        ]
        let spec = try PipelineSpec.load(path: Integration.root.appendingPathComponent("pipelines/app-analytics.yaml").path, environment: env)
        let engine = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Logger(label: "bench-hostile"))
        let screen = "\"properties\":{\"$screen_name\":\"Home\",\"$title\":\"Home\"}"
        func rec(_ json: String, headers: [(String, [UInt8])] = [("received_at", Array("1763700000000".utf8))]) -> RecordingRecord {
            RecordingRecord(key: Array("k".utf8), headers: headers, timestamp: 1_763_700_000_000, value: Array(json.utf8))
        }
        // Many tiny zstd frames without a content size, decoding to a valid array.
        var frames: [UInt8] = []
        func frame(_ b: UInt8) { frames += [0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x00, 0x09, 0x00, 0x00, b] }
        frame(0x5B)
        for _ in 0..<30_000 { frame(0x20) }
        frame(0x5D)
        let records = [
            // Class 1: times near the 64-bit limits, with and without _track_id, on a page rule's event.
            rec("[{\"type\":\"track\",\"event\":\"$AppViewScreen\",\"time\":-9223372036854775807,\"distinct_id\":\"u\",\"_track_id\":1,\(screen)},"
                + "{\"type\":\"track\",\"event\":\"$AppViewScreen\",\"time\":-9223372036854775807,\"distinct_id\":\"u\",\(screen)},"
                + "{\"type\":\"track\",\"event\":\"$AppViewScreen\",\"time\":9223372036854775807,\"distinct_id\":\"u\",\"_track_id\":2,\(screen)}]"),
            RecordingRecord(key: nil, headers: [], timestamp: 1_763_700_000_000, value: frames),
            rec("[{\"type\":\"profile_set\",\"type\":\"track\",\"event\":\"a\",\"time\":1763700000000,\"distinct_id\":\"u\"}]"),
            rec("[{\"type\":\"track\",\"event\":\"a\",\"time\":1763700000000,\"distinct_id\":\"u\",\"properties\":{\"n\":1e400}}]"),
            rec("[{\"type\":\"track\",\"event\":\"a\",\"time\":1763700000000,\"distinct_id\":\"u\",\"_flush_time\":-9223372036854775807,"
                + "\"properties\":{\"$matched_rules\":[\"spoofed\"],\"$late\":false}}]",
                headers: [("received_at", Array("999999999999999999".utf8)), ("project", [0x70, 0xFF])]),
        ]
        var out: [(String, String)] = []
        _ = try Bench.run(engine: engine, records: Bench.prepare(records, partitions: 2), topic: spec.source.topic, batchSize: 250, merge: true) { _, o in
            for (i, m) in o.messages.enumerated() { out.append((o.topics[Int(m.topic)], o.valueString(i))) }
        }
        let dlq = out.filter { $0.0 == "events.dlq" }.map(\.1)
        func count(_ reason: String) -> Int { dlq.filter { $0.contains("\"reason\":\"\(reason)\"") }.count }
        XCTAssertEqual(count("bad_time"), 3)
        XCTAssertEqual(count("duplicate_key"), 1)
        XCTAssertEqual(count("bad_json"), 1)
        let enriched = out.filter { $0.0 == "events.enriched" }.map(\.1)
        XCTAssertEqual(enriched.count, 1)
        XCTAssertFalse(enriched[0].contains("spoofed"))
        XCTAssertTrue(enriched[0].contains("\"$project\":\"default\""), enriched[0])
        XCTAssertTrue(enriched[0].contains("\"time\":1763700000000"), "no calibration from an out-of-range flush time")
    }
}
