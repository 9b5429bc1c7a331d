import Logging
import MaidianEvents
import MaidianPipeline
import XCTest

@testable import MaidianStages

/// The merger of windowed counts (internal topic) on its own: when windows are final, and its state after a
/// takeover from a checkpoint (docs/recovery.md).
final class WindowMergerRecoveryTests: XCTestCase {
    static let minute: Int64 = 60_000

    func merger(sources: Int32 = 2) -> WindowMerger {
        // Written windows are not kept (no late partials here): the replay point is as it was before them.
        let m = WindowMerger(countsTopic: "metrics.counts", allowedLateness: 0, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        m.sourcePartitions = sources
        return m
    }

    /// A merger of two sources that keeps written windows for late partials (a day), rewriting at once.
    func keepingMerger() -> WindowMerger {
        let m = WindowMerger(countsTopic: "metrics.counts", allowedLateness: 24 * 60 * Self.minute, lateFlush: .zero,
                             logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        m.sourcePartitions = 2
        return m
    }

    func partial(source: Int32, windowEnd: Int64, count: Int64) -> InternalMessage {
        var users = UserSet()
        users.insert(UInt64(source + 1))
        let head = Array(#"{"metric":"pv","rule":"home","window_start":\#(windowEnd - Self.minute),"window_end":\#(windowEnd),"dims":{}"#.utf8)
        return .partial(PartialAggregate(sourcePartition: source, windowEnd: windowEnd, head: head, count: count, users: users,
                                         isDwell: false, sumMs: 0, durations: DurationDigest()))
    }

    /// Feeds messages as internal records of partition 0 from `offset` on; returns the counts written.
    @discardableResult
    func feed(_ m: WindowMerger, _ messages: [InternalMessage], from offset: Int64 = 0, replayUntil: Int64 = 0) throws -> [String] {
        var records: [InternalRecord] = []
        for (i, msg) in messages.enumerated() {
            var bytes: [UInt8] = []
            msg.encode(into: &bytes)
            let key: [UInt8]
            if case .partial(let p) = msg { key = Array("pv|home|\(p.windowEnd - Self.minute)|".utf8) } else { key = [] }
            let o = offset + Int64(i)
            records.append(InternalRecord(partition: 0, offset: o, key: key, value: bytes, index: Int32(i), replay: o < replayUntil))
        }
        var out = OutputBuffer()
        try m.process(records, output: &out)
        return out.messages.indices.filter { !records[Int(out.messages[$0].record)].replay }.map { out.valueString($0) }
    }

    func testWindowWrittenOnceEverySourcePassedIt() throws {
        let m = merger()
        let w: Int64 = 10 * Self.minute
        XCTAssertEqual(try feed(m, [partial(source: 0, windowEnd: w, count: 2), .progress(source: 0, watermark: w, idle: false)]).count, 0)
        let written = try feed(m, [partial(source: 1, windowEnd: w, count: 3), .progress(source: 1, watermark: w + 1, idle: false)], from: 2)
        XCTAssertEqual(written.count, 1)
        XCTAssertTrue(written.first?.contains(#""count":5"#) == true, "\(written)")
    }

    /// Every source idle: windows beyond the lowest idle progress are not final (an idle partition's open
    /// windows come with its next progress), and partials arriving later still count.
    func testAllSourcesIdleWritesOnlyWhatEverySourcePassed() throws {
        let m = merger()
        let w1: Int64 = 10 * Self.minute, w2 = 11 * Self.minute
        try feed(m, [
            partial(source: 0, windowEnd: w1, count: 1), partial(source: 1, windowEnd: w1, count: 1),
            partial(source: 0, windowEnd: w2, count: 4),
            .progress(source: 0, watermark: w2 + 10_000, idle: true),
            .progress(source: 1, watermark: w1 + 10_000, idle: true),  // source 1 still has w2 open
        ])
        XCTAssertEqual(m.writtenUpTo(partition: 0), w1 + 10_000, "not past the lowest idle source")
        // Source 1 wakes up: its w2 partial is not late.
        let written = try feed(m, [partial(source: 1, windowEnd: w2, count: 5), .progress(source: 1, watermark: .max, idle: false)], from: 5)
        XCTAssertEqual(written.count, 1)
        XCTAssertTrue(written.first?.contains(#""count":9"#) == true, "\(written)")
        XCTAssertEqual(m.latePartials.value, 0)
    }

    /// A merger restored from a checkpoint (written up to W, re-reading from the replay point) treats partials
    /// of windows up to W as written even when the progress that passed them lies before the replay point,
    /// and writes later windows with every source's partial.
    func testRestoredMergerKeepsWhatWasWritten() throws {
        let w1: Int64 = 10 * Self.minute, w2 = 11 * Self.minute
        let messages: [InternalMessage] = [
            partial(source: 0, windowEnd: w1, count: 1), partial(source: 1, windowEnd: w1, count: 1),
            .progress(source: 0, watermark: w1 + 5_000, idle: false), .progress(source: 1, watermark: w1 + 5_000, idle: false),  // w1 written
            partial(source: 0, windowEnd: w2, count: 2),
            // Source 1's new owner re-read it from further back: its progress goes back, its w1 partial comes again.
            .progress(source: 1, watermark: w1 - 20_000, idle: false), partial(source: 1, windowEnd: w1, count: 1),
            .progress(source: 0, watermark: w2 + 5_000, idle: false),
        ]
        let a = merger()
        let writtenA = try feed(a, Array(messages[..<4])) + feed(a, Array(messages[4...]), from: 4)
        XCTAssertEqual(writtenA.count, 1, "w1 once; w2 waits for source 1")
        let next = Int64(messages.count)
        let from = try XCTUnwrap(a.replayFrom(partition: 0)?.offset)
        XCTAssertEqual(from, 3, "source 1 went back: its progress that passed w1 is where a re-read starts")
        // A replay point of an older version was the latest progress of each source: re-read from there (4), w1's
        // partials still count as written.
        let oldFrom: Int64 = 4

        let b = merger()
        b.restore(partition: 0, from: ReplayPoint(offset: 0, maxEventTime: a.writtenUpTo(partition: 0)))
        XCTAssertEqual(try feed(b, Array(messages[Int(oldFrom)...]), from: oldFrom, replayUntil: next).count, 0)
        let rest: [InternalMessage] = [partial(source: 1, windowEnd: w2, count: 3), .progress(source: 1, watermark: w2 + 5_000, idle: false)]
        let writtenB = try feed(b, rest, from: next)
        XCTAssertEqual(writtenB, try feed(a, rest, from: next), "the restored merger writes what the first one writes")
        XCTAssertTrue(writtenB.first?.contains(#""count":5"#) == true, "\(writtenB)")
        XCTAssertFalse(writtenB.contains { $0.contains(#""window_end":\#(w1)"#) }, "w1 is not written again with source 1's partial alone")
    }

    /// Records of the internal topic as a source writes them since bundles: each a list of messages (a key, or
    /// none for a progress message, and the value), packed by `InternalBundler` into one record.
    func record(_ messages: [(key: String?, value: [UInt8])]) -> [UInt8] {
        var b = InternalBundler()
        var out = OutputBuffer()
        let topic = out.topicIndex("maidian.partials")
        for m in messages {
            if let key = m.key {
                Array(key.utf8).withByteView { k in b.add(partition: 0, record: 0, key: k, output: &out, topic: topic) { $0.append(contentsOf: m.value) } }
            } else {
                b.add(partition: 0, record: 0, key: nil, output: &out, topic: topic) { $0.append(contentsOf: m.value) }
            }
        }
        b.flush(output: &out, topic: topic)
        XCTAssertEqual(out.messages.count, 1)
        return Array(out.bytes[Int(out.messages[0].value.start)..<Int(out.messages[0].value.end)])
    }

    /// A partial of `rule` for the window ending at `end`; `late`: a late partial named by that record offset.
    func part(_ source: Int32, _ rule: String, _ end: Int64, _ count: Int64, late: Int64? = nil) -> (key: String?, value: [UInt8]) {
        var users = UserSet()
        for u in 0..<count { users.insert(UInt64(source) * 1_000 + UInt64(u) + UInt64(late ?? 0)) }
        let head = Array(#"{"metric":"pv","rule":"\#(rule)","window_start":\#(end - Self.minute),"window_end":\#(end),"dims":{}"#.utf8)
        var value: [UInt8] = []
        head.withByteView { h in
            InternalMessage.encodePartial(sourcePartition: source, windowEnd: end, head: h, count: count, isDwell: false, sumMs: 0,
                                          durations: DurationDigest(), lateOffset: late, into: &value) { users.encode(into: &$0) }
        }
        return ("pv|\(rule)|\(end - Self.minute)|", value)
    }

    func progress(_ source: Int32, _ watermark: Int64, idle: Bool = false) -> (key: String?, value: [UInt8]) {
        var value: [UInt8] = []
        InternalMessage.progress(source: source, watermark: watermark, idle: idle).encode(into: &value)
        return (nil, value)
    }

    /// A merger restored from the replay point of any commit, which may name an item inside a bundle, re-reads
    /// from there and then writes the same final answers as the merger that ran through: the bundle's items
    /// before the point were taken before the commit and are not taken again (re-taken, a partial of a window
    /// written long before would be kept as that window's only partial, and a late partial would write it
    /// again with part of its totals).
    func testRestoredFromAnyCommitInsideABundleWritesTheSameAnswers() throws {
        let w1: Int64 = 10 * Self.minute, w2 = 11 * Self.minute, w3 = 12 * Self.minute
        let records: [[UInt8]] = [
            record([part(0, "home", w1, 2), part(0, "cart", w1, 1), progress(0, w1 + 5_000)]),
            record([part(1, "home", w1, 3), progress(1, w1 + 5_000)]),  // w1 written
            record([part(0, "home", w1, 1, late: 100), part(0, "home", w2, 4), progress(0, w2 + 5_000)]),
            record([part(1, "cart", w1, 2, late: 200), part(1, "home", w2, 1), part(1, "cart", w2, 1), progress(1, w2 + 5_000)]),
            record([progress(0, w2 + 20_000)]),
            record([part(1, "home", w1, 4, late: 300), part(0, "cart", w2, 3, late: 400), progress(1, w2 + 30_000)]),
            record([part(0, "home", w3, 1), progress(0, .max)]),
            record([part(1, "home", w2, 5, late: 500), part(1, "cart", w3, 2), progress(1, .max)]),
        ]
        /// Feeds records `range` one batch each, the ones before `replayUntil` as re-read; the outputs of live ones.
        func feed(_ m: WindowMerger, _ range: Range<Int>, replayUntil: Int = 0) throws -> [(key: String, value: String)] {
            var written: [(String, String)] = []
            for k in range {
                var out = OutputBuffer()
                try m.process([InternalRecord(partition: 0, offset: Int64(k), key: [], value: records[k], index: 0, replay: k < replayUntil)], output: &out)
                if k >= replayUntil { written += out.messages.indices.map { (out.keyString($0) ?? "", out.valueString($0)) } }
            }
            return written
        }
        func answers(_ written: [(key: String, value: String)]) -> [String: String] {
            var last: [String: String] = [:]
            for w in written { last[w.key] = w.value }
            return last
        }

        let a = keepingMerger()
        var before: [[(key: String, value: String)]] = []
        var points: [ReplayPoint] = []
        for k in records.indices {
            before.append(try feed(a, k..<k + 1))
            let n = Int64(k + 1)
            let written = a.writtenUpTo(partition: 0)
            if let from = a.replayFrom(partition: 0), from.offset < n {
                points.append(ReplayPoint(offset: from.offset, maxEventTime: written, item: from.item))
            } else {
                points.append(ReplayPoint(offset: n, maxEventTime: written))
            }
        }
        let want = answers(before.flatMap { $0 })
        XCTAssertEqual(want.count, 6, "\(want.keys.sorted())")
        XCTAssertTrue(points.contains { $0.item > 0 }, "some commit's replay point lies inside a bundle: \(points)")

        for k in records.indices {
            let point = try XCTUnwrap(ReplayPoint(metadata: points[k].metadata), "the point survives its metadata text")
            XCTAssertEqual(point, points[k])
            let b = keepingMerger()
            b.restore(partition: 0, from: point)
            var written = try feed(b, Int(point.offset)..<k + 1, replayUntil: k + 1)
            XCTAssertEqual(written.count, 0, "re-read records write nothing")
            let again = b.replayFrom(partition: 0).map { ReplayPoint(offset: $0.offset, maxEventTime: b.writtenUpTo(partition: 0), item: $0.item) }
            // (After the end a restored merger keeps nothing, where the first one may still hold written windows.)
            if point.offset <= Int64(k) && point.maxEventTime != .max {
                XCTAssertEqual(again, point, "after the re-read, the state a commit there would keep (after record \(k))")
            }
            written += try feed(b, k + 1..<records.count)
            let got = answers(before[...k].flatMap { $0 } + written)
            XCTAssertEqual(got, want, "restored after record \(k) from \(point)")
        }
    }

    /// The chaos run that lost whole windows (seed 855873): a source re-read from an earlier commit by its new
    /// owner reports progress it had passed, so the merged watermark went back, and what a batch end saw
    /// depended on where batches ended. A merger re-reading after a takeover, with other batch ends than the
    /// first run, wrote windows the first run had not yet written; re-read writes are not produced, and the
    /// windows were never written. Also a source back from idle: its partials of windows written without it
    /// count (wire format §5: its events are not late). Whatever the batches and wherever the commit, the
    /// answers are those of one uninterrupted run, even when everything the first run wrote after the commit is
    /// lost.
    func testAnswersDoNotDependOnBatchesOrCommitsWhenSourcesGoBackOrIdle() throws {
        let w1: Int64 = 10 * Self.minute, w2 = 11 * Self.minute, w3 = 12 * Self.minute
        let records: [(key: String?, value: [UInt8])] = [
            part(0, "home", w1, 2),                                            // 0
            part(0, "home", w2, 1),
            progress(0, w2 + 5_000),
            part(1, "home", w1, 3),
            progress(1, w1 + 5_000),                                           // 4: w1 is final
            progress(0, w1 - 20_000),                                          // 5: source 0 re-read by a new owner
            part(1, "cart", w2, 2),
            progress(1, w2 + 30_000),                                          // 7: w2 is final
            part(0, "home", w1, 2), part(0, "home", w2, 1),                    // copies
            progress(0, w2 + 5_000),
            part(0, "home", w3, 4),
            progress(0, w3 + 5_000),                                           // 12
            progress(1, w2 + 30_000, idle: true),                              // 13: w3 written without source 1
            part(1, "home", w3, 6), part(1, "cart", w3, 1),                    // 14: source 1 is back
            progress(1, w3 + 10_000),
            part(0, "home", w2, 1, late: 100),
            progress(0, .max), progress(1, .max),                              // 18
        ]
        /// Feeds records `range` as one batch (those before `replayUntil` re-read); the outputs of live records.
        func feed(_ m: WindowMerger, _ range: Range<Int>, replayUntil: Int = 0) throws -> [(key: String, value: String)] {
            let batch = range.enumerated().map { i, k in
                InternalRecord(partition: 0, offset: Int64(k), key: records[k].key.map { Array($0.utf8) } ?? [], value: records[k].value,
                               index: Int32(i), replay: k < replayUntil)
            }
            var out = OutputBuffer()
            try m.process(batch, output: &out)
            return out.messages.indices.filter { !batch[Int(out.messages[$0].record)].replay }.map { (out.keyString($0) ?? "", out.valueString($0)) }
        }
        func answers(_ written: [(key: String, value: String)]) -> [String: Int64] {
            var last: [String: Int64] = [:]
            for w in written {
                let value = try? JSONSerialization.jsonObject(with: Data(w.value.utf8)) as? [String: Any]
                last[w.key] = (value?["count"] as? NSNumber)?.int64Value
            }
            return last
        }
        /// Random batches over `range`.
        func batches(_ range: Range<Int>, _ rng: inout UInt64) -> [Range<Int>] {
            var out: [Range<Int>] = []
            var lo = range.lowerBound
            while lo < range.upperBound {
                rng = rng &* 6364136223846793005 &+ 1442695040888963407
                let n = 1 + Int((rng >> 33) % 6)
                out.append(lo..<min(lo + n, range.upperBound))
                lo = out.last!.upperBound
            }
            return out
        }

        let reference = keepingMerger()
        var all: [(key: String, value: String)] = []
        for k in records.indices { all += try feed(reference, k..<k + 1) }
        let want = answers(all)
        let (home, cart) = ("pv|home|", "pv|cart|")
        XCTAssertEqual(want, [home + "\(w1 - Self.minute)|": 5, home + "\(w2 - Self.minute)|": 2, cart + "\(w2 - Self.minute)|": 2,
                              home + "\(w3 - Self.minute)|": 10, cart + "\(w3 - Self.minute)|": 1])
        XCTAssertEqual(reference.partialCopies.value, 2)
        XCTAssertEqual(reference.latePartials.value, 2, "source 1's partials of w3, back from idle")

        var rng: UInt64 = 0x9E37_79B9_7F4A_7C15
        for round in 0..<150 {
            let a = keepingMerger()
            var produced: [(key: String, value: String)] = []
            for batch in batches(0..<records.count, &rng) {
                produced += try feed(a, batch)
                // A takeover at this commit: the first run's later outputs lost, a new owner re-reads and goes on.
                let n = batch.upperBound
                let point: ReplayPoint
                if let from = a.replayFrom(partition: 0), from.offset < Int64(n) {
                    point = ReplayPoint(offset: from.offset, maxEventTime: a.writtenUpTo(partition: 0), item: from.item)
                } else {
                    point = ReplayPoint(offset: Int64(n), maxEventTime: a.writtenUpTo(partition: 0))
                }
                let b = keepingMerger()
                b.restore(partition: 0, from: point)
                var written = produced
                // Batches may hold the last re-read records and the first live ones together.
                for r in batches(Int(point.offset)..<records.count, &rng) { written += try feed(b, r, replayUntil: n) }
                XCTAssertEqual(answers(written), want, "round \(round): taken over after record \(n - 1) from \(point)")
            }
            XCTAssertEqual(answers(produced), want, "round \(round): uninterrupted")
        }
    }
}
