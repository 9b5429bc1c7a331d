import Foundation
import Logging
import XCTest
import MaidianEvents
import MaidianPipeline
import MaidianRecording
@testable import MaidianStages
import MaidianTools

final class WindowMergerTests: XCTestCase {
    static let minute: Int64 = 60_000

    /// Builds internal records the way the windows stage writes them, with offsets per internal partition.
    final class Feed {
        let merger: WindowMerger
        var output = OutputBuffer()
        var offsets: [Int32: Int64] = [:]
        var batch: [InternalRecord] = []
        /// Written `metrics.counts` records: key, value, the index of the record they are attributed to.
        var written: [(key: String, value: [String: Any], record: Int32)] = []

        /// `allowedLateness` 0: written windows are not kept (the merger as it was before late events).
        init(sources: Int32, allowedLateness: Int64 = 0, lateFlush: Duration = .zero, clock: ProcessingClock = .live) {
            merger = WindowMerger(countsTopic: "metrics.counts", allowedLateness: allowedLateness, lateFlush: lateFlush, clock: clock,
                                  logger: Logger(label: "test"))
            merger.sourcePartitions = sources
        }

        static func key(_ rule: String, window: Int64) -> String { "pv|\(rule)|\(window * minute)|" }

        /// A pv partial of `source` for window `window` (minutes) of `rule`.
        func partial(_ source: Int32, window: Int64, rule: String = "home", count: Int64, users: [UInt64],
                     durations: [Int64]? = nil, internal q: Int32 = 0, replay: Bool = false) {
            var set = UserSet()
            for u in users { set.insert(u) }
            var digest = DurationDigest()
            for d in durations ?? [] { digest.add(d) }
            let metric = durations == nil ? "pv" : "dwell"
            let head = "{\"metric\":\"\(metric)\",\"rule\":\"\(rule)\",\"window_start\":\(window * minute),\"window_end\":\((window + 1) * minute),\"dims\":{}"
            let p = PartialAggregate(sourcePartition: source, windowEnd: (window + 1) * minute, head: Array(head.utf8), count: count,
                                     users: set, isDwell: durations != nil, sumMs: durations?.reduce(0, +) ?? 0, durations: digest)
            add(.partial(p), key: "\(metric)|\(rule)|\(window * minute)|", q: q, replay: replay)
        }

        /// A late pv partial: the contribution of the record at `offset` of `source` to a window it closed.
        func late(_ source: Int32, window: Int64, offset: Int64, rule: String = "home", count: Int64, users: [UInt64],
                  internal q: Int32 = 0, replay: Bool = false) {
            var set = UserSet()
            for u in users { set.insert(u) }
            let head = "{\"metric\":\"pv\",\"rule\":\"\(rule)\",\"window_start\":\(window * minute),\"window_end\":\((window + 1) * minute),\"dims\":{}"
            var value: [UInt8] = []
            Array(head.utf8).withByteView { h in
                InternalMessage.encodePartial(sourcePartition: source, windowEnd: (window + 1) * minute, head: h, count: count, isDwell: false,
                                              sumMs: 0, durations: DurationDigest(), lateOffset: offset, into: &value) { set.encode(into: &$0) }
            }
            let o = offsets[q, default: 0]
            offsets[q] = o + 1
            batch.append(InternalRecord(partition: q, offset: o, key: Array("pv|\(rule)|\(window * minute)|".utf8), value: value,
                                        index: Int32(batch.count), replay: replay))
        }

        func progress(_ source: Int32, _ watermark: Int64, idle: Bool = false, internal q: Int32 = 0, replay: Bool = false) {
            add(.progress(source: source, watermark: watermark, idle: idle), key: "", q: q, replay: replay)
        }

        func add(_ m: InternalMessage, key: String, q: Int32, replay: Bool) {
            var value: [UInt8] = []
            m.encode(into: &value)
            let offset = offsets[q, default: 0]
            offsets[q] = offset + 1
            batch.append(InternalRecord(partition: q, offset: offset, key: Array(key.utf8), value: value, index: Int32(batch.count), replay: replay))
        }

        /// Hands the records gathered so far to the merger as one batch.
        @discardableResult
        func flush() throws -> [(key: String, value: [String: Any], record: Int32)] {
            output.reset()
            try merger.process(batch, output: &output)
            batch = []
            var out: [(String, [String: Any], Int32)] = []
            for (i, m) in output.messages.enumerated() {
                XCTAssertEqual(output.topics[Int(m.topic)], "metrics.counts")
                let v = try JSONSerialization.jsonObject(with: Data(output.valueString(i).utf8)) as? [String: Any] ?? [:]
                out.append((output.keyString(i) ?? "", v, m.record))
            }
            written += out
            return out
        }
    }

    func int(_ v: Any?) -> Int64? { (v as? NSNumber)?.int64Value }

    func testWindowIsWrittenOnlyOnceEverySourceProgressPassedItsEnd() throws {
        let f = Feed(sources: 2)
        f.partial(0, window: 0, count: 3, users: [1, 2])
        f.partial(1, window: 0, count: 2, users: [2, 3])
        f.progress(0, 5 * Self.minute)
        XCTAssertTrue(try f.flush().isEmpty, "source 1 has not reported")
        f.progress(1, Self.minute - 1)
        XCTAssertTrue(try f.flush().isEmpty, "source 1 is 1 ms short of the window end")
        f.progress(1, Self.minute)
        let out = try f.flush()
        XCTAssertEqual(out.count, 1)
        XCTAssertEqual(out.first?.key, Feed.key("home", window: 0))
        XCTAssertEqual(int(out.first?.value["count"]), 5)
        XCTAssertEqual(int(out.first?.value["users"]), 3, "a user seen on both sources counts once")
        XCTAssertEqual(int(out.first?.value["window_end"]), Self.minute)
        XCTAssertNil(out.first?.value["sum_ms"])
        XCTAssertEqual(out.first?.record, 0, "attributed to the progress record that completed it")
        f.progress(0, 10 * Self.minute)
        f.progress(1, 10 * Self.minute)
        XCTAssertTrue(try f.flush().isEmpty, "written once")
        XCTAssertEqual(f.merger.windowsWritten.value, 1)
    }

