import Foundation
import MaidianEvents
import MaidianKafka
import MaidianRuntime
import XCTest

/// Issue 13, class 3 on the mock cluster: outputs the producer refuses no longer stop the worker (it
/// exited 2 and committed nothing, on every restart).
extension WorkerTests {
    func testOutputsTooLargeForTheProducerAreDeadLetteredAndCommitted() throws {
        let env = try Env(rawPartitions: 1)
        let zstd = ZstdCompressor()
        func raw(_ json: String, compress: Bool) -> Raw {
            Raw(key: "install-1", value: compress ? zstd.compress(Array(json.utf8)) : Array(json.utf8), partition: 0)
        }
        let longID = String(repeating: "d", count: 1_000_000)
        let list = "[" + Array(repeating: "\"abcdefgh\"", count: 550_000).joined(separator: ",") + "]"
        let badName = String(repeating: "bad name ", count: 120_000)
        let records = [
            raw("[\(Self.track(id: 0))]", compress: false),
            raw("[\(Self.track(id: 1, distinctID: longID))]", compress: true),  // bad_distinct_id, 1 MB payload
            raw("[{\"a\":" + String(repeating: "@", count: 800_000) + "}]", compress: false),  // bad_json, 1.07 MB in base64
            raw("[\(Self.track(id: 3).replacingOccurrences(of: "}}", with: ",\"list\":\(list)}}"))]", compress: true),  // valid, 6 MB
            raw("[\(Self.track(id: 4).replacingOccurrences(of: "}}", with: ",\"\(badName)\":1}}"))]", compress: true),
            raw("[\(Self.track(id: 5))]", compress: false),
        ]
        try env.produce(records)
        let status = WorkerStatus()
        let worker = try env.worker(untilEnd: true) { $0.status = status }
        let run = WorkerThread(worker)
        XCTAssertTrue(run.wait(seconds: 120), "the run did not end")
        XCTAssertNil(run.error, "the worker stopped: \(String(describing: run.error))")

        let out = try env.readOutputs(enriched: 2, dlq: 4)
        XCTAssertEqual(Set(out.enriched.compactMap { $0.value["_track_id"] as? Int }), [0, 5])
        var byOffset: [Int: [String: Any]] = [:]
        for d in out.dlq { byOffset[(d.value["source"] as? [String: Any])?["offset"] as? Int ?? -1] = d.value }
        XCTAssertEqual(byOffset[1]?["reason"] as? String, "bad_distinct_id")
        XCTAssertEqual(byOffset[1]?["truncated"] as? Bool, true)
        XCTAssertEqual(byOffset[2]?["reason"] as? String, "bad_json")
        XCTAssertEqual(byOffset[2]?["truncated"] as? Bool, true)
        for o in [3, 4] {
            XCTAssertEqual(byOffset[o]?["reason"] as? String, "too_large", "offset \(o)")
            XCTAssertEqual(byOffset[o]?["topic"] as? String, "events.enriched")
            XCTAssertEqual((byOffset[o]?["payload"] as? String)?.utf8.count, OutputBuffer.truncatedPayloadBytes)
        }
        XCTAssertEqual(try env.committed(partitions: 1), try env.endOffsets("events.raw", partitions: 1))
        let counters = try XCTUnwrap(status.counters)
        XCTAssertEqual(counters.outputsTooLarge.value, 2)
        XCTAssertEqual(counters.deadLettersTruncated.value, 2)
        XCTAssertEqual(counters.outputsDropped.value, 0)
    }

    func testOutputsKafkaRefusesForGoodAreDeadLetteredOrSkippedAndCommitted() throws {
        let env = try Env(rawPartitions: 1, maxBatch: 10)
        try env.produce((0..<40).map { i in Raw(key: "install-\(i % 5)", value: Array("[\(Self.track(id: Int64(i), distinctID: "user\(i % 7)"))]".utf8), partition: 0) })
        // The first Produce requests are answered MSG_SIZE_TOO_LARGE (10), as a broker whose limit is below the
        // producer's would, then INVALID_RECORD (87): the worker goes on, the outputs refused for size become
        // too_large dead letters, the invalid ones are counted.
        env.broker.pushRequestErrors(apiKey: 0, errors: [10, 87])
        defer { env.broker.clearRequestErrors(apiKey: 0) }
        let status = WorkerStatus()
        let worker = try env.worker(untilEnd: true) { $0.status = status }
        let run = WorkerThread(worker)
        XCTAssertTrue(run.wait(seconds: 120), "the run did not end")
        XCTAssertNil(run.error, "the worker stopped: \(String(describing: run.error))")
        let counters = try XCTUnwrap(status.counters)
        let dropped = counters.outputsDropped.value
        let delivered = try env.endOffsets("events.enriched", partitions: 4).values.reduce(0, +)
        // Refused for size: a too_large dead letter each (unless the dead letter's own request was the refused one).
        let dlq = try env.readAll("events.dlq", partitions: 2)
        XCTAssertGreaterThan(dlq.count, 0, "the first Produce request's outputs were refused for size")
        XCTAssertGreaterThan(dropped, 0, "the second request's were invalid records")
        XCTAssertEqual(Int(delivered) + dlq.count + dropped, 40, "each output delivered, dead-lettered or counted as dropped")
        XCTAssertGreaterThanOrEqual(counters.outputsTooLarge.value, dlq.count)
        for d in dlq {
            XCTAssertEqual(d.value["reason"] as? String, "too_large")
            XCTAssertEqual(d.value["topic"] as? String, "events.enriched")
            XCTAssertTrue((d.value["detail"] as? String)?.contains("MSG_SIZE_TOO_LARGE") == true, "\(d.value)")
            XCTAssertEqual((d.value["source"] as? [String: Any])?["topic"] as? String, "events.raw")
            XCTAssertTrue((d.value["payload"] as? String)?.hasPrefix("{\"type\":\"track\"") == true)
        }
        XCTAssertEqual(try env.committed(partitions: 1), try env.endOffsets("events.raw", partitions: 1))
    }
}
