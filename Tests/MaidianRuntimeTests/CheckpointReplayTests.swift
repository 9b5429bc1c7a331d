import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import MaidianRecording
@testable import MaidianStages
@testable import MaidianTools
import XCTest

@testable import MaidianRuntime

/// The failover argument of docs/recovery.md without Kafka: an engine A runs the whole sample; at a batch end
/// ("the commit") an engine B takes over every partition from A's replay points, re-reads up to the commit
/// with outputs suppressed, then goes on, in batches of another size (large where A's are small: where a
/// watermark stands at a batch end must not decide what is written). What A wrote up to the commit plus what
/// B writes must be exactly what A wrote in all (B may repeat A's records, identically; never add others).
///
/// The pipeline is `app-analytics.yaml` with short state horizons (visit timeout 3 min, trail age 5 min,
/// duplicates within 2 min) so that replay points fall inside the sample's hour rather than at its start.
final class CheckpointReplayTests: XCTestCase {
    struct Out: Hashable {
        var topic: String
        var key: [UInt8]
        var value: [UInt8]
    }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let shared = root.appendingPathComponent("testdata")

    func testTakeoverFromReplayPointsWritesWhatAnUninterruptedRunWrites() throws {
        let sample = Self.shared.appendingPathComponent("traffic/sample.ndjson").path
        guard FileManager.default.fileExists(atPath: sample) else {
            XCTFail("missing \(sample): this test needs testdata/traffic")
            return
        }
        let records = Bench.sourceRecords(try Recording.read(path: sample), partitions: 8)
        // A in small batches (its watermarks stop often), B in large ones.
        try assertTakeovers(records, batchA: 40, batchB: 1500, minimumOutputs: 20_000) { n in
            Array(stride(from: n / 6, to: n, by: n / 6))
        }
    }