    func testWindowsAreWrittenInOrderOfTheirKeysAndOnlyThosePassed() throws {
        let f = Feed(sources: 1)
        f.partial(0, window: 2, rule: "b", count: 1, users: [1])
        f.partial(0, window: 0, rule: "b", count: 1, users: [1])
        f.partial(0, window: 0, rule: "a", count: 1, users: [1])
        f.progress(0, 2 * Self.minute)
        XCTAssertEqual(try f.flush().map(\.key), [Feed.key("a", window: 0), Feed.key("b", window: 0)])
        f.progress(0, 3 * Self.minute)
        XCTAssertEqual(try f.flush().map(\.key), [Feed.key("b", window: 2)])
    }

    func testDwellPartialsMerge() throws {
        let f = Feed(sources: 2)
        f.partial(0, window: 0, count: 2, users: [1, 2], durations: [5_000, 9_000])
        f.partial(1, window: 0, count: 3, users: [2, 3, 3], durations: [1_000, 2_000, 30_000])
        f.progress(0, Self.minute)
        f.progress(1, Self.minute)
        let v = try XCTUnwrap(try f.flush().first?.value)
        XCTAssertEqual(int(v["count"]), 5)
        XCTAssertEqual(int(v["users"]), 3)
        XCTAssertEqual(int(v["sum_ms"]), 47_000)
        XCTAssertEqual(int(v["avg_ms"]), 9_400)
        XCTAssertEqual(int(v["p50_ms"]), 5_000)
        XCTAssertEqual(int(v["p90_ms"]), 30_000)
    }

    /// The merger reads users and durations out of the partials' bytes; its records must be what merging the
    /// partials' `UserSet`s and `DurationDigest`s gives, exact sets and sketches, exact durations and buckets,
    /// with a source's later partial replacing its earlier one.
    func testMergedRecordsEqualMergingTheSetsAndDigests() throws {
        // Fixed seeds: the same cases every run, and together they cover sketches and large exact sets.
        var sawSketch = false, sawLargeExact = false
        for seed: UInt64 in [1, 2, 3, 4, 5, 6] {
            let (sketch, largeExact) = try checkMergedRecords(seed: seed)
            sawSketch = sawSketch || sketch
            sawLargeExact = sawLargeExact || largeExact
        }
        XCTAssertTrue(sawSketch, "some merged sets are sketches")
        XCTAssertTrue(sawLargeExact, "some are large exact sets")
    }

    /// One random workload of `testMergedRecordsEqualMergingTheSetsAndDigests`; returns whether it held a
    /// sketch and a large exact set.
    func checkMergedRecords(seed: UInt64) throws -> (Bool, Bool) {
        var random = SplitMix64(seed: seed)
        let sources: Int32 = 4
        let f = Feed(sources: sources)
        var want: [String: (count: Int64, users: UserSet, sum: Int64, durations: DurationDigest?)] = [:]
        for window in Int64(0)..<12 {
            // Sizes around the exact limits: a handful, just below, just above, far beyond.
            let size = [3, 400, 990, 1_001, 2_500][Int(window) % 5]
            let dwell = window % 3 == 0
            var latest: [Int32: (Int64, UserSet, [Int64])] = [:]
            for source in 0..<sources where random.next() % 4 != 0 {
                for _ in 0..<(1 + random.next() % 2) {  // sometimes twice: the later one counts
                    let n = Int(random.next() % UInt64(size)) + 1
                    let users = (0..<n).map { _ in random.next() % UInt64(size * 2) }
                    let durations = dwell ? (0..<n).map { _ in Int64(random.next() % 600_000) } : nil
                    let count = Int64(n)
                    f.partial(source, window: window, count: count, users: users, durations: durations)
                    var set = UserSet()
                    for u in users { set.insert(u) }
                    latest[source] = (count, set, durations ?? [])
                }
            }
            guard !latest.isEmpty else { continue }
            var users = UserSet(), digest = DurationDigest(), count: Int64 = 0, sum: Int64 = 0
            for source in latest.keys.sorted() {
                let (c, set, durations) = latest[source]!
                count += c
                users.merge(set)
                var d = DurationDigest()
                for v in durations { d.add(v) }
                digest.merge(d)
                sum += durations.reduce(0, +)
            }
            want[(dwell ? "dwell" : "pv") + "|home|\(window * Self.minute)|"] = (count, users, sum, dwell ? digest : nil)
        }
        for source in 0..<sources { f.progress(source, 20 * Self.minute) }
        let out = try f.flush()
        XCTAssertEqual(out.count, want.count, "seed \(seed)")
        for record in out {
            let w = try XCTUnwrap(want[record.key], "seed \(seed): \(record.key)")
            XCTAssertEqual(int(record.value["count"]), w.count, "seed \(seed): \(record.key)")
            XCTAssertEqual(int(record.value["users"]), Int64(w.users.count), "seed \(seed): \(record.key)")
            if let d = w.durations {
                XCTAssertEqual(int(record.value["sum_ms"]), w.sum, "seed \(seed): \(record.key)")
                XCTAssertEqual(int(record.value["p50_ms"]), d.percentile(0.5), "seed \(seed): \(record.key)")
                XCTAssertEqual(int(record.value["p90_ms"]), d.percentile(0.9), "seed \(seed): \(record.key)")
            } else {
                XCTAssertNil(record.value["sum_ms"])
            }
        }
        return (want.values.contains { $0.users.isSketch }, want.values.contains { !$0.users.isSketch && $0.users.count > 500 })
    }

