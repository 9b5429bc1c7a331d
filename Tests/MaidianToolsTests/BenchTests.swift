import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import MaidianRecording
import MaidianTools
import MaidianStages
import XCTest

/// `maidian bench` writes what a worker would produce, also for outputs too large to produce (issue 13, class 3).
final class BenchTests: XCTestCase {
    func testOutputsTooLargeToProduceAreDeadLetteredAsInAWorker() throws {
        let spec = try PipelineSpec.parse(yaml: """
            stages:
              - kind: validate
            outputs:
              - kind: enriched
              - kind: dead_letter
            """, file: "bench.yaml")
        let engine = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Logger(label: "test"))
        let list = "[" + Array(repeating: "\"abcdefgh\"", count: 550_000).joined(separator: ",") + "]"
        let big = #"{"type":"track","event":"$AppClick","time":1763700000000,"distinct_id":"u1","properties":{"list":\#(list)}}"#
        let small = #"{"type":"track","event":"$AppClick","time":1763700000000,"distinct_id":"u2","properties":{}}"#
        let source = Bench.prepare([
            RecordingRecord(key: Array("k".utf8), value: ZstdCompressor().compress(Array("[\(big),\(small)]".utf8))),
        ], partitions: 1)
        var seen: [(topic: String, value: String)] = []
        _ = try Bench.run(engine: engine, records: source) { _, out in
            for (i, m) in out.messages.enumerated() { seen.append((out.topics[Int(m.topic)], out.valueString(i))) }
        }
        XCTAssertEqual(seen.map(\.topic), ["events.dlq", "events.enriched"])
        XCTAssertTrue(seen.first?.value.hasPrefix(#"{"reason":"too_large","detail":"the events.enriched record of "#) == true)
        XCTAssertTrue(seen.first?.value.contains(#""source":{"topic":"events.raw","partition":0,"offset":0}"#) == true)
        XCTAssertTrue(seen.last?.value.contains(#""distinct_id":"u2""#) == true)
    }

    /// Fewer than one partition counts as one (zero trapped: an empty offsets array was indexed).
    func testPrepareTakesFewerThanOnePartitionAsOne() {
        let records = (0..<3).map { RecordingRecord(key: Array("k\($0)".utf8), value: Array("[]".utf8)) }
        for n: Int32 in [0, -4] {
            let source = Bench.prepare(records, partitions: n)
            XCTAssertEqual(source.partitions, 1)
            XCTAssertEqual(source.count, 3)
        }
    }
}
