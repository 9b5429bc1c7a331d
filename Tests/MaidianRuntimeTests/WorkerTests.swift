import Foundation
import Logging
import MaidianEvents
import MaidianKafka
import MaidianPipeline
import MaidianRuntime
import MaidianStages
import Synchronization
import XCTest

/// `Worker` on the in-process mock cluster: bounded runs, stop requests, and delivery failures (at-least-once:
/// no offset is committed past a record whose outputs were not delivered).
final class WorkerTests: XCTestCase {
    static let t0: Int64 = 1_763_700_000_000

    // MARK: - a. bounded run

    func testBoundedRunDeliversOutputsAndCommitsEndOffsets() throws {
        let env = try Env(rawPartitions: 4)
        let zstd = ZstdCompressor()
        var expectedEnriched = 0
        var expectedDLQ: [String: Int] = [:]
        var records: [Raw] = []
        for i in 0..<300 {
            let key = "install-\(i % 37)"
            if i % 23 == 7 {
                records.append(Raw(key: key, value: Array("not a json array \(i)".utf8), partition: Int32(i % 4)))
                expectedDLQ["bad_encoding", default: 0] += 1
                continue
            }
            var events = [Self.track(id: Int64(i) * 10, distinctID: "user\(i % 37)")]
            expectedEnriched += 1
            if i % 5 == 0 {
                events.append(#"{"type":"track","event":"$AppClick","distinct_id":"u","time":"yesterday"}"#)
                expectedDLQ["bad_time", default: 0] += 1
            } else {
                events.append(Self.track(id: Int64(i) * 10 + 1, distinctID: "user\(i % 37)", event: "$AppViewScreen"))
                expectedEnriched += 1
            }
            let json = Array("[\(events.joined(separator: ","))]".utf8)
            records.append(Raw(key: key, value: i % 2 == 0 ? json : zstd.compress(json), partition: Int32(i % 4)))
        }
        try env.produce(records)

        // The timeout only guards against a hang; speed is measured by `maidian bench`, not here.
        try env.runWorker(untilEnd: true, timeout: 120)

        let out = try env.readOutputs(enriched: expectedEnriched, dlq: expectedDLQ.values.reduce(0, +))
        XCTAssertEqual(out.enriched.count, expectedEnriched)
        XCTAssertEqual(Set(out.enriched.compactMap { $0.value["_track_id"] as? Int }).count, expectedEnriched, "each event once")
        for e in out.enriched {
            XCTAssertEqual(e.key, e.value["distinct_id"] as? String)
            let props = e.value["properties"] as? [String: Any] ?? [:]
            XCTAssertEqual(props["$ip"] as? String, "10.1.2.3")
            XCTAssertEqual((props["$receive_time"] as? NSNumber)?.int64Value, Self.t0 + 500)
        }
        var reasons: [String: Int] = [:]
        for d in out.dlq {
            reasons[d.value["reason"] as? String ?? "?", default: 0] += 1
            XCTAssertTrue(d.key?.hasPrefix("install-") == true)
            let source = d.value["source"] as? [String: Any] ?? [:]
            XCTAssertEqual(source["topic"] as? String, "events.raw")
        }
        XCTAssertEqual(reasons, expectedDLQ)
        // Nothing beyond what was expected.
        XCTAssertEqual(try env.endOffsets("events.enriched", partitions: 4).values.reduce(0, +), Int64(expectedEnriched))
        XCTAssertEqual(try env.endOffsets("events.dlq", partitions: 2).values.reduce(0, +), Int64(expectedDLQ.values.reduce(0, +)))

        let ends = try env.endOffsets("events.raw", partitions: 4)
        XCTAssertEqual(ends.values.reduce(0, +), 300)
        XCTAssertEqual(try env.committed(partitions: 4), ends, "committed offsets are the end offsets")
    }

    // MARK: - b. empty topic

    func testBoundedRunOnEmptyTopicReturns() throws {
        let env = try Env(rawPartitions: 4)
        try env.runWorker(untilEnd: true, timeout: 120)
        XCTAssertEqual(try env.committed(partitions: 4), [:], "nothing to commit")
        XCTAssertEqual(try env.endOffsets("events.enriched", partitions: 4).values.reduce(0, +), 0)
    }

    // MARK: - b2. two bounded workers

    /// Two `--until-end` workers of one group, one of them slowed down: the one that finishes first stays in
    /// the group until the other is done too, so that its leaving does not revoke a worker that still works
    /// (which would wait out the group's join timer and re-read the leaver's partitions from their replay
    /// points). Every record is processed once and committed at the end.
    func testFirstBoundedWorkerToFinishWaitsForTheGroupInsteadOfRevokingTheOther() throws {
        let env = try Env(rawPartitions: 4, maxBatch: 10)
        let n = 400
        try env.produce((0..<n).map { i in
            Raw(key: "k\(i)", value: Array("[\(Self.track(id: Int64(i), distinctID: "user\(i % 13)"))]".utf8), partition: Int32(i % 4))
        })
        let log = LineCapture()
        let fast = WorkerThread(try env.worker(untilEnd: true, logger: log.logger(prefix: "fast")))
        let slow = WorkerThread(try env.worker(untilEnd: true, logger: log.logger(prefix: "slow")) { $0.hook = SlowBatches(seconds: 0.04) })
        XCTAssertTrue(fast.wait(seconds: 120) && slow.wait(seconds: 120), "bounded runs did not return")
        XCTAssertNil(fast.error)
        XCTAssertNil(slow.error)

        let lines = log.lines
        let dump = lines.joined(separator: "\n")
        let doneLines = lines.indices.filter { lines[$0].contains("bounded run done") }
        XCTAssertEqual(doneLines.count, 2, dump)
        // Between the first worker's end of work and the other's, nobody is revoked and nothing is re-read. A
        // worker's own revocation as it leaves (after its "leaving the group" line: every partition was committed
        // at its end, the other's too, whose "done" line can come a moment later) revokes nobody else.
        if let first = doneLines.first, let last = doneLines.last {
            let between = lines[first...last]
            var left = Set<Substring>()
            for line in between {
                let who = line.prefix { $0 != ":" }
                if line.contains("leaving the group") { left.insert(who) }
                XCTAssertFalse(line.contains("revoked partitions") && !left.contains(who), "a worker was revoked while the other still worked:\n\(dump)")
            }
            XCTAssertFalse(between.contains { $0.contains("re-reading from offset") }, dump)
        }
        XCTAssertTrue(lines.contains { $0.contains("leaving the group: every partition is committed at its end") }, dump)
        let ends = try env.endOffsets("events.raw", partitions: 4)
        XCTAssertEqual(try env.committed(partitions: 4), ends, "committed offsets are the end offsets")
        let ids = try env.readAll("events.enriched", partitions: 4).compactMap { $0.value["_track_id"] as? Int }
        XCTAssertEqual(Set(ids), Set(0..<n))
        XCTAssertEqual(ids.count, n, "no event written twice")
    }

    // MARK: - c. delivery failure

    func testDeliveryFailureStopsWithoutCommittingPastTheFailedRecord() throws {
        // Every Produce request of the second run fails.
        let r = try runWithFailingProduce(errors: Array(repeating: 29, count: 400))
        XCTAssertEqual(r.delivered, Set(0..<40), "only phase 1's outputs were delivered")
        XCTAssertEqual(r.firstMissing, 40)
        XCTAssertEqual(r.committed, 40, "phase 1's commit stays; nothing committed past the failed record")
    }

    func testPartialDeliveryFailureCommitsNothingPastTheFirstFailedRecord() throws {
        // The first Produce request of the second run succeeds, the later ones fail: some records after the first
        // failed one have their outputs delivered, and still must not be committed.
        let r = try runWithFailingProduce(errors: [0] + Array(repeating: 29, count: 400))
        XCTAssertGreaterThan(r.delivered.count, 40, "the first request of the second run was delivered")
        XCTAssertGreaterThanOrEqual(r.committed, 40)
        XCTAssertLessThanOrEqual(r.committed, Int64(r.firstMissing),
                                 "committed \(r.committed) passes record \(r.firstMissing), whose output was never delivered")
    }

    /// Phase 1: a clean bounded run over 40 records (commits 40). Phase 2: 160 more records while the mock
    /// answers the worker's Produce requests with `errors` (29 = TOPIC_AUTHORIZATION_FAILED, non-retriable);
    /// the run must throw `RuntimeError(.delivery)`. Every record has exactly one output, an enriched event
    /// whose `_track_id` is the record's offset; distinct ids spread the outputs over the enriched partitions,
    /// so over several Produce requests.
    func runWithFailingProduce(errors: [Int32]) throws -> (delivered: Set<Int>, firstMissing: Int, committed: Int64) {
        let env = try Env(rawPartitions: 1, maxBatch: 10)
        func records(_ range: Range<Int>) -> [Raw] {
            range.map { i in
                Raw(key: "install-\(i % 5)", value: Array("[\(Self.track(id: Int64(i), distinctID: "user\(i % 7)"))]".utf8), partition: 0)
            }
        }
        try env.produce(records(0..<40))
        try env.runWorker(untilEnd: true, timeout: 120)
        let tp = TopicPartition(topic: "events.raw", partition: 0)
        XCTAssertEqual(try env.committed(partitions: 1), [tp: 40])

        try env.produce(records(40..<200))  // before the errors are pushed: they hit every producer
        env.broker.pushRequestErrors(apiKey: 0, errors: errors)
        defer { env.broker.clearRequestErrors(apiKey: 0) }
        var thrown: (any Error)?
        do {
            try env.runWorker(untilEnd: true, timeout: 120)
        } catch {
            thrown = error
        }
        env.broker.clearRequestErrors(apiKey: 0)
        let error = try XCTUnwrap(thrown as? RuntimeError, "run() must throw RuntimeError(.delivery), got \(String(describing: thrown))")
        XCTAssertEqual(error.code, .delivery, "\(error)")

        // Which records' outputs arrived; the first record without its output bounds the committed offset.
        let delivered = Set(try env.readAll("events.enriched", partitions: 4).compactMap { $0.value["_track_id"] as? Int })
        let firstMissing = try XCTUnwrap((0..<200).first { !delivered.contains($0) }, "some outputs must have failed")
        return (delivered, firstMissing, try env.committed(partitions: 1)[tp] ?? -1)
    }

    // MARK: - d. stop request

    func testRequestStopCommitsProcessedRecords() throws {
        let env = try Env(rawPartitions: 2)
        let n = 200
        try env.produce((0..<n).map { i in
            Raw(key: "k\(i)", value: Array("[\(Self.track(id: Int64(i)))]".utf8), partition: Int32(i % 2))
        })
        let worker = try env.worker(untilEnd: false)
        let run = WorkerThread(worker)
        // Wait until every record's output is on events.enriched (so every record was processed) ...
        let deadline = ContinuousClock.now + .seconds(90)
        var outputs: Int64 = 0
        while ContinuousClock.now < deadline && !run.isDone {
            outputs = try env.endOffsets("events.enriched", partitions: 4).values.reduce(0, +)
            if outputs >= Int64(n) { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        XCTAssertFalse(run.isDone, "an unbounded run returned by itself: \(String(describing: run.error))")
        XCTAssertEqual(outputs, Int64(n))
        // ... then stop: the run returns, and the offsets of the processed records are committed.
        worker.requestStop()
        XCTAssertTrue(run.wait(seconds: 60), "run() did not return after requestStop()")
        XCTAssertNil(run.error)
        let ends = try env.endOffsets("events.raw", partitions: 2)
        XCTAssertEqual(ends.values.reduce(0, +), Int64(n))
        XCTAssertEqual(try env.committed(partitions: 2), ends)
    }

    // MARK: - e. liveness

    /// A loop that stops making progress (the `stall-after` test fault) while librdkafka keeps the member
    /// alive: the watchdog calls `onStall` (the CLI exits with status 3 there); a stop request still unwinds it.
    func testWatchdogReportsAStuckLoop() throws {
        let env = try Env(rawPartitions: 1)
        try env.produce((0..<50).map { i in Raw(key: "k\(i)", value: Array("[\(Self.track(id: Int64(i)))]".utf8), partition: 0) })
        let stalled = DispatchSemaphore(value: 0)
        let worker = try env.worker(untilEnd: false) { options in
            options.livenessTimeout = .seconds(2)
            options.hook = TestFaults(stallAfterRecords: 10)
            options.onStall = { _ in stalled.signal() }
        }
        let run = WorkerThread(worker)
        XCTAssertEqual(stalled.wait(timeout: .now() + 90), .success, "the watchdog reports the stuck loop")
        XCTAssertFalse(run.isDone)
        worker.requestStop()
        XCTAssertTrue(run.wait(seconds: 60), "run() did not return after requestStop()")
        XCTAssertNil(run.error)
    }

    // MARK: - f. a batch bound with internal records to merge

    /// A poll that brings internal records to merge and more source records than the batch bound
    /// (`source.limits.max_batch_bytes`) lets one batch hold: the source records past the bound wait for the
    /// next batch, and what merging writes is attributed to the internal records as numbered after the ones the
    /// batch kept. (They were numbered before the cut, past the batch's end: the worker trapped.)
    func testPollCutByTheBatchBoundWithInternalRecordsToMerge() throws {
        let rules = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("testdata/traffic/rules-sample.yaml").path
        let stages = "  - kind: validate\n  - kind: match\n    rules: \(rules)\n    reload: false\n  - kind: windows\n    window: 60s"
        let env = try Env(rawPartitions: 2, limits: "max_batch_bytes: 4KiB", stages: stages)
        for t in ["metrics.counts", "metrics.dwell", "crash.trails"] { try env.broker.createTopic(t, partitions: 1) }
        let partials = PipelineSpec.defaultPartialsTopic(group: env.group)
        try env.broker.createTopic(partials, partitions: 1)
        // Already on the internal topic when the worker starts (its first poll brings them with the raw records):
        // each source's partial of one window and its final progress, so merging them writes that window.
        let end = Self.t0 + 60_000
        let head = #"{"metric":"pv","rule":"earlier","window_start":\#(Self.t0),"window_end":\#(end),"dims":{}"#
        func le<T: FixedWidthInteger>(_ v: T) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }
        var internalRecords: [(key: [UInt8], value: [UInt8])] = []
        for source: Int32 in 0..<2 {
            let partial: [UInt8] = [1, 1] + le(source) + le(end) + le(Int32(head.utf8.count)) + Array(head.utf8) + le(Int64(2 + source))
                + [0] + le(Int32(1)) + le(UInt64(source + 1)) + [0]
            internalRecords.append((Array("pv|earlier|\(Self.t0)|".utf8), partial))
        }
        for source: Int32 in 0..<2 { internalRecords.append(([], [1, 2] + le(source) + le(Int64.max) + [0])) }
        let producer = try KafkaProducer(config: ["bootstrap.servers": env.broker.bootstrapServers], logger: env.logger)
        for (i, r) in internalRecords.enumerated() {
            try producer.produce(topicName: partials, partition: 0, key: r.key, value: r.value, headers: [], timestamp: Self.t0, token: UInt64(i + 1))
        }
        try producer.flush(timeout: .seconds(20))
        var raw: [Raw] = []
        for i in 0..<200 {
            let json = "[" + Self.track(id: Int64(i) * 10, distinctID: "user\(i % 7)", event: "$AppViewScreen") + "]"
            raw.append(Raw(key: "install-\(i % 7)", value: Array(json.utf8), partition: Int32(i % 2)))
        }
        try env.produce(raw)

        try env.runWorker(untilEnd: true, timeout: 120)

        let counts = try env.readAll("metrics.counts", partitions: 1)
        let earlier = counts.filter { $0.value["rule"] as? String == "earlier" }
        XCTAssertEqual(earlier.count, 1, "the pre-produced window is written once")
        XCTAssertEqual((earlier.first?.value["count"] as? NSNumber)?.intValue, 5)
        XCTAssertEqual(try env.readAll("events.enriched", partitions: 4).count, 200)
    }

    // MARK: - input after a finished bounded run

    /// A bounded run writes out every window at its end, and the group's mergers take nothing after every
    /// source's final progress. A later run of the group that finds newer input stops before processing it
    /// (it would be left out of the windowed counts without a word); one that finds none ends as before.
    func testInputNewerThanAFinishedBoundedRunStopsTheWorkerInsteadOfLeavingItOutOfTheCounts() throws {
        let env = try Env(rawPartitions: 3, maxBatch: 10, stages: Self.windowsStages)
        for t in ["metrics.counts", "metrics.dwell", "crash.trails"] { try env.broker.createTopic(t, partitions: 1) }
        try env.broker.createTopic(PipelineSpec.defaultPartialsTopic(group: env.group), partitions: 1)
        // Partition 0 is read to its end in the first batch, and committed there (once a second) long before the
        // run's end, slowed down: its mark comes with a second commit of the same offset. Partition 2 is empty:
        // committed at 0 with the mark.
        try env.produce(Self.views(0..<10, partition: 0) + Self.views(10..<100, partition: 1))
        let first = WorkerThread(try env.worker(untilEnd: true) { $0.hook = SlowBatches(seconds: 0.25) })
        XCTAssertTrue(first.wait(seconds: 120), "bounded run did not return")
        XCTAssertNil(first.error)
        let ends = try env.endOffsets("events.raw", partitions: 3)
        let reader = try KafkaConsumer(config: ["bootstrap.servers": env.broker.bootstrapServers, "group.id": env.group], logger: env.logger)
        let committed = try reader.committedWithMetadata(Array(ends.keys), timeout: .seconds(10))
        try reader.close()
        for (tp, end) in ends {
            XCTAssertEqual(committed[tp]?.offset, end)
            XCTAssertEqual(committed[tp].flatMap { ReplayPoint(metadata: $0.metadata) }?.finished, true, "\(tp): \(committed[tp]?.metadata ?? "-")")
        }

        try env.runWorker(untilEnd: true, timeout: 120)  // nothing newer: ends as before

        for p: Int32 in [2, 0] {
            try env.produce(Self.views(100..<110, partition: p))
            XCTAssertThrowsError(try env.runWorker(untilEnd: true, timeout: 120), "newer input in partition \(p)") { error in
                XCTAssertEqual((error as? RuntimeError)?.code, .finishedGroup, "\(error)")
                // The first record past a mark is named: partition 2's are still there when partition 0 gets more.
                XCTAssertTrue("\(error)".contains(p == 2 ? "events.raw[2]" : "events.raw[") && "\(error)".contains("new group"), "\(error)")
            }
        }
        XCTAssertEqual(try env.readAll("events.enriched", partitions: 4).count, 100, "nothing of the newer input was processed")
        XCTAssertEqual(try env.committed(partitions: 3), ends, "nor committed")
    }

    /// Without windowed counts nothing is final at a bounded run's end: a later run of the group goes on with
    /// newer input.
    func testWithoutWindowsALaterBoundedRunGoesOnWithNewerInput() throws {
        let env = try Env(rawPartitions: 2)
        try env.produce(Self.views(0..<50))
        try env.runWorker(untilEnd: true, timeout: 120)
        try env.produce(Self.views(50..<80))
        try env.runWorker(untilEnd: true, timeout: 120)
        XCTAssertEqual(try env.readAll("events.enriched", partitions: 4).count, 80)
    }

    static var windowsStages: String {
        let rules = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("testdata/traffic/rules-sample.yaml").path
        return "  - kind: validate\n  - kind: match\n    rules: \(rules)\n    reload: false\n  - kind: windows\n    window: 60s"
    }

    /// Page views, one per record, spread over two partitions (or all in `partition`).
    static func views(_ ids: Range<Int>, partition: Int32? = nil) -> [Raw] {
        ids.map { i in
            let json = "[" + track(id: Int64(i) * 1000, distinctID: "user\(i % 7)", event: "$AppViewScreen") + "]"
            return Raw(key: "install-\(i % 7)", value: Array(json.utf8), partition: partition ?? Int32(i % 2))
        }
    }

    // MARK: - Helpers

    static func track(id: Int64, distinctID: String = "u1", event: String = "$AppClick") -> String {
        #"{"type":"track","event":"\#(event)","time":\#(t0 + id),"distinct_id":"\#(distinctID)","_track_id":\#(id),"properties":{"$screen_name":"HomeViewController"}}"#
    }

    struct Raw {
        var key: String
        var value: [UInt8]
        var partition: Int32
    }

    /// A mock cluster with the raw and output topics, and a pipeline for it.
    final class Env {
        let broker: EmbeddedBroker
        let group = "worker-test-\(UUID().uuidString.prefix(8).lowercased())"
        let spec: PipelineSpec
        let logger: Logger
        let rawPartitions: Int

        /// `limits`: what `source.limits:` holds; `stages`: the `stages:` list (default: validate to record_presets).
        init(rawPartitions: Int, maxBatch: Int = 2000, limits: String = "", stages: String? = nil) throws {
            var logger = Logger(label: "worker-tests") { StreamLogHandler.standardError(label: $0) }
            // WORKER_TEST_LOG=info|debug shows the worker's and librdkafka's lines.
            logger.logLevel = ProcessInfo.processInfo.environment["WORKER_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
            self.logger = logger
            self.rawPartitions = rawPartitions
            broker = try EmbeddedBroker(brokers: 1, logger: logger)
            try broker.createTopic("events.raw", partitions: rawPartitions)
            try broker.createTopic("events.enriched", partitions: 4)
            try broker.createTopic("events.dlq", partitions: 2)
            let yaml = """
                name: worker-test
                source:
                  brokers: ${MAIDIAN_BROKERS}
                  topic: events.raw
                  group: ${MAIDIAN_GROUP:-maidian}
                  session_timeout: 6s
                  max_batch: \(maxBatch)
                  kafka:
                    heartbeat.interval.ms: 500
                    fetch.wait.max.ms: 50
                    topic.metadata.refresh.interval.ms: 1000
                  limits: {\(limits)}
                stages:
                \(stages ?? "  - kind: validate\n  - kind: calibrate_time\n  - kind: dedup\n  - kind: record_presets")
                outputs:
                  - kind: enriched
                    topic: events.enriched
                  - kind: dead_letter
                    topic: events.dlq
                """
            spec = try PipelineSpec.parse(
                yaml: yaml, file: "worker-test.yaml",
                environment: ["MAIDIAN_BROKERS": broker.bootstrapServers, "MAIDIAN_GROUP": group])
        }

        func produce(_ records: [Raw]) throws {
            let producer = try KafkaProducer(config: ["bootstrap.servers": broker.bootstrapServers], logger: logger)
            var failures = 0
            producer.onDelivery = { _, error in if error != nil { failures += 1 } }
            let headers: [(String, [UInt8])] = [("ip", Array("10.1.2.3".utf8)), ("received_at", Array(String(WorkerTests.t0 + 500).utf8))]
            for (i, r) in records.enumerated() {
                try producer.produce(topicName: "events.raw", partition: r.partition, key: Array(r.key.utf8), value: r.value,
                                     headers: headers, timestamp: WorkerTests.t0 + Int64(i), token: UInt64(i + 1))
            }
            try producer.flush(timeout: .seconds(20))
            XCTAssertEqual(failures, 0, "test records not delivered")
        }

        func worker(untilEnd: Bool, logger: Logger? = nil, configure: (inout WorkerOptions) -> Void = { _ in }) throws -> Worker {
            var options = WorkerOptions()
            options.untilEnd = untilEnd
            options.maxBatch = spec.source.maxBatch
            options.flushTimeout = .seconds(15)
            configure(&options)
            XCTAssertEqual(spec.source.brokers, broker.bootstrapServers)
            return Worker(spec: spec, registry: BuiltinStages.registry, bootstrap: spec.source.brokers, options: options, logger: logger ?? self.logger)
        }

        /// Runs a worker on its own thread and waits for it; rethrows what `run()` threw.
        func runWorker(untilEnd: Bool, timeout: Double) throws {
            let worker = try worker(untilEnd: untilEnd)
            let run = WorkerThread(worker)
            if !run.wait(seconds: timeout) {
                worker.requestStop()
                _ = run.wait(seconds: 20)
                XCTFail("worker run did not return within \(timeout) s")
            }
            if let error = run.error { throw error }
        }

        func consumer() throws -> KafkaConsumer {
            try KafkaConsumer(
                config: ["bootstrap.servers": broker.bootstrapServers, "group.id": "reader-\(UUID().uuidString.prefix(8))",
                         "fetch.wait.max.ms": "50"],
                logger: logger)
        }

        func endOffsets(_ topic: String, partitions: Int) throws -> [TopicPartition: Int64] {
            let c = try consumer()
            defer { try? c.close() }
            var out: [TopicPartition: Int64] = [:]
            for p in 0..<Int32(partitions) {
                let tp = TopicPartition(topic: topic, partition: p)
                out[tp] = try c.watermarks(tp, timeout: .seconds(10)).high
            }
            return out
        }

        /// The worker group's committed offsets of the raw topic (asked with the same group id, without joining).
        func committed(partitions: Int) throws -> [TopicPartition: Int64] {
            let c = try KafkaConsumer(config: ["bootstrap.servers": broker.bootstrapServers, "group.id": group], logger: logger)
            defer { try? c.close() }
            return try c.committed((0..<Int32(partitions)).map { TopicPartition(topic: "events.raw", partition: $0) }, timeout: .seconds(10))
        }

        typealias Message = (key: String?, value: [String: Any])

        /// Every record of a topic, read from the beginning up to the current end offsets.
        func readAll(_ topic: String, partitions: Int) throws -> [Message] {
            let ends = try endOffsets(topic, partitions: partitions)
            let total = Int(ends.values.reduce(0, +))
            let c = try consumer()
            defer { try? c.close() }
            try c.assign(Dictionary(uniqueKeysWithValues: ends.keys.map { ($0, KafkaConsumer.beginning) }))
            var out: [Message] = []
            let deadline = ContinuousClock.now + .seconds(15)
            while out.count < total && ContinuousClock.now < deadline {
                _ = try c.poll(maxMessages: 500, timeout: .milliseconds(100)) { m in
                    let key = m.key.count > 0 ? String(decoding: m.key, as: UTF8.self) : nil
                    let value = (try? JSONSerialization.jsonObject(with: Data(m.value))) as? [String: Any] ?? [:]
                    out.append((key, value))
                }
            }
            XCTAssertEqual(out.count, total, "records read back from \(topic)")
            return out
        }

        func readOutputs(enriched: Int, dlq: Int) throws -> (enriched: [Message], dlq: [Message]) {
            (try readAll("events.enriched", partitions: 4), try readAll("events.dlq", partitions: 2))
        }
    }
}

/// Slows every batch down (one worker of a group finishes later than the other).
struct SlowBatches: WorkerHook {
    var seconds: Double
    func willProcess(records: Int, worker: WorkerHookContext) { Thread.sleep(forTimeInterval: seconds) }
}

/// The info lines of several workers' loggers, in the order they were logged, each prefixed with its worker's name.
final class LineCapture: Sendable {
    private let store = Mutex<[String]>([])
    var lines: [String] { store.withLock { $0 } }

    func logger(prefix: String) -> Logger {
        var logger = Logger(label: prefix) { [self] _ in Handler(capture: self, prefix: prefix) }
        logger.logLevel = .info
        return logger
    }

    struct Handler: LogHandler {
        let capture: LineCapture
        let prefix: String
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let line = "\(prefix): \(event.message)"
            capture.store.withLock { $0.append(line) }
        }
    }
}

/// `Worker.run()` on a dedicated thread (as `runOnThread()` does), with a blocking wait.
final class WorkerThread: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var finished = false
    private var thrown: (any Error)?

    init(_ worker: Worker) {
        let thread = Thread { [self] in
            var failure: (any Error)?
            do { try worker.run() } catch { failure = error }
            lock.withLock { thrown = failure; finished = true }
            done.signal()
        }
        thread.stackSize = 8 << 20
        thread.start()
    }

    var isDone: Bool { lock.withLock { finished } }
    var error: (any Error)? { lock.withLock { thrown } }

    /// Whether the run ended within `seconds`.
    func wait(seconds: Double) -> Bool {
        if isDone { return true }
        guard done.wait(timeout: .now() + seconds) == .success else { return false }
        done.signal()  // later waits return at once
        return true
    }
}