    func testLatestPartialPerSourceReplacesTheEarlierOne() throws {
        let f = Feed(sources: 1)
        f.partial(0, window: 0, count: 3, users: [1, 2, 3])
        f.partial(0, window: 0, count: 3, users: [1, 2, 3])  // a re-read source writes it again
        f.progress(0, Self.minute)
        XCTAssertEqual(int(try f.flush().first?.value["count"]), 3)
    }

    func testIdleSourceIsLeftOut() throws {
        let f = Feed(sources: 3)
        f.partial(0, window: 0, count: 1, users: [1])
        f.partial(2, window: 0, count: 1, users: [2])
        f.progress(0, 2 * Self.minute)
        f.progress(1, .min, idle: true)  // never had data
        f.progress(2, 30_000)
        XCTAssertTrue(try f.flush().isEmpty, "source 2 still holds window 0 back")
        f.progress(2, 30_000, idle: true)
        let out = try f.flush()
        XCTAssertEqual(int(out.first?.value["count"]), 2)
        XCTAssertEqual(out.count, 1)
    }

    /// A source back from idle sends partials of windows written without it: its events are not late (wire
    /// format §5), so they count; the window is written again with them. Its copies (re-read by a new owner
    /// after it passed the window) do not count again.
    func testPartialOfASourceBackFromIdleIsAddedToTheWrittenWindow() throws {
        let f = Feed(sources: 2, allowedLateness: 24 * 60 * Self.minute)
        f.partial(0, window: 0, count: 1, users: [1])
        f.progress(0, 2 * Self.minute)
        f.progress(1, 0, idle: true)
        XCTAssertEqual(try f.flush().count, 1)
        // The idle source comes back with a partial for the written window.
        f.partial(1, window: 0, count: 5, users: [7])
        f.progress(1, 3 * Self.minute)
        let out = try f.flush()
        XCTAssertEqual(f.merger.latePartials.value, 1)
        XCTAssertEqual(out.map { int($0.value["count"]) }, [6])
        XCTAssertEqual(out.map { int($0.value["users"]) }, [2])
        // Its copy, sent again after its takeover, is left out.
        f.partial(1, window: 0, count: 5, users: [7])
        f.progress(1, 3 * Self.minute)
        XCTAssertTrue(try f.flush().isEmpty)
        XCTAssertEqual(f.merger.partialCopies.value, 1)
        // Without allowed lateness written windows are not kept: nothing to add it to.
        let g = Feed(sources: 2)
        g.partial(0, window: 0, count: 1, users: [1])
        g.progress(0, 2 * Self.minute)
        g.progress(1, 0, idle: true)
        g.partial(1, window: 3, count: 1, users: [2])
        XCTAssertEqual(try g.flush().count, 1)
        g.partial(1, window: 0, count: 5, users: [7])
        g.progress(1, 3 * Self.minute)
        XCTAssertTrue(try g.flush().isEmpty)
    }

    func testLatePartialsRewriteAWrittenWindowOncePerRecord() throws {
        let f = Feed(sources: 2, allowedLateness: 24 * 60 * Self.minute)
        f.partial(0, window: 0, count: 2, users: [1, 2])
        f.partial(1, window: 0, count: 1, users: [3])
        f.progress(0, 2 * Self.minute)
        f.progress(1, 2 * Self.minute)
        XCTAssertEqual(try f.flush().count, 1)
        // Late contributions of two records of source 1; the second is sent again (its source re-read it).
        f.late(1, window: 0, offset: 40, count: 1, users: [2])
        f.late(1, window: 0, offset: 41, count: 2, users: [4, 5])
        f.late(1, window: 0, offset: 41, count: 2, users: [4, 5])
        let out = try f.flush()
        XCTAssertEqual(out.count, 1, "written again once for the batch")
        XCTAssertEqual(int(out.first?.value["count"]), 6)
        XCTAssertEqual(int(out.first?.value["users"]), 5, "exact: user 2 counted once")
        XCTAssertEqual(out.first?.key, Feed.key("home", window: 0))
        XCTAssertEqual(f.merger.latePartials.value, 0)
        XCTAssertEqual(f.merger.windowsRewritten.value, 1)
        // A late partial for a key the window did not have yet is written as a new key.
        f.late(0, window: 0, offset: 7, rule: "other", count: 1, users: [9])
        XCTAssertEqual(try f.flush().map(\.key), [Feed.key("other", window: 0)])
        // A late partial for a window not written yet waits with its partials.
        f.partial(0, window: 3, count: 1, users: [1])
        f.late(1, window: 3, offset: 50, count: 1, users: [2])
        XCTAssertTrue(try f.flush().isEmpty)
        f.progress(0, 5 * Self.minute)
        f.progress(1, 5 * Self.minute)
        let w3 = try f.flush()
        XCTAssertEqual(w3.map { int($0.value["count"]) }, [2])
    }

    func testLateRewritesAreWrittenAtMostOncePerLateFlush() throws {
        let f = Feed(sources: 1, allowedLateness: 24 * 60 * Self.minute, lateFlush: .seconds(3600))
        f.partial(0, window: 0, count: 1, users: [1])
        f.progress(0, 2 * Self.minute)
        try f.flush()
        f.late(0, window: 0, offset: 10, count: 1, users: [2])
        XCTAssertEqual(try f.flush().map { int($0.value["count"]) }, [2], "the first rewrite")
        f.late(0, window: 0, offset: 11, count: 1, users: [3])
        XCTAssertTrue(try f.flush().isEmpty, "within the late flush")
        XCTAssertFalse(f.merger.isComplete(partition: 0))
        f.progress(0, .max)
        XCTAssertEqual(try f.flush().map { int($0.value["count"]) }, [3], "the end of the input writes every change")
        XCTAssertTrue(f.merger.isComplete(partition: 0))
    }

