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
        let from = try XCTUnwrap(a.replayFrom(partition: 0))
        XCTAssertGreaterThan(from, 3, "the progress that wrote w1 lies before the replay point")

        let b = merger()
        b.restore(partition: 0, writtenUpTo: a.writtenUpTo(partition: 0))
        XCTAssertEqual(try feed(b, Array(messages[Int(from)...]), from: from, replayUntil: next).count, 0)
        let rest: [InternalMessage] = [partial(source: 1, windowEnd: w2, count: 3), .progress(source: 1, watermark: w2 + 5_000, idle: false)]
        let writtenB = try feed(b, rest, from: next)
        XCTAssertEqual(writtenB, try feed(a, rest, from: next), "the restored merger writes what the first one writes")
        XCTAssertTrue(writtenB.first?.contains(#""count":5"#) == true, "\(writtenB)")
        XCTAssertFalse(writtenB.contains { $0.contains(#""window_end":\#(w1)"#) }, "w1 is not written again with source 1's partial alone")
    }
}
