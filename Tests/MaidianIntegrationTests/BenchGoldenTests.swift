import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import MaidianRecording
import MaidianRuntime
import MaidianStages
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

        func run(merge: Bool, batchSize: Int = 1000, spec: PipelineSpec = spec) throws -> (BenchResult, [Integration.DumpedRecord]) {
            let engine = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Logger(label: "bench-golden"))
            var records: [Integration.DumpedRecord] = []
            let result = try Bench.run(engine: engine, records: source, topic: spec.source.topic, batchSize: batchSize, merge: merge) { _, out in
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
    }
}