    /// On a frozen processing clock (offline runs: bench, pipeline tests) the late flush never passes, however
    /// long the run takes: rewrites come at the first change and at the end of the input, as in a fast run. On
    /// the live clock a slow run writes the changes in between too.
    func testAFrozenClockRewritesTheSameHoweverSlowTheRun() throws {
        func run(_ clock: ProcessingClock) throws -> [Int64?] {
            let f = Feed(sources: 1, allowedLateness: 24 * 60 * Self.minute, lateFlush: .milliseconds(1), clock: clock)
            f.partial(0, window: 0, count: 1, users: [1])
            f.progress(0, 2 * Self.minute)
            try f.flush()
            var counts: [Int64?] = []
            for (i, user) in [UInt64(2), 3, 4].enumerated() {
                f.late(0, window: 0, offset: 10 + Int64(i), count: 1, users: [user])
                counts += try f.flush().map { int($0.value["count"]) }
                Thread.sleep(forTimeInterval: 0.005)  // longer than the late flush
            }
            f.progress(0, .max)
            return counts + (try f.flush().map { int($0.value["count"]) })
        }
        XCTAssertEqual(try run(.frozen()), [2, 4], "the first rewrite, then the end of the input")
        XCTAssertEqual(try run(.live), [2, 3, 4], "each batch: the late flush passed between them")
    }

    func testWrittenWindowsAreKeptForTheAllowedLatenessAndRebuiltOnReplay() throws {
        let f = Feed(sources: 1, allowedLateness: 24 * 60 * Self.minute)
        f.partial(0, window: 0, count: 1, users: [1])
        f.progress(0, 2 * Self.minute)
        try f.flush()
        XCTAssertEqual(f.merger.replayFrom(partition: 0)?.offset, 0, "the written window's partial is still needed")
        // A new merger re-reads from the replay point: the written window is rebuilt and takes late partials.
        let g = Feed(sources: 1, allowedLateness: 24 * 60 * Self.minute)
        g.merger.restore(partition: 0, from: ReplayPoint(offset: 0, maxEventTime: f.merger.writtenUpTo(partition: 0)))
        g.partial(0, window: 0, count: 1, users: [1], replay: true)
        g.progress(0, 2 * Self.minute, replay: true)
        g.late(0, window: 0, offset: 3, count: 1, users: [2])
        let out = try g.flush()
        XCTAssertEqual(out.map { int($0.value["count"]) }, [2])
        // Past the allowed lateness (24 h) behind the watermark, written windows are forgotten.
        f.progress(0, 25 * 60 * Self.minute)
        try f.flush()
        XCTAssertEqual(f.merger.replayFrom(partition: 0)?.offset, 2, "only the latest progress is needed now")
    }

    /// The two-worker golden run's lost late contributions: a merger that saw every source end keeps no written
    /// window, so its replay point is the sources' last progress, after some windows' first partials. A new owner
    /// re-reading from there must not rebuild such a window from the re-read alone and, with a late partial it
    /// re-reads, write it again with part of its totals.
    func testAfterEverySourceEndedAReReadWritesNoWindowAgain() throws {
        let f = Feed(sources: 2, allowedLateness: 24 * 60 * Self.minute)
        f.partial(0, window: 0, count: 2, users: [1, 2])    // 0: before the replay point
        f.progress(0, .max)                                 // 1: source 0 ended
        f.partial(1, window: 0, count: 1, users: [3])       // 2
        f.progress(1, 2 * Self.minute)                      // 3: window 0 written
        try f.flush()
        f.late(1, window: 0, offset: 40, count: 1, users: [4])  // 4: written again
        try f.flush()
        f.progress(1, .max)                                 // 5: every source ended
        try f.flush()
        XCTAssertEqual(f.written.map { int($0.value["count"]) }, [3, 4])
        XCTAssertTrue(f.merger.isComplete(partition: 0))
        let from = try XCTUnwrap(f.merger.replayFrom(partition: 0)?.offset)
        XCTAssertGreaterThan(from, 0, "nothing is kept after the end: the replay point passed window 0's first partial")

        // A new owner re-reads from the replay point up to the commit (6), then gets a re-sent copy of a final
        // partial (its source was re-read after a takeover of its own).
        let g = Feed(sources: 2, allowedLateness: 24 * 60 * Self.minute)
        g.merger.restore(partition: 0, from: ReplayPoint(offset: 0, maxEventTime: f.merger.writtenUpTo(partition: 0)))
        g.offsets[0] = from
        if from <= 1 { g.progress(0, .max, replay: true) }
        if from <= 2 { g.partial(1, window: 0, count: 1, users: [3], replay: true) }
        if from <= 3 { g.progress(1, 2 * Self.minute, replay: true) }
        g.late(1, window: 0, offset: 40, count: 1, users: [4], replay: true)
        g.progress(1, .max, replay: true)
        g.partial(1, window: 0, count: 1, users: [3])
        g.progress(1, .max)
        try g.flush()
        XCTAssertEqual(g.written.map { int($0.value["count"]) }, [], "window 0 is final: nothing is written again")
        XCTAssertTrue(g.merger.isComplete(partition: 0))

        // The same when the re-read itself sees the sources end: partials after that are copies.
        let h = Feed(sources: 2, allowedLateness: 24 * 60 * Self.minute)
        h.partial(0, window: 0, count: 2, users: [1, 2])
        h.progress(0, .max)
        h.partial(1, window: 0, count: 1, users: [3])
        h.progress(1, .max)
        h.late(1, window: 0, offset: 40, count: 1, users: [4])
        h.partial(1, window: 0, count: 1, users: [3])
        try h.flush()
        XCTAssertEqual(h.written.map { int($0.value["count"]) }, [3], "copies after the end change nothing, in any batch")
        XCTAssertEqual(h.merger.partialCopies.value, 2, "both left out and counted")
    }