    /// The same on `sample-v2.ndjson`, whose offline caches make events late by minutes to hours: whether a late
    /// event goes into its window's partial or into a late partial must not depend on where batches end (A and B
    /// cut the input differently; both partials would reach the merger and count it twice).
    func testTakeoverOnRevision2TrafficWritesWhatAnUninterruptedRunWrites() throws {
        let sample = Self.shared.appendingPathComponent("traffic/sample-v2.ndjson").path
        guard FileManager.default.fileExists(atPath: sample) else {
            XCTFail("missing \(sample): this test needs testdata/traffic")
            return
        }
        let records = Bench.sourceRecords(try Recording.read(path: sample), partitions: 8)
        // Visits whose closing depends on watermark timing (`dwell_loose` of the answers: `timeout` or
        // `end_of_input`) may close either way; every other output must be the same.
        let loose = { (o: Out) in
            o.topic == "metrics.dwell" && (o.value.containsSubsequence(#""closed_by":"timeout""#) || o.value.containsSubsequence(#""closed_by":"end_of_input""#))
        }
        // Still, each such visit must be written: by A before the commit or by B.
        let visit = { (o: Out) -> String in
            let v = (try? JSONSerialization.jsonObject(with: Data(o.value))) as? [String: Any] ?? [:]
            return "\(v["distinct_id"] ?? "") \(v["page"] ?? "") \(v["enter_time"] ?? "")"
        }
        try assertTakeovers(records, batchA: 40, batchB: 1500, minimumOutputs: 20_000, ignoring: loose, sameWhenIgnored: visit) { n in
            Array(stride(from: n / 6, to: n, by: n / 6))
        }
    }

    /// A crash `lateness` behind the newest event time takes a trail reaching `trail_max_age` before it:
    /// the replay point must lie that much further back (the state horizon includes the lateness).
    func testLateCrashTrailReachesBeforeTheTrailAge() throws {
        let t: Int64 = 1_763_700_000_000
        func record(_ offset: Int64, _ user: String, _ event: String, _ time: Int64) -> Bench.SourceRecord {
            let json = #"[{"type":"track","event":"\#(event)","time":\#(time),"distinct_id":"\#(user)","_track_id":\#(offset),"properties":{"$screen_name":"HomeViewController","$app_version":"3.2.1"}}]"#
            return Bench.SourceRecord(partition: 0, offset: offset, timestamp: time, key: Array(user.utf8), value: Array(json.utf8),
                                      ip: nil, receivedAt: nil, ua: nil, project: nil)
        }
        let records = [
            record(0, "u1", "$AppViewScreen", t),
            record(1, "u2", "$AppClick", t + 120_000),
            record(2, "u2", "$AppClick", t + 320_000),  // the watermark passes t + 290 s
            record(3, "u1", "$AppCrashed", t + 295_000),  // not late; its trail reaches back to t - 5 s
        ]
        try assertTakeovers(records, batchA: 1, batchB: 1, minimumOutputs: 1) { _ in [2] }
    }

    /// A crash that arrives late takes no trail entry older than `trail_max_age` before its record's watermark:
    /// an older one (here the page view at t) lies before the replay point, so a worker that took the partition
    /// over would not know it while one that never stopped would, and the two would write different trails. The
    /// install is still known when the crash comes (its click at t + 3 min).
    func testLateCrashTrailReachesOnlyWhatATakeoverRebuilds() throws {
        let t: Int64 = 1_763_700_000_000
        let m: Int64 = 60_000
        func record(_ offset: Int64, _ user: String, _ event: String, _ time: Int64, received: Int64) -> Bench.SourceRecord {
            let json = #"[{"type":"track","event":"\#(event)","time":\#(time),"distinct_id":"\#(user)","_track_id":\#(offset),"properties":{"$screen_name":"HomeViewController","$app_version":"3.2.1"}}]"#
            return Bench.SourceRecord(partition: 0, offset: offset, timestamp: received, key: Array(user.utf8), value: Array(json.utf8),
                                      ip: nil, receivedAt: nil, ua: nil, project: nil)
        }
        let records = [
            record(0, "u1", "$AppViewScreen", t, received: t),
            record(1, "u1", "$AppClick", t + 3 * m, received: t + 3 * m),
            record(2, "u2", "$AppClick", t + 7 * m, received: t + 7 * m),
            record(3, "u1", "$AppCrashed", t + 4 * m + 30_000, received: t + 7 * m + 30_000),
        ]
        try assertTakeovers(records, batchA: 1, batchB: 1, minimumOutputs: 1) { _ in [2] }
    }

    /// An install whose only events came late keeps its trail for a crash that comes late after them, wherever
    /// batches end. Its events are old in event time, so the install was forgotten at the next minute's sweep;
    /// a takeover's re-read ends where the replay does and sweeps there, the first time in its run, while the
    /// worker that never stopped had swept before the late uploads and wrote the clicks on the crash's trail
    /// (the chaos test's flake on sample-v2: a takeover at the crash's record wrote a shorter trail).
    func testLateUploadsKeepTheirInstallForALateCrashWhereverBatchesEnd() throws {
        let t: Int64 = 1_763_700_000_000
        let m: Int64 = 60_000
        func record(_ offset: Int64, _ user: String, _ events: [(String, Int64)], received: Int64) -> Bench.SourceRecord {
            let list = events.enumerated().map { i, e in
                #"{"type":"track","event":"\#(e.0)","time":\#(e.1),"distinct_id":"\#(user)","_track_id":\#(offset * 10 + Int64(i)),"properties":{"$screen_name":"HomeViewController","$app_version":"3.2.1","$element_path":"UIButton[\#(i)]"}}"#
            }
            let json = "[" + list.joined(separator: ",") + "]"
            return Bench.SourceRecord(partition: 0, offset: offset, timestamp: received, key: Array(user.utf8), value: Array(json.utf8),
                                      ip: nil, receivedAt: nil, ua: nil, project: nil)
        }
        let records = [
            record(0, "u2", [("$AppClick", t)], received: t),
            record(1, "u2", [("$AppClick", t + 20 * m)], received: t + 20 * m),  // a sweep at minute 19
            record(2, "u1", [("$AppClick", t + 1 * m), ("$AppClick", t + 2 * m)], received: t + 20 * m + 10_000),
            record(3, "u1", [("$AppCrashed", t + 3 * m)], received: t + 20 * m + 11_000),
        ]
        // The trail holds both late clicks, whether a batch ends between the uploads and the crash (where the
        // sweep of minute 19 then falls) or not: the outputs compared are not all empty.
        for size in [1, 3] {
            let e = try Self.engine(try Self.spec())
            var trails: [String] = []
            try Self.run(e, records, batchSize: size) { batch, output in
                trails += Self.outputs(batch, output).filter { $0.topic == "crash.trails" }.map { String(decoding: $0.value, as: UTF8.self) }
            }
            XCTAssertEqual(trails.count, 1, "batches of \(size)")
            XCTAssertEqual(trails.first?.components(separatedBy: "$AppClick").count, 3, "batches of \(size): \(trails)")
        }
        try assertTakeovers(records, batchA: 1, batchB: 4, minimumOutputs: 1) { _ in [2] }
    }

    /// Runs A over `records` in batches of `batchA`, then for each cut (a batch index of A) a B that takes
    /// over every partition at A's checkpoint after that batch, in batches of `batchB`; see the class comment.
    func assertTakeovers(_ records: [Bench.SourceRecord], batchA: Int, batchB: Int, minimumOutputs: Int,
                         ignoring: (Out) -> Bool = { _ in false }, sameWhenIgnored: ((Out) -> String)? = nil, spec given: PipelineSpec? = nil,
                         cuts: (Int) -> [Int], file: StaticString = #filePath, line: UInt = #line) throws {
        let spec = try given ?? Self.spec()
        let a = try Self.engine(spec)
        var outputsA: [(Out, batch: Int)] = []
        var checkpoints: [[Int32: (next: Int64, point: ReplayPoint)]] = []
        var held: [Int32: (next: Int64, point: ReplayPoint)] = [:]
        var k = 0
        try Self.run(a, records, batchSize: batchA) { batch, output in
            for o in Self.outputs(batch, output) { outputsA.append((o, k)) }
            var last: [Int32: Int64] = [:]
            for r in batch.records { last[r.partition] = r.offset }
            for (p, offset) in last { held[p] = (offset + 1, a.replayPoint(partition: p, next: offset + 1)!) }
            checkpoints.append(held)
            k += 1
        }
        let all = Set(outputsA.map(\.0))
        XCTAssertGreaterThanOrEqual(all.count, minimumOutputs, file: file, line: line)

        for cut in cuts(checkpoints.count) {
            let committed = checkpoints[cut]
            let reread = committed.values.map { $0.next - $0.point.offset }.reduce(0, +)
            // B: restores every partition from its replay point and re-reads from there.
            let b = try Self.engine(spec)
            for (p, c) in committed { b.restore(partition: p, from: c.point) }
            let input = records.filter { r in committed[r.partition].map { r.offset >= $0.point.offset } ?? true }
            var outputsB = Set<Out>()
            try Self.run(b, input, batchSize: batchB, replayUntil: committed.mapValues(\.next)) { batch, output in
                outputsB.formUnion(Self.outputs(batch, output, skippingReplayed: true))
            }

            let before = Set(outputsA.filter { $0.batch <= cut }.map(\.0))
            let missing = all.subtracting(before).subtracting(outputsB).filter { !ignoring($0) }
            let extra = outputsB.subtracting(all).filter { !ignoring($0) }
            for o in missing.prefix(3) { XCTFail("cut \(cut): B does not write \(o.topic) \(String(decoding: o.value.prefix(300), as: UTF8.self))", file: file, line: line) }
            for o in extra.prefix(3) { XCTFail("cut \(cut): B writes what A never wrote: \(o.topic) \(String(decoding: o.value.prefix(300), as: UTF8.self))", file: file, line: line) }
            XCTAssertEqual(missing.count + extra.count, 0, "cut after batch \(cut): \(missing.count) outputs missing, \(extra.count) extra; \(reread) records re-read", file: file, line: line)
            if let same = sameWhenIgnored {
                // Ignored outputs may differ, but what `same` names must be written by A before the commit or by B.
                let wanted = Set(all.filter(ignoring).map(same))
                let got = Set(before.union(outputsB).filter(ignoring).map(same))
                let lost = wanted.subtracting(got)
                for w in lost.sorted().prefix(3) { XCTFail("cut \(cut): neither A before the commit nor B writes \(w)", file: file, line: line) }
                XCTAssertEqual(lost.count, 0, "cut after batch \(cut): \(lost.count) ignored outputs lost", file: file, line: line)
            }
        }
    }

    /// `app-analytics.yaml` with short horizons (see the class comment).
    static func spec() throws -> PipelineSpec {
        let path = root.appendingPathComponent("pipelines/app-analytics.yaml").path
        var text = try String(contentsOfFile: path, encoding: .utf8)
        for (from, to) in [("visit_timeout: 30m", "visit_timeout: 3m"), ("trail_max_age: 1h", "trail_max_age: 5m"), ("window: 10m", "window: 2m")] {
            XCTAssertTrue(text.contains(from), from)
            text = text.replacingOccurrences(of: from, with: to)
        }
        return try PipelineSpec.parse(yaml: text, file: path, environment: [
            "MAIDIAN_GEO_DB": shared.appendingPathComponent("geo/test-city.mmdb").path,
            "MAIDIAN_RULES": shared.appendingPathComponent("traffic/rules-sample.yaml").path,
        ])
    }

    static func engine(_ spec: PipelineSpec) throws -> PipelineEngine {
        let e = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Logger(label: "replay-test") { _ in SwiftLogNoOpLogHandler() })
        e.repartitioning?.connect(partialsTopic: "test.partials", partialsPartitions: 4, sourcePartitions: 8)
        return e
    }

    /// Runs `records` in batches, flagging records before `replayUntil[partition]` as re-read; then `finish`.
    static func run(_ engine: PipelineEngine, _ records: [Bench.SourceRecord], batchSize: Int, replayUntil: [Int32: Int64] = [:],
                    _ sink: (borrowing EventBatch, borrowing OutputBuffer) -> Void) throws {
        var batch = EventBatch()
        var output = OutputBuffer()
        let topic = batch.topicIndex("events.raw")
        var i = 0
        while i < records.count {
            batch.reset()
            output.reset()
            for r in records[i..<min(i + batchSize, records.count)] { Bench.appendRecord(&batch, topic, r) }
            for r in batch.records.indices where batch.records[r].offset < (replayUntil[batch.records[r].partition] ?? 0) {
                batch.records[r].replay = true
            }
            try engine.process(&batch, output: &output)
            sink(batch, output)
            i += batchSize
        }
        batch.reset()
        output.reset()
        try engine.finish(output: &output)
        sink(batch, output)
    }

    /// The outputs of a batch, without the internal topic's progress messages (where a run reports its
    /// watermark depends on its batches; the mergers only use the latest). `skippingReplayed`: without what
    /// re-read records caused (the worker does not produce those).
    static func outputs(_ batch: borrowing EventBatch, _ output: borrowing OutputBuffer, skippingReplayed: Bool = false) -> [Out] {
        var out: [Out] = []
        for m in output.messages {
            if skippingReplayed && m.record >= 0 && batch.records[Int(m.record)].replay { continue }
            let value = Array(output.bytes[Int(m.value.start)..<Int(m.value.end)])
            let topic = output.topics[Int(m.topic)]
            let key = m.key.isPresent ? Array(output.bytes[Int(m.key.start)..<Int(m.key.end)]) : []
            // A bundle counts as the messages it holds (which ones share a record depends on where batches end);
            // progress messages depend on where batches end too.
            let messages = topic == "test.partials" && InternalMessage.isBundle(value)
                ? ((try? InternalMessage.bundleItems(value)) ?? []).map { (key: $0.key.map { Array(value[$0]) } ?? [], value: Array(value[$0.value])) }
                : [(key: key, value: value)]
            for (key, value) in messages {
                if topic == "test.partials" && value.count > 1 && value[1] == 2 { continue }
                out.append(Out(topic: topic, key: key, value: value))
            }
        }
        return out
    }
}

private extension Array where Element == UInt8 {
    func containsSubsequence(_ text: String) -> Bool {
        let needle = Array(text.utf8)
        guard needle.count <= count else { return false }
        return (0...(count - needle.count)).contains { i in self[i..<(i + needle.count)].elementsEqual(needle) }
    }
}