    /// A window written during a re-read keeps its sources' partials merged into one; a copy of one of them that
    /// its source sent again (the first run dropped it, live, as a partial for a written window) must not be added
    /// to them: the chaos run on `sample-v2` doubled counts that way.
    func testReReadCopyOfAPartialForAWindowWrittenDuringTheReReadIsNotAdded() throws {
        let g = Feed(sources: 2, allowedLateness: 24 * 60 * Self.minute)
        g.merger.restore(partition: 0, from: ReplayPoint(offset: 0, maxEventTime: nil))
        g.partial(0, window: 0, count: 2, users: [1, 2], replay: true)
        g.partial(1, window: 0, count: 1, users: [3], replay: true)
        g.progress(0, 2 * Self.minute, replay: true)
        g.progress(1, 2 * Self.minute, replay: true)
        try g.flush()  // window 0 written (not produced: re-read)
        g.partial(1, window: 0, count: 1, users: [3], replay: true)  // source 1's new owner sent it again
        g.late(1, window: 0, offset: 40, count: 1, users: [4], replay: true)
        g.progress(1, 3 * Self.minute)
        let out = try g.flush()
        XCTAssertEqual(out.map { int($0.value["count"]) }, [4], "written again once, the copy not added")
    }

    func testEveryIdleSourceDoesNotMakeLaterWindowsLate() throws {
        let f = Feed(sources: 2)
        f.partial(0, window: 0, count: 1, users: [1])
        f.progress(0, 70_000)
        f.progress(1, 65_000)
        f.progress(0, 70_000, idle: true)
        f.progress(1, 65_000, idle: true)
        try f.flush()
        XCTAssertEqual(f.written.map(\.key), [Feed.key("home", window: 0)], "no source holds window 0 back")
        // Both come back; their next windows must still be written.
        f.partial(0, window: 2, count: 1, users: [1])
        f.partial(1, window: 2, count: 1, users: [2])
        f.progress(0, 200_000)
        f.progress(1, 200_000)
        try f.flush()
        XCTAssertEqual(f.merger.latePartials.value, 0)
        XCTAssertEqual(Set(f.written.map(\.key)), [Feed.key("home", window: 0), Feed.key("home", window: 2)])
        XCTAssertEqual(int(f.written.last?.value["count"]), 2)
    }

    func testReplayFromIsTheOldestPendingPartialOrLatestProgress() throws {
        let f = Feed(sources: 2)
        XCTAssertNil(f.merger.replayFrom(partition: 0)?.offset)
        f.progress(0, 10_000)                       // offset 0
        f.progress(1, 10_000)                       // 1
        f.partial(0, window: 0, count: 1, users: [1])  // 2
        f.progress(0, 20_000)                       // 3
        f.partial(1, window: 0, count: 1, users: [2])  // 4
        f.progress(1, 30_000)                       // 5
        f.partial(0, window: 1, count: 1, users: [1])  // 6
        try f.flush()
        XCTAssertEqual(f.merger.replayFrom(partition: 0)?.offset, 2, "window 0's first partial")
        f.progress(0, Self.minute)                  // 7
        f.progress(1, Self.minute)                  // 8: window 0 written
        try f.flush()
        XCTAssertEqual(f.written.count, 1)
        XCTAssertEqual(f.merger.replayFrom(partition: 0)?.offset, 6, "window 1's partial")
        f.progress(0, 2 * Self.minute)              // 9
        f.progress(1, 2 * Self.minute)              // 10: window 1 written
        try f.flush()
        XCTAssertEqual(f.merger.replayFrom(partition: 0)?.offset, 9, "the latest progress of each source")
        XCTAssertNil(f.merger.replayFrom(partition: 1)?.offset)
        f.merger.partitionsRevoked([0])
        XCTAssertNil(f.merger.replayFrom(partition: 0)?.offset)
    }

    /// Progress items inside bundles (as the windows stage writes them) are read in place: they count as
    /// progress records of their own would. A source the raw topic does not have (it grew, or the record lies)
    /// holds no window back; a malformed progress item is skipped and the bundle's other items are taken.
    func testProgressInsideBundlesCountsLikeProgressRecords() throws {
        let f = Feed(sources: 2)
        func encoded(_ m: InternalMessage) -> [UInt8] {
            var v: [UInt8] = []
            m.encode(into: &v)
            return v
        }
        func partial(_ source: Int32, count: Int64, users: [UInt64]) -> (key: String?, value: [UInt8]) {
            var set = UserSet()
            for u in users { set.insert(u) }
            let head = #"{"metric":"pv","rule":"home","window_start":0,"window_end":60000,"dims":{}"#
            return (Feed.key("home", window: 0), encoded(.partial(PartialAggregate(
                sourcePartition: source, windowEnd: Self.minute, head: Array(head.utf8), count: count, users: set, isDwell: false,
                sumMs: 0, durations: DurationDigest()))))
        }
        func progress(_ source: Int32, _ watermark: Int64) -> (key: String?, value: [UInt8]) {
            (nil, encoded(.progress(source: source, watermark: watermark, idle: false)))
        }
        func bundle(_ items: [(key: String?, value: [UInt8])]) {
            var v: [UInt8] = [InternalMessage.version, InternalMessage.bundleType]
            v.appendLE(Int32(items.count))
            for item in items {
                if let key = item.key {
                    v.appendLE(Int32(key.utf8.count))
                    v += Array(key.utf8)
                } else {
                    v.appendLE(Int32(-1))
                }
                v.appendLE(Int32(item.value.count))
                v += item.value
            }
            let offset = f.offsets[0, default: 0]
            f.offsets[0] = offset + 1
            f.batch.append(InternalRecord(partition: 0, offset: offset, key: [], value: v, index: Int32(f.batch.count)))
        }
        let truncated = Array(progress(1, .max).value.prefix(14))
        bundle([partial(0, count: 3, users: [1, 2]), progress(0, Self.minute), progress(5, .max), progress(-3, .max), (nil, truncated)])
        XCTAssertTrue(try f.flush().isEmpty, "source 1 has not reported: neither a source the topic lacks nor the truncated item stands in")
        XCTAssertEqual(f.merger.replayFrom(partition: 0)?.offset, 0)
        bundle([partial(1, count: 2, users: [2, 3]), progress(1, Self.minute)])
        let out = try f.flush()
        XCTAssertEqual(out.map(\.key), [Feed.key("home", window: 0)])
        XCTAssertEqual(int(out.first?.value["count"]), 5)
        XCTAssertEqual(int(out.first?.value["users"]), 3)
        XCTAssertFalse(f.merger.isComplete(partition: 0))
        bundle([progress(0, .max), progress(1, .max)])
        try f.flush()
        XCTAssertTrue(f.merger.isComplete(partition: 0), "every source the topic has ended")
    }

    func testInternalPartitionsAreMergedApart() throws {
        let f = Feed(sources: 1)
        f.partial(0, window: 0, rule: "a", count: 1, users: [1], internal: 0)
        f.partial(0, window: 0, rule: "b", count: 1, users: [1], internal: 1)
        f.progress(0, Self.minute, internal: 0)
        XCTAssertEqual(try f.flush().map(\.key), [Feed.key("a", window: 0)], "internal partition 1 has no progress yet")
        f.progress(0, Self.minute, internal: 1)
        XCTAssertEqual(try f.flush().map(\.key), [Feed.key("b", window: 0)])
    }

    func testIsCompleteOnceEverySourceFinished() throws {
        let f = Feed(sources: 2)
        XCTAssertFalse(f.merger.isComplete(partition: 0))
        f.partial(0, window: 0, count: 1, users: [1])
        f.progress(0, .max)
        try f.flush()
        XCTAssertFalse(f.merger.isComplete(partition: 0))
        f.progress(1, 5 * Self.minute)
        try f.flush()
        XCTAssertEqual(f.written.count, 1)
        XCTAssertFalse(f.merger.isComplete(partition: 0), "source 1 is not finished")
        f.progress(1, .max)
        try f.flush()
        XCTAssertTrue(f.merger.isComplete(partition: 0))
        XCTAssertFalse(f.merger.isComplete(partition: 1), "nothing read from internal partition 1")
    }

    /// A re-read writes no window beyond the restored written-up-to mark (its outputs are not produced, and the
    /// first run may not have written them before its commit): the first record read live writes them.
    func testWindowsAReReadPassesAreWrittenByTheFirstLiveRecord() throws {
        let f = Feed(sources: 1)
        f.merger.restore(partition: 0, from: ReplayPoint(offset: 0, maxEventTime: nil))
        f.partial(0, window: 0, count: 1, users: [1], replay: true)   // 0
        f.progress(0, Self.minute, replay: true)                      // 1: passes window 0
        f.partial(0, window: 1, count: 1, users: [1], replay: true)   // 2
        XCTAssertTrue(try f.flush().isEmpty, "a batch of re-read records writes nothing")
        f.partial(0, window: 1, count: 1, users: [1], replay: true)   // 0
        f.partial(0, window: 2, count: 1, users: [1])                 // 1
        f.progress(0, 3 * Self.minute)                                 // 2: passes windows 1 and 2
        let out = try f.flush()
        XCTAssertEqual(Set(out.map(\.key)), [Feed.key("home", window: 0), Feed.key("home", window: 1), Feed.key("home", window: 2)])
        XCTAssertEqual(out.map(\.record), [1, 1, 1], "owned by the first record that was not re-read")
    }

    func testWhatABatchCompletesIsOwnedByItsFirstRecordOfThePartition() throws {
        // Records before the owner would have no outputs of their own: their offsets could be committed
        // before the window is delivered.
        let f = Feed(sources: 1)
        f.progress(0, 0, internal: 1)                       // internal partition 1, index 0
        f.partial(0, window: 0, count: 1, users: [1])       // 1
        f.partial(0, window: 0, rule: "b", count: 1, users: [1], internal: 1)  // 2
        f.progress(0, Self.minute)                          // 3
        f.progress(0, Self.minute, internal: 1)             // 4
        let out = try f.flush()
        XCTAssertEqual(out.first { $0.key == Feed.key("home", window: 0) }?.record, 1)
        XCTAssertEqual(out.first { $0.key == Feed.key("b", window: 0) }?.record, 0)
    }

    func testMalformedRecordIsSkipped() throws {
        let f = Feed(sources: 1)
        f.batch.append(InternalRecord(partition: 0, offset: 0, key: [], value: [1, 2, 3], index: 0))
        f.partial(0, window: 0, count: 1, users: [1])
        f.progress(0, Self.minute)
        XCTAssertEqual(try f.flush().count, 1)
    }

    /// Values a windows stage never writes (FuzzInternal found the first: counts adding up past Int64.max
    /// trapped the merger) are refused where the message is read: a negative count or sum, a user register past
    /// a hash's rank, a duration bucket out of range or with a negative count, a negative duration. Totals of
    /// values that are each possible stop at Int64.max instead of trapping.
    func testHostileValuesAreRefusedOrHeldAtTheLimit() throws {
        func message(count: Int64 = 1, register: UInt8? = nil, sum: Int64 = 5, bucket: (Int32, Int64)? = nil, value: Int64 = 5) -> [UInt8] {
            var users = UserSet()
            users.insert(1)
            if let register {
                users.toSketch()
                users = UserSet(exact: [], registers: [UInt8](repeating: register, count: UserSet.registerCount))
            }
            let digest = bucket.map { DurationDigest(values: [], buckets: [$0.0: $0.1], bucketed: true) } ?? DurationDigest(values: [value], buckets: [:], bucketed: false)
            let head = Array(#"{"metric":"dwell","rule":"home","window_start":0,"window_end":60000,"dims":{}"#.utf8)
            var bytes: [UInt8] = []
            InternalMessage.partial(PartialAggregate(sourcePartition: 0, windowEnd: Self.minute, head: head, count: count, users: users,
                                                     isDwell: true, sumMs: sum, durations: digest)).encode(into: &bytes)
            return bytes
        }
        XCTAssertNoThrow(try InternalMessage.layout(message(register: UserSet.maxRank, bucket: (DurationDigest.maxBucket, 3))))
        for (bad, what) in [(message(count: -1), "count"), (message(register: UserSet.maxRank + 1), "register"), (message(sum: -1), "sum"),
                            (message(bucket: (DurationDigest.maxBucket + 1, 1)), "bucket"), (message(bucket: (-2, 1)), "bucket -2"),
                            (message(bucket: (7, -1)), "bucket count"), (message(value: -1), "duration")] {
            XCTAssertThrowsError(try InternalMessage.layout(bad), what)
        }
        // A duration entry count of -1 or past the bytes (the last 16 bytes: the count and one bucket entry).
        for (n, what) in [(UInt8(0xFF), "-1"), (UInt8(0x7F), "2^31 - 1")] {
            var bad = message(bucket: (7, 3))
            for k in (bad.count - 16)..<(bad.count - 13) { bad[k] = 0xFF }
            bad[bad.count - 13] = n
            XCTAssertThrowsError(try InternalMessage.layout(bad), "\(what) duration buckets")
        }
        let whole = message(bucket: (7, 3))
        for cut in 0..<whole.count { XCTAssertThrowsError(try InternalMessage.layout(Array(whole[..<cut])), "cut at \(cut)") }

        let f = Feed(sources: 2)
        for source: Int32 in 0..<2 {
            f.partial(source, window: 0, count: .max, users: [UInt64(source)], durations: [.max / 2, .max / 2])
            f.progress(source, Self.minute)
        }
        let written = try f.flush()
        XCTAssertEqual(written.count, 1)
        XCTAssertEqual(int(written.first?.value["count"]), .max)
        XCTAssertEqual(int(written.first?.value["sum_ms"]), .max)
    }
}


// MARK: - Window sizes

extension WindowMergerTests {
    static let hour: Int64 = 3_600_000

    func testPartialsRoundTripWithTheirSize() throws {
        var users = UserSet()
        for u: UInt64 in [3, 1, 2] { users.insert(u) }
        var digest = DurationDigest()
        digest.add(1_500)
        let head = Array(#"{"metric":"dwell","rule":"home","window_start":0,"window_end":3600000,"dims":{}"#.utf8)
        for size: Int64 in [0, Self.hour] {
            let p = PartialAggregate(sourcePartition: 3, windowEnd: Self.hour, head: head, count: 2, users: users, isDwell: true,
                                     sumMs: 1_500, durations: digest, size: size)
            var bytes: [UInt8] = []
            InternalMessage.partial(p).encode(into: &bytes)
            XCTAssertEqual(try InternalMessage.decode(bytes), .partial(p), "size \(size)")
            // The first size is written as before sizes existed (type 1, no size field).
            XCTAssertEqual(bytes[1], size == 0 ? 1 : 4)
            // A late partial keeps its offset and its size.
            var late: [UInt8] = []
            head.withByteView { h in
                InternalMessage.encodePartial(sourcePartition: 3, windowEnd: Self.hour, head: h, count: 1, isDwell: false, sumMs: 0,
                                              durations: DurationDigest(), size: size, lateOffset: 77, into: &late) { users.encode(into: &$0) }
            }
            guard case .partial(let l) = try InternalMessage.layout(late) else { return XCTFail("not a partial") }
            XCTAssertEqual(l.lateOffset, 77)
            XCTAssertEqual(l.size, size)
            XCTAssertEqual(Array(late[l.head]), head)
            XCTAssertEqual(l.count, 1)
        }
        // A size that no stage could have.
        var bad: [UInt8] = []
        InternalMessage.partial(PartialAggregate(sourcePartition: 0, windowEnd: 1, head: [], count: 1, users: UserSet(), isDwell: false,
                                                 sumMs: 0, durations: DurationDigest(), size: -5)).encode(into: &bad)
        XCTAssertThrowsError(try InternalMessage.layout(bad))
    }

    /// Equal key texts of two sizes (an hour's key and its first minute's) are two windows, merged apart and written
    /// to their own topics; a late partial changes only its size's window.
    func testSizesAreMergedApartAndWrittenToTheirOwnTopics() throws {
        let merger = WindowMerger(sizes: [(0, "metrics.counts"), (Self.hour, "metrics.counts.hourly")], allowedLateness: 24 * Self.hour,
                                  lateFlush: .zero, logger: Logger(label: "test"))
        merger.sourcePartitions = 2
        var offset: Int64 = 0
        var records: [InternalRecord] = []
        let key = Array("pv|home|0|".utf8)
        func add(_ value: [UInt8], key: [UInt8] = key) {
            records.append(InternalRecord(partition: 0, offset: offset, key: key, value: value, index: Int32(records.count)))
            offset += 1
        }
        func partial(_ source: Int32, size: Int64, count: Int64, users: [UInt64], late: Int64? = nil) {
            let window = size == 0 ? Self.minute : size
            var set = UserSet()
            for u in users { set.insert(u) }
            let head = Array(#"{"metric":"pv","rule":"home","window_start":0,"window_end":\#(window),"dims":{}"#.utf8)
            var value: [UInt8] = []
            head.withByteView { h in
                InternalMessage.encodePartial(sourcePartition: source, windowEnd: window, head: h, count: count, isDwell: false, sumMs: 0,
                                              durations: DurationDigest(), size: size, lateOffset: late, into: &value) { set.encode(into: &$0) }
            }
            add(value)
        }
        func progress(_ source: Int32, _ watermark: Int64) {
            var value: [UInt8] = []
            InternalMessage.progress(source: source, watermark: watermark, idle: false).encode(into: &value)
            add(value, key: [])
        }
        // One buffer for the run, as a worker's (the merger keeps its topics' indexes).
        var out = OutputBuffer()
        func flush() throws -> [(topic: String, key: String, value: [String: Any])] {
            out.reset()
            try merger.process(records, output: &out)
            records = []
            return try out.messages.indices.map { i in
                (out.topics[Int(out.messages[i].topic)], out.keyString(i) ?? "",
                 try JSONSerialization.jsonObject(with: Data(out.valueString(i).utf8)) as? [String: Any] ?? [:])
            }
        }

        partial(0, size: 0, count: 1, users: [1])
        partial(1, size: 0, count: 2, users: [2])
        partial(0, size: Self.hour, count: 10, users: [1, 5])
        progress(0, 2 * Self.minute)
        progress(1, 2 * Self.minute)
        var written = try flush()
        XCTAssertEqual(written.map(\.topic), ["metrics.counts"], "only the minute is complete")
        XCTAssertEqual(int(written.first?.value["count"]), 3, "the hour's partial is not added to the minute of the same key text")
        XCTAssertEqual(int(written.first?.value["users"]), 2)
        XCTAssertEqual(merger.replayFrom(partition: 0)?.offset, 0, "the kept minute and the pending hour hold the replay point")

        partial(1, size: Self.hour, count: 20, users: [5, 6])
        progress(0, Self.hour)
        progress(1, Self.hour)
        written = try flush()
        XCTAssertEqual(written.map(\.topic), ["metrics.counts.hourly"])
        XCTAssertEqual(written.first?.key, "pv|home|0|")
        XCTAssertEqual(int(written.first?.value["count"]), 30)
        XCTAssertEqual(int(written.first?.value["users"]), 3)
        XCTAssertEqual(int(written.first?.value["window_end"]), Self.hour)

        // A late partial of the hour rewrites the hour, not the minute; one of the minute, the minute.
        partial(1, size: Self.hour, count: 1, users: [9], late: 40)
        written = try flush()
        XCTAssertEqual(written.map(\.topic), ["metrics.counts.hourly"])
        XCTAssertEqual(int(written.first?.value["count"]), 31)
        XCTAssertEqual(int(written.first?.value["users"]), 4)
        partial(0, size: 0, count: 1, users: [9], late: 41)
        written = try flush()
        XCTAssertEqual(written.map(\.topic), ["metrics.counts"])
        XCTAssertEqual(int(written.first?.value["count"]), 4)

        // A size the stage does not have (its configuration changed) is skipped, not merged into another.
        partial(0, size: 2 * Self.hour, count: 100, users: [1])
        progress(0, 3 * Self.hour)
        progress(1, 3 * Self.hour)
        XCTAssertEqual(try flush().count, 0)
    }

    /// After a takeover the merger rebuilds every size from the re-read partials: the hour written before the
    /// checkpoint still takes a late partial with its whole total.
    func testEverySizeIsRestoredFromTheReReadPartials() throws {
        func merger() -> WindowMerger {
            let m = WindowMerger(sizes: [(0, "metrics.counts"), (Self.hour, "metrics.counts.hourly")], allowedLateness: 24 * Self.hour,
                                 lateFlush: .zero, logger: Logger(label: "test"))
            m.sourcePartitions = 1
            return m
        }
        func message(size: Int64, count: Int64, user: UInt64, late: Int64? = nil) -> [UInt8] {
            let window = size == 0 ? Self.minute : size
            var set = UserSet()
            set.insert(user)
            let head = Array(#"{"metric":"pv","rule":"home","window_start":0,"window_end":\#(window),"dims":{}"#.utf8)
            var value: [UInt8] = []
            head.withByteView { h in
                InternalMessage.encodePartial(sourcePartition: 0, windowEnd: window, head: h, count: count, isDwell: false, sumMs: 0,
                                              durations: DurationDigest(), size: size, lateOffset: late, into: &value) { set.encode(into: &$0) }
            }
            return value
        }
        var progress: [UInt8] = []
        InternalMessage.progress(source: 0, watermark: Self.hour + 1, idle: false).encode(into: &progress)
        let key = Array("pv|home|0|".utf8)
        let log: [(key: [UInt8], value: [UInt8])] = [
            (key, message(size: 0, count: 2, user: 1)), (key, message(size: Self.hour, count: 7, user: 1)), ([], progress),
        ]
        func records(_ range: Range<Int>, replayUntil: Int = 0) -> [InternalRecord] {
            range.enumerated().map { i, o in
                InternalRecord(partition: 0, offset: Int64(o), key: log[o].key, value: log[o].value, index: Int32(i), replay: o < replayUntil)
            }
        }
        let first = merger()
        var out = OutputBuffer()
        try first.process(records(0..<3), output: &out)
        XCTAssertEqual(out.messages.count, 2, "the minute and the hour")
        let mark = first.writtenUpTo(partition: 0)
        XCTAssertEqual(first.replayFrom(partition: 0)?.offset, 0, "both written windows are kept for late partials")

        // A new owner re-reads from the replay point, then a late partial of each size arrives.
        let second = merger()
        second.restore(partition: 0, from: ReplayPoint(offset: 0, maxEventTime: mark))
        var lateMinute = records(0..<3, replayUntil: 3)
        lateMinute.append(InternalRecord(partition: 0, offset: 3, key: key, value: message(size: 0, count: 1, user: 2, late: 10), index: 3))
        lateMinute.append(InternalRecord(partition: 0, offset: 4, key: key, value: message(size: Self.hour, count: 1, user: 2, late: 10), index: 4))
        out = OutputBuffer()
        try second.process(lateMinute, output: &out)
        var written: [String: String] = [:]
        for i in out.messages.indices where !lateMinute[Int(out.messages[i].record)].replay {
            written[out.topics[Int(out.messages[i].topic)]] = out.valueString(i)
        }
        XCTAssertEqual(written.count, 2, "\(written)")
        XCTAssertTrue(written["metrics.counts"]?.contains(#""count":3,"users":2"#) == true, "\(written)")
        XCTAssertTrue(written["metrics.counts.hourly"]?.contains(#""count":8,"users":2"#) == true, "\(written)")
    }
}
