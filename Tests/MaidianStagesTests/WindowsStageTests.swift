import Foundation
import XCTest
import MaidianEvents
@testable import MaidianPipeline
@testable import MaidianStages

final class WindowsStageTests: XCTestCase {
    typealias H = WindowsHarness
    let home = "HomeViewController"
    let product = "ProductViewController"

    /// The `metrics.counts` key of window `w` (minutes after t0).
    func key(_ metric: String, _ rule: String, _ w: Int64, _ dims: String = "app_version=3.2.1") -> String {
        "\(metric)|\(rule)|\(H.t0 + w * 60_000)|\(dims)"
    }

    func config(_ change: (inout WindowsStage.Config) -> Void = { _ in }) -> WindowsStage.Config {
        var c = WindowsStage.Config()
        change(&c)
        return c
    }

    func int(_ v: Any?) -> Int64? { (v as? NSNumber)?.int64Value }

    func dwell(_ h: H, _ user: String) -> [[String: Any]] { h.dwell.filter { $0["distinct_id"] as? String == user } }

    // MARK: - Event time, lateness, idle partitions

    func testOutOfOrderWithinLatenessIsCountedInItsWindowAndPairedInEventTimeOrder() throws {
        let h = try H()
        // The leave arrives before its enter, which is exactly at the watermark (40 s - 30 s): not late.
        try h.run([[Ev.leave("u1", home, 40_000)], [Ev.enter("u1", home, 10_000)]])
        // A window-1 event arrives before a window-0 event.
        try h.run([[Ev.enter("u2", product, 65_000)], [Ev.enter("u3", home, 50_000)]])
        XCTAssertEqual(h.stage.processor.lateCounter.value, 0)
        XCTAssertTrue(h.dwell.isEmpty, "the leave (40 s) waits until the watermark (35 s) passes it")
        XCTAssertTrue(h.countsWritten.isEmpty)

        try h.run([[Ev.other("u4", 200_000)]])  // watermark 170 s
        XCTAssertEqual(h.stage.processor.orphanCounter.value, 0)
        let d = h.dwell(closedBy: "leave")
        XCTAssertEqual(d.count, 1)
        XCTAssertEqual(d.first?["distinct_id"] as? String, "u1")
        XCTAssertEqual(int(d.first?["enter_time"]), H.t0 + 10_000)
        XCTAssertEqual(int(d.first?["leave_time"]), H.t0 + 40_000)
        XCTAssertEqual(int(d.first?["duration_ms"]), 30_000)
        XCTAssertEqual(d.first?["rules"] as? [String], ["home"])
        XCTAssertEqual(h.outputs.first { $0.topic == "metrics.dwell" }?.key, "u1")

        let counts = h.counts
        XCTAssertEqual(int(counts[key("pv", "home", 0)]?["count"]), 2)
        XCTAssertEqual(int(counts[key("pv", "home", 0)]?["users"]), 2)
        XCTAssertNil(counts[key("pv", "home", 1)])
        XCTAssertEqual(int(counts[key("pv", "product", 1)]?["count"]), 1)
        XCTAssertEqual(int(counts[key("pv", "product_any", 1)]?["count"]), 1)
        XCTAssertEqual(int(counts[key("dwell", "home", 0)]?["sum_ms"]), 30_000)
        let rec = try XCTUnwrap(counts[key("pv", "home", 0)])
        XCTAssertEqual(rec["metric"] as? String, "pv")
        XCTAssertEqual(rec["rule"] as? String, "home")
        XCTAssertEqual(int(rec["window_start"]), H.t0)
        XCTAssertEqual(int(rec["window_end"]), H.t0 + 60_000)
        XCTAssertEqual(rec["dims"] as? [String: String], ["app_version": "3.2.1"])
    }

    func testLateEventsWithinTheAllowedLatenessCountEverywhere() throws {
        let h = try H(config: config { $0.lateFlush = .init(milliseconds: 0) })
        try h.run([[Ev.enter("u1", home, 10_000)]])
        try h.run([[Ev.other("x", 200_000)]])  // watermark 170 s: windows 0-1 closed and written
        XCTAssertEqual(int(h.counts[key("pv", "home", 0)]?["count"]), 1)
        let firstWrites = h.countsWritten.count

        // An offline phone's cache: a visit of window 0 (closed at the source and written by the merger).
        try h.run([[Ev.enter("u2", home, 20_000), Ev.click("u2", home, 25_000), Ev.leave("u2", home, 50_000), Ev.crash("u2", 55_000)]])
        let late = h.enriched.map { ($0["properties"] as? [String: Any])?["$late"] as? Bool }
        XCTAssertEqual(late, [true, true, true, true])
        XCTAssertEqual(h.stage.processor.lateCounter.value, 4)
        XCTAssertEqual(h.stage.processor.tooLateCounter.value, 0)
        // The window's record is written again, same key, new totals.
        let counts = h.counts
        XCTAssertEqual(int(counts[key("pv", "home", 0)]?["count"]), 2)
        XCTAssertEqual(int(counts[key("pv", "home", 0)]?["users"]), 2)
        XCTAssertEqual(int(counts[key("click", "buy", 0)]?["count"]), 1)
        XCTAssertEqual(int(counts[key("dwell", "home", 0)]?["count"]), 1)
        XCTAssertEqual(int(counts[key("dwell", "home", 0)]?["sum_ms"]), 30_000)
        XCTAssertGreaterThan(h.countsWritten.count, firstWrites)
        XCTAssertEqual(h.merger.windowsRewritten.value, 3, "every key of a written window that late partials changed")
        // Paired and trailed.
        XCTAssertEqual(dwell(h, "u2").map { $0["closed_by"] as? String }, ["leave"])
        XCTAssertEqual(h.trails.count, 1)
        XCTAssertEqual((h.trails.first?["trail"] as? [[String: Any]])?.map { $0["event"] as? String }, ["$AppViewScreen", "$AppClick"])
        // A late partial carries its record's offset, and only the late events' counts.
        let latePartials = h.outputs.filter { o in
            guard o.topic == "maidian.partials", case .partial(let l)? = try? InternalMessage.layout(o.content.value) else { return false }
            return l.lateOffset >= 0
        }
        XCTAssertEqual(latePartials.count, 3)
    }

    func testTooLateEventsAreFlaggedButNeitherCountedPairedNorTrailed() throws {
        let h = try H(config: config { $0.allowedLateness = .init(milliseconds: 60_000) })
        try h.run([[Ev.enter("u1", home, 300_000)]])  // watermark 270 s: later than 210 s is allowed
        try h.run([[Ev.enter("u2", home, 209_999), Ev.click("u2", home, 209_999), Ev.leave("u2", home, 209_999),
                    Ev.enter("u3", home, 210_000)]])
        let late = h.enriched.map { ($0["properties"] as? [String: Any])?["$late"] as? Bool }
        XCTAssertEqual(late, [true, true, true, true])
        XCTAssertEqual(h.stage.processor.lateCounter.value, 4)
        XCTAssertEqual(h.stage.processor.tooLateCounter.value, 3)
        try h.run([[Ev.crash("u2", 310_000)]])
        try h.finish()
        let counts = h.counts
        XCTAssertEqual(int(counts[key("pv", "home", 3)]?["count"]), 1)
        XCTAssertFalse(counts.keys.contains { $0.hasPrefix("click|") }, "the too-late click is not counted")
        XCTAssertTrue(dwell(h, "u2").isEmpty, "u2's enter was too late: no visit")
        XCTAssertEqual(h.stage.processor.orphanCounter.value, 0, "a too-late leave is not paired at all")
        XCTAssertEqual((h.trails.first?["trail"] as? [Any])?.count, 0, "too-late events stay out of trails")
    }

    func testLateRewritesWaitForTheLateFlushAndTheEndOfInputWritesThem() throws {
        let h = try H(config: config { $0.lateFlush = .init(milliseconds: 3_600_000) })
        try h.run([[Ev.enter("u1", home, 10_000)]])
        try h.run([[Ev.other("x", 200_000)]])
        try h.run([[Ev.enter("u2", home, 20_000)]])  // the first rewrite: no flush before it
        XCTAssertEqual(int(h.counts[key("pv", "home", 0)]?["count"]), 2)
        try h.run([[Ev.enter("u3", home, 21_000)]])
        try h.run([[Ev.enter("u4", home, 22_000)]])
        XCTAssertEqual(int(h.counts[key("pv", "home", 0)]?["count"]), 2, "within the late flush: not written again yet")
        try h.finish()
        XCTAssertEqual(int(h.counts[key("pv", "home", 0)]?["count"]), 4)
        XCTAssertEqual(int(h.counts[key("pv", "home", 0)]?["users"]), 4)
        XCTAssertTrue(h.merger.isComplete(partition: 0))
    }

    func testWindowArithmeticDoesNotOverflow() throws {
        for t in [Int64.min, Int64.min + 1, -1, 0, Int64.max - 1, Int64.max] {
            let s = alignedStart(t, every: 60_000)
            XCTAssertLessThanOrEqual(s, t)
            let end = saturatingAdd(s, 60_000)
            XCTAssertTrue(end > t || end == .max, "\(t)")
        }
        XCTAssertEqual(alignedStart(-1, every: 60_000), -60_000)
        XCTAssertEqual(saturatingSub(.min, 30_000), .min)
        XCTAssertEqual(saturatingAdd(.max, 1), .max)
    }

    // MARK: - Installs: logins, silence

    func testLoginMidVisitKeepsTheVisitAndTheCrashTrail() throws {
        let h = try H()
        try h.run([[Ev.install("a1", Ev.enter("a1", home, 10_000)), Ev.install("a1", Ev.click("a1", home, 12_000)),
                    // The user logs in: distinct_id changes, the install does not.
                    Ev.install("a1", Ev.leave("login-7", home, 20_000)), Ev.install("a1", Ev.enter("login-7", product, 21_000)),
                    Ev.install("a1", Ev.crash("login-7", 25_000)),
                    // Another install whose events carry no anonymous_id: its distinct_id is the install.
                    Ev.enter("u9", home, 30_000)]])
        try h.finish()
        let leave = h.dwell(closedBy: "leave")
        XCTAssertEqual(leave.count, 1)
        XCTAssertEqual(leave.first?["distinct_id"] as? String, "login-7", "the closing event's distinct_id")
        XCTAssertEqual(int(leave.first?["enter_time"]), H.t0 + 10_000)
        XCTAssertEqual(int(leave.first?["duration_ms"]), 10_000)
        XCTAssertEqual(h.stage.processor.orphanCounter.value, 0)
        XCTAssertEqual(h.dwell(closedBy: "crash").first?["distinct_id"] as? String, "login-7")
        let trail = try XCTUnwrap(h.trails.first)
        XCTAssertEqual(trail["distinct_id"] as? String, "login-7")
        XCTAssertEqual((trail["trail"] as? [[String: Any]])?.map { $0["page"] as? String }, [home, home, product], "across the login")
        XCTAssertEqual(h.dwell(closedBy: "end_of_input").map { $0["distinct_id"] as? String }, ["u9"])
        // dwell users are counted by the closing event's distinct_id.
        XCTAssertEqual(int(h.counts[key("dwell", "home", 0)]?["users"]), 1)
    }

    /// The id arena is compacted while a visit still refers to the install's id from before its login.
    func testCompactionKeepsTheIDsOfOpenVisitsAfterALogin() throws {
        let h = try H(config: config {
            $0.visitTimeout = .init(milliseconds: 3_600_000)
            $0.trailMaxAge = .init(milliseconds: 60_000)
        })
        let gone = (0..<50).map { "gone-user-\($0)-with-a-long-distinct-id" }
        try h.run([gone.map { Ev.click($0, home, 1_000) } + [Ev.install("a1", Ev.enter("a1", home, 2_000)),
                                                              Ev.install("a1", Ev.click("login-7", home, 3_000))]])
        // a1 keeps uploading (records keyed by its anonymous id), so its visit does not time out by the watermark.
        for t: Int64 in [3_700_000, 3_800_000] {
            try h.run([TestRecord(json: "[\(Ev.install("a1", Ev.other("login-7", 3_000)))]", key: "a1", receivedAt: H.t0 + t),
                       TestRecord(json: "[\(Ev.other("x", t))]", receivedAt: H.t0 + t)])
        }
        let st = h.stage.state(0)
        XCTAssertTrue(h.dwell.isEmpty)
        XCTAssertEqual(st.idGarbage, 0, "compacted")
        XCTAssertEqual(h.stage.stateSize.users, 1)
        try h.finish()
        XCTAssertEqual(h.dwell(closedBy: "end_of_input").map { $0["distinct_id"] as? String }, ["a1"])
    }

    func testTimeoutOrEndOfInputCarriesThePageEntersDistinctID() throws {
        let h = try H()
        try h.run([[Ev.install("a1", Ev.enter("a1", home, 10_000)), Ev.install("a1", Ev.enter("login-7", product, 20_000))]])
        try h.finish()
        let ids = Dictionary(uniqueKeysWithValues: h.dwell(closedBy: "end_of_input").map { ($0["page"] as! String, $0["distinct_id"] as! String) })
        XCTAssertEqual(ids, [home: "a1", product: "login-7"])
    }

    func testWatermarkTimesOutOnlyVisitsOfSilentInstalls() throws {
        let h = try H(config: config { $0.visitTimeout = .init(milliseconds: 120_000) })
        try h.run([[Ev.enter("u1", home, 10_000)]])
        try h.run([[Ev.enter("u2", home, 10_000)]])
        // u1 keeps uploading (with an old clock: its own newest time stays low); u2 is silent.
        try h.run([[Ev.click("u1", home, 20_000)]], receivedAt: H.t0 + 200_000)
        try h.run([[Ev.other("x", 211_000)]])  // watermark 181 s: past 10 s + 2 min
        XCTAssertEqual(h.dwell(closedBy: "timeout").map { $0["distinct_id"] as? String }, ["u2"], "u1 sent something 11 s ago")
        try h.run([[Ev.other("x", 400_000)]])  // u1 silent for more than 2 min of collector time now
        XCTAssertEqual(Set(h.dwell(closedBy: "timeout").map { $0["distinct_id"] as! String }), ["u1", "u2"])
    }

    func testInstallIDInsidePropertiesOrAValueIsNotTheInstall() throws {
        let h = try H()
        // "anonymous_id" inside properties and as a string value: both ignored; distinct_id is the install.
        let e1 = Ev.enter("u1", home, 10_000, extra: [("anonymous_id", Ev.q("zz"))])
        let e2 = "{\"note\":\"\\\"anonymous_id\\\":\\\"zz\\\"\"," + Ev.leave("u1", home, 20_000).dropFirst()
        try h.run([[e1, e2]])
        try h.finish()
        XCTAssertEqual(h.dwell(closedBy: "leave").count, 1)
    }

    /// The install is the top-level `anonymous_id` as the decoder reads it: escapes decoded, spaces before the
    /// colon allowed, one inside another nested object ignored.
    func testInstallIDIsTheTopLevelAnonymousIDDecoded() throws {
        let h = try H()
        let enter = Ev.install("a1", Ev.enter("u1", home, 10_000))
        // Another install's enter of the same page whose nested object holds a1: u2's own visit (its install is
        // its distinct_id), no re-enter of a1's.
        let nested = "{\"device\":{\"anonymous_id\":\"a1\"}," + Ev.enter("u2", home, 15_000).dropFirst()
        // a1 again, its id escaped and spaced: the leave (after a login) closes a1's visit.
        let leave = "{\"anonymous_id\" : \"\\u0061\\u0031\"," + Ev.leave("login-7", home, 20_000).dropFirst()
        try h.run([[enter, nested, leave]])
        try h.finish()
        XCTAssertTrue(h.dwell(closedBy: "reenter").isEmpty)
        let closed = h.dwell(closedBy: "leave")
        XCTAssertEqual(closed.map { $0["distinct_id"] as? String }, ["login-7"])
        XCTAssertEqual(closed.map { int($0["enter_time"]) }, [H.t0 + 10_000])
        XCTAssertEqual(h.dwell(closedBy: "end_of_input").map { $0["distinct_id"] as? String }, ["u2"])
    }

    func testLatenessIsJudgedPerRecordAgainstThePartitionWatermark() throws {
        let h = try H(sourcePartitions: 2)
        try h.run([[Ev.enter("u1", home, 100_000)]])  // partition 0: watermark 70 s
        // One upload: its 150 s event is older than its own 200 s event minus the lateness, but the record is
        // judged against the watermark before it.
        try h.run([[Ev.enter("u2", home, 200_000), Ev.enter("u3", home, 150_000)]])
        XCTAssertEqual(h.stage.processor.lateCounter.value, 0)
        // Another partition has its own watermark.
        try h.run([[Ev.enter("u5", home, 20_000)]], partition: 1)
        XCTAssertEqual(h.stage.processor.lateCounter.value, 0)
        try h.run([[Ev.enter("u4", home, 169_999)]])  // watermark now 170 s
        XCTAssertEqual(h.stage.processor.lateCounter.value, 1)
    }

    func testRestoredPartitionJudgesLatenessFromTheReplayPoint() throws {
        let h = try H()
        h.stage.restore(partition: 0, maxEventTime: H.t0 + 100_000)
        try h.run([[Ev.enter("u1", home, 69_000), Ev.enter("u2", home, 71_000)]])
        XCTAssertEqual(h.stage.processor.lateCounter.value, 1)
    }

    func testIdlePartitionStopsHoldingWindowsBack() throws {
        let c = try ConfigDecoder().decode(WindowsStage.Config.self, yaml: "idle_timeout: 10ms\n", file: "x.yaml", environment: [:])
        XCTAssertEqual(c.idleTimeout.milliseconds, 10)
        let h = try H(config: c, sourcePartitions: 2)
        try h.run([[Ev.enter("u9", home, 5_000)]], partition: 1)
        try h.run([[Ev.enter("u1", home, 10_000)], [Ev.other("u1", 100_000)]], partition: 0)
        XCTAssertEqual(h.partials.count, 1, "partition 0 closed window 0")
        XCTAssertTrue(h.countsWritten.isEmpty, "partition 1 (watermark -25 s) holds window 0 back")

        Thread.sleep(forTimeInterval: 0.03)
        let out = try h.tick(held: [1])
        XCTAssertEqual(h.stage.emitter.idleCounter.value, 1)
        XCTAssertEqual(out.count, 1)
        XCTAssertNil(out.first?.offset)
        let last = try XCTUnwrap(h.progress.last)
        XCTAssertEqual(last.source, 1)
        XCTAssertEqual(last.watermark, H.t0 + 5_000 - 30_000)
        XCTAssertTrue(last.idle)
        XCTAssertEqual(int(h.counts[key("pv", "home", 0)]?["count"]), 1, "written without the idle partition")
        try h.tick(held: [1])
        XCTAssertEqual(h.stage.emitter.idleCounter.value, 1, "idle is reported once")

        // Partition 1 comes back: its events are not late (its own watermark), so its window-0 partial counts, and
        // the written window is written again with it.
        try h.run([[Ev.other("u9", 200_000)]], partition: 1)
        XCTAssertFalse(h.progress.last?.idle ?? true)
        XCTAssertEqual(h.merger.latePartials.value, 1)
        XCTAssertEqual(h.countsWritten.filter { $0.key == key("pv", "home", 0) }.count, 2)
        XCTAssertEqual(int(h.counts[key("pv", "home", 0)]?["count"]), 2)
    }

    func testPartitionWithRecentInputIsNotIdle() throws {
        let h = try H()  // idle timeout 60 s
        try h.run([[Ev.enter("u1", home, 10_000)]])
        try h.tick(held: [0, 1])
        XCTAssertEqual(h.stage.emitter.idleCounter.value, 0)
        XCTAssertFalse(h.progress.contains { $0.idle })
    }

    func testPartitionBackFromIdleIsCountedAgain() throws {
        // With every source partition idle, the merger must not treat all future windows as written.
        let h = try H(config: config { $0.idleTimeout = .init(milliseconds: 10) })
        try h.run([[Ev.enter("u1", home, 10_000)], [Ev.other("u1", 100_000)]])
        XCTAssertEqual(int(h.counts[key("pv", "home", 0)]?["count"]), 1)
        Thread.sleep(forTimeInterval: 0.03)
        try h.tick(held: [0])
        XCTAssertEqual(h.stage.emitter.idleCounter.value, 1)
        try h.run([[Ev.enter("u2", home, 130_000)], [Ev.other("u2", 250_000)]])
        XCTAssertEqual(h.merger.latePartials.value, 0)
        XCTAssertEqual(int(h.counts[key("pv", "home", 2)]?["count"]), 1)
    }

    // MARK: - Closing rules

    func testAppEndClosesEveryOpenVisitOfTheUserWithDuration() throws {
        let h = try H()
        try h.run([[Ev.enter("u1", home, 10_000), Ev.enter("u1", product, 20_000), Ev.enter("u2", home, 15_000), Ev.end("u1", 50_000)]])
        try h.run([[Ev.other("x", 200_000)]])
        let d = h.dwell(closedBy: "app_end").sorted { ($0["page"] as! String) < ($1["page"] as! String) }
        XCTAssertEqual(d.map { $0["page"] as? String }, [home, product])
        XCTAssertEqual(d.map { int($0["duration_ms"]) }, [40_000, 30_000])
        XCTAssertEqual(d.map { int($0["leave_time"]) }, [H.t0 + 50_000, H.t0 + 50_000])
        XCTAssertEqual(d.last?["rules"] as? [String], ["product", "product_any"])
        XCTAssertTrue(dwell(h, "u2").isEmpty, "another user's app end closes nothing of u2")
        let counts = h.counts
        XCTAssertEqual(int(counts[key("dwell", "home", 0)]?["sum_ms"]), 40_000)
        XCTAssertEqual(int(counts[key("dwell", "product", 0)]?["sum_ms"]), 30_000)
        XCTAssertEqual(int(counts[key("dwell", "product_any", 0)]?["count"]), 1)
        try h.finish()
        XCTAssertEqual(dwell(h, "u2").first?["closed_by"] as? String, "end_of_input")
    }

    func testCrashClosesWithDurationButIsNotInDwellAggregates() throws {
        let h = try H()
        try h.run([[Ev.enter("u1", home, 10_000), Ev.crash("u1", 50_000)]])
        try h.run([[Ev.other("x", 200_000)]])
        let d = h.dwell(closedBy: "crash")
        XCTAssertEqual(d.count, 1)
        XCTAssertEqual(int(d.first?["duration_ms"]), 40_000)
        XCTAssertEqual(int(d.first?["leave_time"]), H.t0 + 50_000)
        XCTAssertNotNil(h.counts[key("pv", "home", 0)])
        XCTAssertFalse(h.counts.keys.contains { $0.hasPrefix("dwell|") })
        XCTAssertEqual(h.trails.count, 1)
    }

    func assertNoDuration(_ records: [[String: Any]], file: StaticString = #filePath, line: UInt = #line) {
        for r in records {
            XCTAssertNil(r["leave_time"], file: file, line: line)
            XCTAssertNil(r["duration_ms"], file: file, line: line)
            XCTAssertNotNil(r["enter_time"], file: file, line: line)
        }
    }

    func testRestartClosesEveryOpenVisitWithoutDuration() throws {
        let h = try H()
        try h.run([[Ev.enter("u1", home, 10_000), Ev.enter("u1", product, 20_000), Ev.start("u1", 50_000), Ev.enter("u1", home, 55_000)]])
        try h.run([[Ev.other("x", 200_000)]])
        let d = h.dwell(closedBy: "restart")
        XCTAssertEqual(Set(d.map { $0["page"] as! String }), [home, product])
        assertNoDuration(d)
        XCTAssertEqual(h.dwell.count, 2, "the visit opened after the start is still open")
        XCTAssertFalse(h.counts.keys.contains { $0.hasPrefix("dwell|") })
    }

    func testReenterClosesTheOldVisitWithoutDuration() throws {
        let h = try H()
        try h.run([[Ev.enter("u1", home, 10_000), Ev.enter("u1", home, 30_000), Ev.leave("u1", home, 50_000)]])
        try h.run([[Ev.other("x", 200_000)]])
        let re = h.dwell(closedBy: "reenter")
        XCTAssertEqual(re.count, 1)
        XCTAssertEqual(int(re.first?["enter_time"]), H.t0 + 10_000)
        assertNoDuration(re)
        let leave = h.dwell(closedBy: "leave")
        XCTAssertEqual(int(leave.first?["enter_time"]), H.t0 + 30_000)
        XCTAssertEqual(int(leave.first?["duration_ms"]), 20_000)
        XCTAssertEqual(int(h.counts[key("pv", "home", 0)]?["count"]), 2)
        XCTAssertEqual(int(h.counts[key("dwell", "home", 0)]?["count"]), 1)
        XCTAssertEqual(int(h.counts[key("dwell", "home", 0)]?["sum_ms"]), 20_000)
    }

    func testTimeoutClosesWithoutDurationAndALaterLeaveIsAnOrphan() throws {
        let h = try H(config: config { $0.visitTimeout = .init(milliseconds: 120_000) })
        try h.run([[Ev.enter("u1", home, 10_000)]])
        try h.run([[Ev.other("x", 159_000)]])  // watermark 129 s: not past 10 s + 2 min
        XCTAssertTrue(h.dwell.isEmpty)
        try h.run([[Ev.other("x", 211_000)]])  // watermark 181 s (visits are swept once per window of watermark)
        let t = h.dwell(closedBy: "timeout")
        XCTAssertEqual(t.count, 1)
        assertNoDuration(t)
        try h.run([[Ev.leave("u1", home, 200_000)]])
        // The user's own later event also times a visit out first (before the sweep sees it).
        try h.run([[Ev.enter("u2", home, 400_000), Ev.leave("u2", home, 530_000)]])
        try h.run([[Ev.other("x", 600_000)]])
        XCTAssertEqual(h.dwell(closedBy: "timeout").count, 2)
        XCTAssertEqual(h.dwell(closedBy: "leave").count, 0)
        XCTAssertEqual(h.stage.processor.orphanCounter.value, 2)
        XCTAssertFalse(h.counts.keys.contains { $0.hasPrefix("dwell|") })
    }

    /// Users with nothing open are forgotten once their last event is older than the state horizon; the ids
    /// of the users kept (and of users that come later) are still theirs after the id bytes are compacted.
    func testExpiredUsersAreForgottenAndTheKeptOnesKeepTheirIDs() throws {
        let h = try H(config: config {
            $0.visitTimeout = .init(milliseconds: 3_600_000)
            $0.trailMaxAge = .init(milliseconds: 60_000)
        })
        let gone = (0..<50).map { "gone-user-\($0)-with-a-long-distinct-id" }
        try h.run([gone.map { Ev.click($0, home, 1_000) }])
        try h.run([[Ev.enter("keep", home, 3_000_000)]])
        XCTAssertEqual(h.stage.stateSize.users, 51)
        // The watermark passes 1 s + the horizon (1 h, the visit timeout): the clickers are forgotten, "keep"
        // has an open visit.
        try h.run([[Ev.other("x", 3_700_000)]])
        try h.run([[Ev.enter("late", product, 3_710_000), Ev.other("x", 3_800_000)]])
        XCTAssertEqual(h.stage.stateSize.users, 2, "keep and late")
        let st = h.stage.state(0)
        XCTAssertEqual(st.idGarbage, 0, "the forgotten ids were compacted away")
        XCTAssertEqual(st.idBytes.count, 2 + "keep".utf8.count + 2 + "late".utf8.count, "each after its 2-byte length")
        try h.run([[Ev.crash("keep", 3_900_000), Ev.enter("new", home, 3_900_001), Ev.leave("new", home, 3_910_000)]])
        try h.finish()
        XCTAssertEqual(h.trails.map { $0["distinct_id"] as? String }, ["keep"])
        XCTAssertEqual(dwell(h, "keep").map { $0["closed_by"] as? String }, ["crash"])
        XCTAssertEqual(dwell(h, "new").map { $0["closed_by"] as? String }, ["leave"])
        XCTAssertEqual(dwell(h, "late").map { $0["closed_by"] as? String }, ["end_of_input"])
        XCTAssertEqual(h.dwell.count, 3)
        XCTAssertEqual(Set(h.outputs.filter { $0.topic == "metrics.dwell" || $0.topic == "crash.trails" }.map(\.key)), ["keep", "new", "late"])
    }

    func testFinishClosesOpenVisitsEndOfInputAndWritesEveryWindow() throws {
        let h = try H()
        try h.run([[Ev.enter("u1", home, 10_000), Ev.click("u1", home, 20_000)]])
        XCTAssertFalse(h.merger.isComplete(partition: 0))
        try h.finish()
        let d = h.dwell(closedBy: "end_of_input")
        XCTAssertEqual(d.count, 1)
        assertNoDuration(d)
        XCTAssertEqual(h.progress.last?.watermark, .max)
        XCTAssertEqual(int(h.counts[key("pv", "home", 0)]?["count"]), 1)
        XCTAssertEqual(int(h.counts[key("click", "buy", 0)]?["count"]), 1)
        XCTAssertTrue(h.merger.isComplete(partition: 0))
    }

    func testOrphanLeaveIsCountedWithoutRecord() throws {
        let h = try H()
        try h.run([[Ev.leave("u1", home, 10_000), Ev.enter("u2", home, 11_000), Ev.leave("u2", product, 12_000)]])
        try h.run([[Ev.other("x", 200_000)]])
        XCTAssertTrue(h.dwell.isEmpty)
        XCTAssertEqual(h.stage.processor.orphanCounter.value, 2)
        try h.finish()
        XCTAssertEqual(dwell(h, "u2").first?["closed_by"] as? String, "end_of_input", "a leave of another page leaves the visit open")
    }

    // MARK: - Aggregates

    func testDwellAggregatesInTheWindowOfTheLeaveWithTheDimsOfTheEnter() throws {
        let h = try H()
        let visits: [(String, Int64, Int64)] = [
            ("u0", 55, 60), ("u1", 54, 61), ("u2", 50, 62), ("u3", 58, 63), ("u0", 62, 70), ("u4", 40, 100),
        ]
        var events: [String] = []
        for (u, a, b) in visits { events += [Ev.enter(u, home, a * 1000), Ev.leave(u, home, b * 1000)] }
        events += [Ev.enter("u7", home, 65_000), Ev.end("u7", 75_000)]                      // app_end counts
        events += [Ev.enter("u8", home, 65_000), Ev.crash("u8", 75_000)]                    // crash does not
        events += [Ev.enter("u5", home, 70_000, version: "4.0.0"), Ev.leave("u5", home, 80_000)]
        events += [Ev.enter("u6", home, 100_000), Ev.leave("u6", home, 130_000)]
        try h.run([events])
        try h.run([[Ev.other("x", 300_000)]])
        let counts = h.counts
        let d = try XCTUnwrap(counts[key("dwell", "home", 1)])
        // Durations 5, 7, 12, 5, 8, 60 and (app_end) 10 seconds.
        XCTAssertEqual(d["metric"] as? String, "dwell")
        XCTAssertEqual(int(d["count"]), 7)
        XCTAssertEqual(int(d["sum_ms"]), 107_000)
        XCTAssertEqual(int(d["avg_ms"]), 15_286)
        XCTAssertEqual(int(d["p50_ms"]), 8_000)
        XCTAssertEqual(int(d["p90_ms"]), 60_000)
        XCTAssertEqual(int(d["users"]), 6)
        XCTAssertEqual(d["dims"] as? [String: String], ["app_version": "3.2.1"], "dims of the enter, not of the leave")
        XCTAssertNil(counts[key("dwell", "home", 0)], "no leave falls in window 0")
        XCTAssertNil(counts[key("dwell", "home", 1, "app_version=9.9.9")])
        XCTAssertEqual(int(counts[key("dwell", "home", 1, "app_version=4.0.0")]?["sum_ms"]), 10_000)
        XCTAssertEqual(int(counts[key("dwell", "home", 2)]?["count"]), 1)
        XCTAssertNil(counts[key("pv", "home", 0)]?["sum_ms"], "pv records carry no dwell fields")
        XCTAssertEqual(int(counts[key("pv", "home", 0)]?["count"]), 5)
        XCTAssertEqual(int(counts[key("pv", "home", 1)]?["count"]), 4)
    }

    func testGroupByContentPutsContentAmongTheSortedDims() throws {
        let h = try H(config: config { $0.by = ["os", "app_version"] })
        let ios = [("os", Ev.q("iOS"))]
        try h.run([[
            Ev.cell("u1", home, 1_000, position: "1-2", content: "Sale", extra: ios),
            Ev.cell("u2", home, 2_000, position: "1-3", content: "Sale", extra: ios),
            Ev.cell("u1", home, 3_000, position: "1-4", content: "News", extra: ios),
            Ev.cell("u3", home, 4_000, position: "1-2", content: "Sale", extra: [("os", Ev.q("Android"))]),
            Ev.cell("u4", home, 5_000, position: "2-1", content: "Sale", extra: ios),  // section 2: no rule
            Ev.cell("u5", home, 6_000, position: "1-2", content: "Sale"),
        ]])
        try h.finish()
        let titles = h.counts.filter { $0.key.hasPrefix("click|titles|") }
        let w = H.t0
        XCTAssertEqual(Set(titles.keys), [
            "click|titles|\(w)|app_version=3.2.1,content=Sale,os=iOS",
            "click|titles|\(w)|app_version=3.2.1,content=News,os=iOS",
            "click|titles|\(w)|app_version=3.2.1,content=Sale,os=Android",
            "click|titles|\(w)|app_version=3.2.1,content=Sale",
        ])
        let sale = try XCTUnwrap(titles["click|titles|\(w)|app_version=3.2.1,content=Sale,os=iOS"])
        XCTAssertEqual(int(sale["count"]), 2)
        XCTAssertEqual(int(sale["users"]), 2)
        XCTAssertEqual(sale["dims"] as? [String: String], ["app_version": "3.2.1", "content": "Sale", "os": "iOS"])
        // The JSON dims are written in key order too.
        let raw = try XCTUnwrap(h.countsWritten.first { $0.key == "click|titles|\(w)|app_version=3.2.1,content=Sale,os=iOS" })
        XCTAssertTrue(String(decoding: raw.content.value, as: UTF8.self).contains("\"dims\":{\"app_version\":\"3.2.1\",\"content\":\"Sale\",\"os\":\"iOS\"}"))
        XCTAssertEqual(titles["click|titles|\(w)|app_version=3.2.1,content=Sale"]?["dims"] as? [String: String], ["app_version": "3.2.1", "content": "Sale"])
    }

    func testDimsReadPresetsThatEarlierStagesAdded() throws {
        let database = LocationStageTests.database
        try XCTSkipUnless(FileManager.default.fileExists(atPath: database), "needs testdata/geo/test-city.mmdb")
        let h = try H(config: config { $0.by = ["$province", "$project", "app_version"] }, enrich: { ctx in
            let location = try LocationStage(config: .init(database: database, locale: "zh-CN", reloadCheck: .seconds(5), cacheSize: 1024), context: ctx)
            return [try RecordPresetsStage(config: .init(), context: ctx), location]
        })
        try h.run([
            TestRecord(json: "[" + Ev.enter("u1", home, 1_000) + "]", ip: "125.70.56.154", project: "shop"),
            TestRecord(json: "[" + Ev.enter("u2", home, 2_000) + "]", ip: "125.70.56.154", project: "shop"),
            TestRecord(json: "[" + Ev.enter("u3", home, 3_000) + "]", ip: "8.8.8.215"),
            // The client's own `$province` wins (enrichment never overwrites it); no location: no `$province`.
            TestRecord(json: "[" + Ev.enter("u4", home, 4_000, extra: [("$province", Ev.q("Zhejiang"))]) + "]", ip: "125.70.56.154"),
            TestRecord(json: "[" + Ev.enter("u5", home, 5_000) + "]", ip: "10.1.2.3"),
        ])
        try h.finish()
        let w = H.t0
        let pv = h.counts.filter { $0.key.hasPrefix("pv|home|") }
        XCTAssertEqual(Set(pv.keys), [
            "pv|home|\(w)|$project=shop,$province=四川,app_version=3.2.1",
            "pv|home|\(w)|$project=default,$province=加利福尼亚州,app_version=3.2.1",
            "pv|home|\(w)|$project=default,$province=Zhejiang,app_version=3.2.1",
            "pv|home|\(w)|$project=default,app_version=3.2.1",
        ])
        let sichuan = try XCTUnwrap(pv["pv|home|\(w)|$project=shop,$province=四川,app_version=3.2.1"])
        XCTAssertEqual(int(sichuan["count"]), 2)
        XCTAssertEqual(int(sichuan["users"]), 2)
        XCTAssertEqual(sichuan["dims"] as? [String: String], ["$project": "shop", "$province": "四川", "app_version": "3.2.1"])
    }

    func testGroupByContentWithDimsBeforeContentOrNone() throws {
        for (by, extra, expected) in [
            (["aa"], [("aa", Ev.q("x"))], "aa=x,content=Sale"),
            (["aa"], [], "content=Sale"),
            (["zz", "os"], [("zz", Ev.q("1"))], "content=Sale,zz=1"),
            ([], [("aa", Ev.q("x"))], "content=Sale"),
        ] as [([String], [(String, String)], String)] {
            let h = try H(config: config { $0.by = by })
            try h.run([[Ev.cell("u1", home, 1_000, position: "1-2", content: "Sale", extra: extra)]])
            try h.finish()
            let keys = h.counts.keys.filter { $0.hasPrefix("click|titles|") }
            XCTAssertEqual(keys, ["click|titles|\(H.t0)|\(expected)"], "by \(by)")
            let dims = h.counts.values.first?["dims"] as? [String: String]
            XCTAssertEqual(dims?["content"], "Sale")
            XCTAssertEqual(dims?.count, expected.split(separator: ",").count)
        }
    }

    // MARK: - Ignored pages and trails

    func testIgnoredPagesAreNeitherPairedNorInTrails() throws {
        let h = try H(config: config { $0.ignorePages = ["SplashViewController"] })
        try h.run([[
            Ev.enter("u1", "UINavigationController", 1_000),
            Ev.enter("u1", "DebugMenuViewController", 2_000),  // the rules file's ignore_pages
            Ev.enter("u1", "SplashViewController", 3_000),     // the stage's ignore_pages
            Ev.click("u1", "DebugMenuViewController", 4_000),
            Ev.click("u1", "UITabBarController", 5_000),
            Ev.enter("u1", home, 6_000),
            Ev.leave("u1", "DebugMenuViewController", 7_000),
            Ev.leave("u1", "UINavigationController", 8_000),
            Ev.crash("u1", 10_000),
        ]])
        try h.finish()
        XCTAssertEqual(h.dwell.map { $0["page"] as? String }, [home])
        XCTAssertEqual(h.stage.processor.orphanCounter.value, 0, "leaves of ignored pages are not orphans either")
        let trail = try XCTUnwrap(h.trails.first?["trail"] as? [[String: Any]])
        XCTAssertEqual(trail.map { $0["page"] as? String }, [home])
        XCTAssertFalse(h.counts.keys.contains { $0.hasPrefix("click|") }, "clicks on ignored pages match no rule")
    }

    func testCrashTrailHoldsTheLastEntriesOldestFirstAcrossSessions() throws {
        let h = try H(config: config { $0.trailLength = 4 })
        let composite = trackEvent(event: "$AppClick", time: H.t0 + 7_000, distinctID: "u1", trackID: nil, properties: Ev.props([
            ("$screen_name", Ev.q(product)), ("$element_path", Ev.q(H.viewPath)), ("$element_type", Ev.q("UIControl")),
            ("$element_index", "3"), ("$element_content", "{\"UIView-UILabel(0)\":\"Sale\"}"),
        ]))
        // Arrival order is not event-time order.
        try h.run([[
            Ev.crash("u1", 8_000), composite, Ev.cell("u1", product, 6_000, position: "1-2", content: "Sale"),
            Ev.enter("u1", product, 5_000), Ev.start("u1", 4_000), Ev.end("u1", 3_000),
            Ev.click("u1", home, 2_000, index: 0, content: nil), Ev.enter("u1", home, 1_000),
            Ev.crash("u2", 9_000, version: nil),
        ]])
        try h.finish()
        let t1 = try XCTUnwrap(h.trails.first { $0["distinct_id"] as? String == "u1" })
        XCTAssertEqual(int(t1["crash_time"]), H.t0 + 8_000)
        XCTAssertEqual(t1["app_version"] as? String, "3.2.1")
        let trail = try XCTUnwrap(t1["trail"] as? [[String: Any]])
        XCTAssertEqual(trail.map { int($0["time"]) }, [2_000, 5_000, 6_000, 7_000].map { H.t0 + $0 })
        XCTAssertEqual(trail.map { $0["event"] as? String }, ["$AppClick", "$AppViewScreen", "$AppClick", "$AppClick"])
        XCTAssertEqual(trail.map { $0["page"] as? String }, [home, product, product, product])
        XCTAssertEqual(trail.map { $0["element"] as? String }, [
            "UIWindow-UIView-UIButton(0)_[null]", nil,
            "UIWindow-UIView-UITableView-UITableViewCell(1-2)_[Sale]",
            "UIWindow-UIView-UIControl(3)_[null]",
        ])
        let t2 = try XCTUnwrap(h.trails.first { $0["distinct_id"] as? String == "u2" })
        XCTAssertTrue(t2["app_version"] is NSNull)
        XCTAssertEqual((t2["trail"] as? [Any])?.count, 0)
        XCTAssertEqual(h.outputs.filter { $0.topic == "crash.trails" }.map(\.key).sorted(), ["u1", "u2"])
        XCTAssertEqual(h.stage.emitter.trailsCounter.value, 2)
    }

    func testTrailLeavesOutEntriesOlderThanTheMaximumAge() throws {
        let h = try H(config: config { $0.trailMaxAge = .init(milliseconds: 60_000) })
        try h.run([[Ev.click("u1", home, 10_000), Ev.enter("u1", home, 19_999), Ev.enter("u1", product, 20_000), Ev.crash("u1", 80_000)]])
        try h.finish()
        let trail = try XCTUnwrap(h.trails.first?["trail"] as? [[String: Any]])
        XCTAssertEqual(trail.map { $0["page"] as? String }, [product])
    }

    func testCrashAppVersionFallsBackToLib() throws {
        let h = try H()
        let crash = "{\"type\":\"track\",\"event\":\"$AppCrashed\",\"time\":\(H.t0 + 1_000),\"distinct_id\":\"u1\",\"lib\":{\"$lib\":\"iOS\",\"$app_version\":\"4.1.0\"},\"properties\":{}}"
        try h.run([[crash]])
        try h.finish()
        XCTAssertEqual(h.trails.first?["app_version"] as? String, "4.1.0")
    }

    // MARK: - Determinism and recovery

    /// A reproducible mix of uploads over `partitions`: every role, out of order, some late.
    func workload(seed: UInt64, count: Int, partitions: Int32 = 1) -> [TestRecord] {
        var state = seed
        func next(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }
        let pages = [home, product, "CartViewController", "UINavigationController"]
        var clock: Int64 = 0
        var records: [TestRecord] = []
        for _ in 0..<count {
            clock += Int64(next(20_000))
            let p = Int32(next(Int(partitions)))
            let user = "u\(Int(p) * 10 + next(5))"
            var events: [String] = []
            for _ in 0...next(3) {
                // Mostly within the lateness, sometimes well behind it.
                let t = max(0, clock - Int64(next(6) == 0 ? next(80_000) : next(25_000)))
                let page = pages[next(pages.count)]
                switch next(12) {
                case 0, 1, 2: events.append(Ev.enter(user, page, t, version: next(3) == 0 ? "4.0.0" : "3.2.1"))
                case 3, 4: events.append(Ev.leave(user, page, t))
                case 5: events.append(Ev.click(user, page, t, index: next(2)))
                case 6: events.append(Ev.cell(user, page, t, position: "1-\(next(3))", content: ["Sale", "News"][next(2)]))
                case 7: events.append(Ev.start(user, t))
                case 8: events.append(Ev.end(user, t))
                case 9: events.append(Ev.crash(user, t))
                default: events.append(Ev.other(user, t))
                }
            }
            // Received at the clock (the uploads' events are up to 80 s old): installs fall silent and visits
            // time out by the watermark too.
            records.append(TestRecord(json: "[" + events.joined(separator: ",") + "]", receivedAt: WindowsHarness.t0 + clock, partition: p))
        }
        return records
    }

    let recoveryConfig: WindowsStage.Config = {
        var c = WindowsStage.Config()
        c.visitTimeout = .init(milliseconds: 120_000)
        c.trailMaxAge = .init(milliseconds: 300_000)
        c.trailLength = 5
        return c
    }()

    func contents(_ outputs: [WindowsOutput]) -> Set<WindowsOutput.Content> {
        Set(outputs.filter { if case .progress? = $0.message, $0.topic == "maidian.partials" { return false } else { return true } }.map(\.content))
    }

    func countsText(_ h: H) -> [String: String] {
        var m: [String: String] = [:]
        for o in h.countsWritten { m[o.key] = String(decoding: o.content.value, as: UTF8.self) }
        return m
    }

    func testSameInputInAnyBatchSplitGivesTheSameOutputs() throws {
        let records = workload(seed: 42, count: 150, partitions: 2)
        var results: [(Set<WindowsOutput.Content>, [String: String])] = []
        for size in [1, 4, 150] {
            let h = try H(config: recoveryConfig, sourcePartitions: 2, partialsPartitions: 2)
            for start in stride(from: 0, to: records.count, by: size) {
                try h.run(Array(records[start..<min(start + size, records.count)]))
            }
            try h.finish()
            XCTAssertGreaterThan(h.stage.processor.lateCounter.value, 0, "the workload has late events")
            XCTAssertTrue(h.merger.isComplete(partition: 0) && h.merger.isComplete(partition: 1))
            results.append((contents(h.outputs), countsText(h)))
        }
        let (outputs, counts) = results[0]
        for topic in ["metrics.dwell", "crash.trails", "maidian.partials"] {
            XCTAssertGreaterThan(outputs.filter { $0.topic == topic }.count, 3, topic)
        }
        XCTAssertEqual(Set(outputs.compactMap { $0.topic == "metrics.dwell" ? (try? JSONSerialization.jsonObject(with: Data($0.value)) as? [String: Any])?["closed_by"] as? String : nil }),
                       ["leave", "app_end", "crash", "restart", "reenter", "timeout", "end_of_input"])
        XCTAssertGreaterThan(counts.count, 10)
        for (o, c) in results.dropFirst() {
            XCTAssertEqual(o.subtracting(outputs).map(\.description).sorted(), [])
            XCTAssertEqual(outputs.subtracting(o).map(\.description).sorted(), [])
            XCTAssertEqual(c, counts)
        }
    }

    func testReplayedRecordsOwnWhatTheyComplete() throws {
        let h = try H()
        h.stage.restore(partition: 0, maxEventTime: H.t0 + 5_000)
        try h.run([
            TestRecord(json: "[\(Ev.enter("u1", home, 10_000))]", replay: true),
            TestRecord(json: "[\(Ev.leave("u1", home, 40_000))]", replay: true),
            TestRecord(json: "[\(Ev.other("x", 100_000))]", replay: true),  // watermark 70 s: u1 paired, window 0 closed
            TestRecord(json: "[\(Ev.enter("u2", home, 80_000)),\(Ev.leave("u2", home, 90_000))]"),
            TestRecord(json: "[\(Ev.other("x", 200_000))]"),  // watermark 170 s: u2 paired, window 1 closed
        ])
        let u1 = try XCTUnwrap(h.outputs.first { $0.topic == "metrics.dwell" && $0.key == "u1" })
        XCTAssertTrue(u1.replay)
        XCTAssertLessThan(u1.offset ?? 3, 3, "a replayed record's (paired at the sweep its watermark's minute caused)")
        let u2 = try XCTUnwrap(h.outputs.first { $0.topic == "metrics.dwell" && $0.key == "u2" })
        XCTAssertFalse(u2.replay)
        for o in h.outputs where o.topic == "maidian.partials" {
            guard case .partial(let p)? = o.message else { continue }
            XCTAssertEqual(o.replay, p.windowEnd == H.t0 + 60_000, "window 0 is the replay's, window 1 is new")
        }
        // Only what was not replayed reached the merger: window 0's record is not written again.
        XCTAssertNil(h.counts[key("pv", "home", 0)])
        XCTAssertEqual(int(h.counts[key("pv", "home", 1)]?["count"]), 1)
    }

    func testWhatABatchCompletesIsOwnedByThePartitionsFirstRecordInIt() throws {
        let h = try H(sourcePartitions: 2)
        try h.run([
            TestRecord(json: "[\(Ev.enter("u1", home, 10_000)),\(Ev.leave("u1", home, 20_000))]", partition: 0),
            TestRecord(json: "[\(Ev.enter("u2", home, 10_000)),\(Ev.leave("u2", home, 30_000))]", partition: 1),
            TestRecord(json: "[\(Ev.other("x", 100_000))]", partition: 0),
            TestRecord(json: "[\(Ev.other("y", 100_000))]", partition: 1),
        ])
        // The later records have no outputs of their own, so a worker could commit them before the outputs
        // they caused are delivered if those were attributed to them.
        let dwell = h.outputs.filter { $0.topic == "metrics.dwell" }
        XCTAssertEqual(dwell.map(\.key).sorted(), ["u1", "u2"])
        for o in h.outputs {
            XCTAssertEqual(o.offset, 0, "\(o)")
        }
        XCTAssertEqual(Set(h.outputs.compactMap(\.partition)), [0, 1])
        XCTAssertEqual(h.outputs.first { $0.key == "u2" }?.partition, 1)
    }

    /// A worker killed after committing any offset `c` (every output of records before `c` delivered, none
    /// after) restarts from the replay point committed with `c`: what it then produces, together with what
    /// was delivered, is exactly what one uninterrupted run produces. Returns the latest replay point seen.
    @discardableResult
    func assertRecovers(_ records: [TestRecord], config: WindowsStage.Config, batch: Int, replayBatch: Int,
                        file: StaticString = #filePath, line: UInt = #line) throws -> Int64 {
        let full = try H(config: config)
        var clock = PartitionClock(start: ReplayPoint(offset: 0, maxEventTime: nil))
        for start in stride(from: 0, to: records.count, by: batch) {
            try full.run(Array(records[start..<min(start + batch, records.count)]))
            let b = full.harness.batch
            clock.advance(lastOffset: b.records.last!.offset, batchMax: (0..<b.eventCount).map(b.event).filter { $0.status == .live && $0.type.isTrack }.map(\.time).max())
        }
        try full.finish()
        let all = contents(full.outputs)
        var latest: Int64 = 0
        for c in 1...records.count {
            var k = clock
            let point = k.replayPoint(next: Int64(c), horizon: full.stage.stateHorizon)
            latest = max(latest, point.offset)
            let h = try H(config: config)
            h.stage.restore(partition: 0, maxEventTime: point.maxEventTime)
            h.harness.offsets[0] = point.offset
            let again = records[Int(point.offset)...].enumerated().map { i, r in
                var r = r
                r.replay = Int(point.offset) + i < c
                return r
            }
            for start in stride(from: 0, to: again.count, by: replayBatch) {
                try h.run(Array(again[start..<min(start + replayBatch, again.count)]))
            }
            try h.finish()
            let delivered = contents(full.outputs.filter { ($0.offset ?? .max) < c })
            let produced = contents(h.outputs.filter { !$0.replay })
            let missing = all.subtracting(delivered).subtracting(produced)
            let extra = produced.subtracting(all)
            XCTAssertEqual(missing.map(\.description).sorted(), [], "commit at \(c), replay from \(point.offset): missing", file: file, line: line)
            XCTAssertEqual(extra.map(\.description).sorted(), [], "commit at \(c), replay from \(point.offset): different", file: file, line: line)
        }
        return latest
    }

    func testRecoveryFromAnyCommitMatchesAnUninterruptedRun() throws {
        let latest = try assertRecovers(workload(seed: 7, count: 90), config: recoveryConfig, batch: 4, replayBatch: 3)
        XCTAssertGreaterThan(latest, 20, "late commits replay from well after the start")
    }

    func testReplayKeepsTrailEntriesOfACrashUpToTheLatenessBehind() throws {
        // The crash (680 s) is 21 s behind the newest event time (701 s) when it arrives: its trail reaches
        // back to 80 s, so the replay point must lie before the click at 100 s although 701 s - 600 s > 100 s.
        let records = [
            [Ev.other("x", 0)], [Ev.click("u1", home, 100_000)], [Ev.other("x", 701_000)], [Ev.crash("u1", 680_000)],
        ].map { TestRecord(json: "[" + $0.joined(separator: ",") + "]") }
        let c = config {
            $0.trailMaxAge = .init(milliseconds: 600_000)
            $0.visitTimeout = .init(milliseconds: 60_000)
        }
        let h = try H(config: c)
        try h.run(records)
        try h.finish()
        XCTAssertEqual((h.trails.first?["trail"] as? [Any])?.count, 1)
        try assertRecovers(records, config: c, batch: 1, replayBatch: 1)
    }
}

// MARK: - Several window sizes (`more_windows`)

extension WindowsStageTests {
    static let hour: Int64 = 3_600_000

    var sizesConfig: WindowsStage.Config {
        config { $0.moreWindows = [.init(window: .init(milliseconds: Self.hour), countsTopic: "metrics.counts.hourly")] }
    }

    func decodeErrors(_ yaml: String) -> [String] {
        do {
            _ = try ConfigDecoder().decode(WindowsStage.Config.self, yaml: yaml, file: "w.yaml", environment: [:])
            return []
        } catch {
            return PipelineErrors.flatten(error).map(\.description)
        }
    }

    func testMoreWindowsDecodeAndEveryRepeatedSizeOrTopicIsReportedAtItsEntry() throws {
        let c = try ConfigDecoder().decode(WindowsStage.Config.self, yaml: """
            window: 1m
            more_windows:
              - {window: 1h, counts_topic: metrics.counts.hourly}
              - {window: 1d, counts_topic: metrics.counts.daily}
            """, file: "w.yaml", environment: [:])
        XCTAssertEqual(c.sizes.map(\.window.milliseconds), [60_000, Self.hour, 24 * Self.hour])
        XCTAssertEqual(c.sizes.map(\.countsTopic), ["metrics.counts", "metrics.counts.hourly", "metrics.counts.daily"])
        XCTAssertEqual(try ConfigDecoder().decode(WindowsStage.Config.self, yaml: "window: 5m\n", file: "w.yaml", environment: [:]).sizes.count, 1)

        let errors = decodeErrors("""
            window: 1m
            more_windows:
              - {window: 1h, counts_topic: metrics.counts.hourly}
              - {window: 60s, counts_topic: other}
              - {window: 1d, counts_topic: metrics.counts.hourly}
              - {window: 60m, counts_topic: metrics.counts}
            """)
        XCTAssertEqual(errors.count, 4, "\(errors)")
        XCTAssertTrue(errors.contains { $0.hasPrefix("w.yaml:4:14: window size 1m is already counted by 'window'") }, "\(errors)")
        XCTAssertTrue(errors.contains { $0.hasPrefix("w.yaml:5:32: counts topic 'metrics.counts.hourly' is already the topic of more_windows[0]") }, "\(errors)")
        XCTAssertTrue(errors.contains { $0.hasPrefix("w.yaml:6:14: window size 1h is already counted by more_windows[0]") }, "\(errors)")
        XCTAssertTrue(errors.contains { $0.hasPrefix("w.yaml:6:33: counts topic 'metrics.counts' is already the topic of 'counts_topic'") }, "\(errors)")

        // An entry's own problems, at the entry's value.
        XCTAssertEqual(decodeErrors("more_windows:\n  - {window: 0s, counts_topic: t}\n").first?.hasPrefix("w.yaml:2:14: 'window' must be positive"), true)
        XCTAssertEqual(decodeErrors("more_windows:\n  - {window: 1h}\n").first?.contains("counts_topic"), true)
        XCTAssertEqual(decodeErrors("more_windows:\n  - {window: 1h, counts_topic: t, windw: 1}\n").first?.contains("unknown key 'windw'"), true)
    }

    func testEverySizeCountsItsOwnWindowsWithItsOwnKeysAndTopic() throws {
        let h = try H(config: sizesConfig)
        XCTAssertEqual(h.stage.outputTopics, ["metrics.counts", "metrics.counts.hourly", "metrics.dwell", "crash.trails"])
        // Two minutes of one hour, a leave in each (dwell), then an event that closes the hour.
        try h.run([[Ev.enter("u1", home, 1_000)], [Ev.leave("u1", home, 5_000), Ev.enter("u2", home, 61_000)],
                   [Ev.leave("u2", home, 70_000)], [Ev.other("x", Self.hour + 100_000)]])
        try h.finish()
        let hourStart = H.t0 - H.t0 % Self.hour
        func last(_ topic: String) -> [String: [String: Any]] {
            var m: [String: [String: Any]] = [:]
            for o in h.countsWritten where o.topic == topic { m[o.key] = o.json }
            return m
        }
        let minutes = last("metrics.counts"), hours = last("metrics.counts.hourly")
        XCTAssertEqual(int(minutes[key("pv", "home", 0)]?["count"]), 1)
        XCTAssertEqual(int(minutes[key("pv", "home", 1)]?["count"]), 1)
        let pvHour = "pv|home|\(hourStart)|app_version=3.2.1"
        XCTAssertEqual(int(hours[pvHour]?["count"]), 2, "\(hours.keys.sorted())")
        XCTAssertEqual(int(hours[pvHour]?["users"]), 2)
        XCTAssertEqual(int(hours[pvHour]?["window_start"]), hourStart)
        XCTAssertEqual(int(hours[pvHour]?["window_end"]), hourStart + Self.hour)
        let dwellHour = try XCTUnwrap(hours["dwell|home|\(hourStart)|app_version=3.2.1"], "\(hours.keys.sorted())")
        XCTAssertEqual(int(dwellHour["count"]), 2)
        XCTAssertEqual(int(dwellHour["sum_ms"]), 4_000 + 9_000)
        XCTAssertEqual(hours.count, 2, "pv and dwell of the hour: \(hours.keys.sorted())")
        XCTAssertEqual(h.dwell.count, 2, "dwell records are written once")
        // The hourly partials name their size; the minute ones do not (as before sizes).
        let sizes = Set(h.partials.map(\.size))
        XCTAssertEqual(sizes, [0, Self.hour])
        for p in h.partials where p.size == Self.hour { XCTAssertEqual(p.windowEnd % Self.hour, 0) }
    }

    func testALateEventRewritesItsWindowOfEverySize() throws {
        let h = try H(config: config {
            $0.lateFlush = .init(milliseconds: 0)
            $0.moreWindows = [.init(window: .init(milliseconds: Self.hour), countsTopic: "metrics.counts.hourly")]
        })
        let hourStart = H.t0 - H.t0 % Self.hour
        // Closes the hour of t0 and its minutes, then an upload 2 minutes into that hour arrives late.
        try h.run([[Ev.enter("u1", home, 1_000)], [Ev.other("x", Self.hour + 100_000)]])
        let pvHour = "pv|home|\(hourStart)|app_version=3.2.1"
        XCTAssertEqual(h.countsWritten.filter { $0.topic == "metrics.counts.hourly" && $0.key == pvHour }.count, 1)
        try h.run([[Ev.enter("u2", home, 121_000)]], receivedAt: H.t0 + Self.hour + 110_000)
        XCTAssertEqual(h.stage.processor.lateCounter.value, 1)
        let hourly = h.countsWritten.filter { $0.topic == "metrics.counts.hourly" && $0.key == pvHour }
        XCTAssertEqual(hourly.count, 2, "the hour is written again")
        XCTAssertEqual(int(hourly.last?.json["count"]), 2)
        XCTAssertEqual(int(hourly.last?.json["users"]), 2)
        let minute = h.countsWritten.filter { $0.topic == "metrics.counts" && $0.key == key("pv", "home", 2) }
        XCTAssertEqual(minute.count, 1, "the late minute is written (once: it had no record)")
        XCTAssertEqual(int(minute.last?.json["count"]), 1)
    }

    /// Dwell records are the same whatever the sizes: visits are swept once a minute of watermark, not once a
    /// window (an hour's window would keep a silent install's visit open for up to an hour longer, and a late
    /// leave would then pair with it).
    func testVisitTimeoutsDoNotDependOnTheWindowSizes() throws {
        func dwell(_ c: WindowsStage.Config) throws -> [String] {
            let h = try H(config: c)
            try h.run([[Ev.enter("u1", home, 0)]], receivedAt: H.t0)
            try h.run([[Ev.other("x", 40 * 60_000)]], receivedAt: H.t0 + 40 * 60_000)
            // u1's leave, 25 minutes into its visit, arrives late after its 40 minutes of silence.
            try h.run([[Ev.leave("u1", home, 25 * 60_000)]], receivedAt: H.t0 + 45 * 60_000)
            try h.finish()
            return h.dwell.map { try! String(decoding: JSONSerialization.data(withJSONObject: $0, options: .sortedKeys), as: UTF8.self) }.sorted()
        }
        let minute = try dwell(config())
        XCTAssertEqual(minute.count, 1)
        XCTAssertTrue(minute.first?.contains(#""closed_by":"timeout""#) == true, "\(minute)")
        XCTAssertEqual(try dwell(config { $0.window = .init(milliseconds: Self.hour) }), minute, "window: 1h alone")
        XCTAssertEqual(try dwell(sizesConfig), minute, "sizes [1m, 1h]")
    }

    /// A source partition taken over after any commit restores every size's open windows: with the hour's
    /// windows open for longer, the replay point reaches back to the hour's start.
    func testRecoveryFromAnyCommitMatchesAnUninterruptedRunWithSeveralSizes() throws {
        var c = recoveryConfig
        c.moreWindows = [.init(window: .init(milliseconds: 10 * 60_000), countsTopic: "metrics.counts.10m")]
        XCTAssertEqual(try H(config: recoveryConfig).stage.stateHorizon, 330_000, "30 s + the trail age")
        XCTAssertEqual(try H(config: c).stage.stateHorizon, 630_000, "30 s + the largest window")
        let records = workload(seed: 7, count: 90)
        let h = try H(config: c)
        try h.run(records)
        XCTAssertTrue(h.partials.contains { $0.size == 10 * 60_000 }, "the workload closes 10-minute windows before its end")
        try h.finish()
        try assertRecovers(records, config: c, batch: 4, replayBatch: 3)
    }

    /// Pages and click identifiers that never repeat (order numbers in contents, a page per product) are kept only
    /// while the state refers to them: a stage that compacts them after every few dozen writes exactly what one that
    /// never compacts writes (trails with those clicks, visits of those pages, counts), and keeps far fewer texts.
    func testCompactingPageAndElementTextsChangesNoOutput() throws {
        let kept = try WindowsHarness()
        let compacted = try WindowsHarness()
        compacted.stage.catalog.textCompactionFloor = 32
        compacted.stage.catalog.compactTextsAt = 32
        let users = ["u1", "u2", "u3", "u4"]
        for b in 0..<150 {
            let t = Int64(b) * 60_000
            var batch: [[String]] = []
            for (k, u) in users.enumerated() {
                let at = t + Int64(k) * 1000
                let page = "Product\(b % 40)"
                var events: [String] = []
                events.append(Ev.enter(u, page, at))
                events.append(Ev.click(u, page, at + 100, content: "order-\(b)-\(k)"))
                events.append(Ev.cell(u, "HomeViewController", at + 200, position: "1-\(b % 7)", content: "item \(b)"))
                if (b + k) % 3 == 0 { events.append(Ev.leave(u, page, at + 300)) }
                if (b + 2 * k) % 11 == 0 { events.append(Ev.crash(u, at + 400, version: "v\(b)")) }
                batch.append(events)
            }
            // Every fifth batch also brings a late upload of u4's, an hour behind: late events are paired at once.
            if b % 5 == 4 && b > 60 {
                let late = t - 3_600_000
                var events: [String] = []
                events.append(Ev.enter("u4", "Late\(b)", late))
                events.append(Ev.click("u4", "Late\(b)", late + 10, content: "late \(b)"))
                events.append(Ev.crash("u4", late + 20))
                batch.append(events)
            }
            try kept.run(batch)
            try compacted.run(batch)
        }
        try assertSameOutputs(compacted, kept)
        XCTAssertGreaterThan(kept.trails.count, 20)
        XCTAssertTrue(kept.trails.contains { ($0["trail"] as? [[String: Any]])?.contains { ($0["element"] as? String)?.contains("order-") == true } == true })
        XCTAssertGreaterThan(compacted.stage.textCompactions.value, 3)
        XCTAssertEqual(kept.stage.textCompactions.value, 0)
        let keptTexts = kept.stage.catalog.elementsText.count + kept.stage.catalog.pagesText.count
        let compactedTexts = compacted.stage.catalog.elementsText.count + compacted.stage.catalog.pagesText.count
        XCTAssertLessThan(compactedTexts * 3, keptTexts, "compacted \(compactedTexts), kept \(keptTexts)")
    }

    /// Compacting aggregate combos, contents and dims between batches (here every few dozen combos) writes what a
    /// stage that never compacts writes: counts keyed and headed by content and by app version, late
    /// contributions to written windows, dwell of visits that stayed open over compactions.
    func testCompactingCombosAndContentsChangesNoOutput() throws {
        let kept = try WindowsHarness()
        let compacted = try WindowsHarness()
        compacted.stage.catalog.comboCompactionFloor = 16
        compacted.stage.catalog.compactCombosAt = 16
        let users = ["u1", "u2", "u3"]
        for b in 0..<120 {
            let t = Int64(b) * 60_000
            var batch: [[String]] = []
            for (k, u) in users.enumerated() {
                let at = t + Int64(k) * 1000
                var events: [String] = []
                // App versions (the dims) that never come back: visits stay open over batches with them.
                events.append(Ev.enter(u, "HomeViewController", at, version: "v\(b)-\(k)"))
                events.append(Ev.click(u, "HomeViewController", at + 50, version: "c\(b)-\(k)"))
                // And versions that do come back: their dims stay known over compactions.
                events.append(Ev.enter(u, "ProductViewController", at + 60, version: "r\(b % 3)"))
                events.append(Ev.leave(u, "ProductViewController", at + 70))
                // A content that never comes back, and one that comes back every batch (its combo stays in use).
                events.append(Ev.cell(u, "HomeViewController", at + 100, position: "1-1", content: "order \(b)-\(k)"))
                events.append(Ev.cell(u, "HomeViewController", at + 150, position: "1-2", content: "Sale"))
                if (b + k) % 4 == 0 { events.append(Ev.leave(u, "HomeViewController", at + 300)) }
                batch.append(events)
            }
            // Every seventh batch a late upload, ten minutes behind: contents counted into written windows.
            if b % 7 == 6 && b > 20 {
                let late = t - 600_000
                batch.append([Ev.cell("u9", "HomeViewController", late, position: "1-1", content: "late \(b)"),
                              Ev.cell("u9", "HomeViewController", late + 10, position: "1-2", content: "Sale")])
            }
            try kept.run(batch)
            try compacted.run(batch)
        }
        try assertSameOutputs(compacted, kept)
        XCTAssertTrue(kept.countsWritten.contains { $0.key.contains("content=order 100-2") }, "counts grouped by content")
        XCTAssertTrue(kept.countsWritten.contains { $0.key.contains("content=late 90") }, "late contents counted")
        XCTAssertGreaterThan(compacted.stage.comboCompactions.value, 3)
        XCTAssertEqual(kept.stage.comboCompactions.value, 0)
        let keptCombos = kept.stage.catalog.combos.count, compactedCombos = compacted.stage.catalog.combos.count
        XCTAssertLessThan(compactedCombos * 3, keptCombos, "compacted \(compactedCombos), kept \(keptCombos)")
        XCTAssertLessThan(compacted.stage.catalog.contents.count * 3, kept.stage.catalog.contents.count)
        XCTAssertLessThan(compacted.stage.catalog.dimsIdentities.count * 3, kept.stage.catalog.dimsIdentities.count)
        XCTAssertLessThan(compacted.stage.catalog.dimsSets.count * 3, kept.stage.catalog.dimsSets.count)
        XCTAssertTrue(kept.outputs.contains { $0.topic == "metrics.dwell" }, "visits closed")
        XCTAssertTrue(kept.countsWritten.contains { $0.key.hasPrefix("dwell|") && $0.key.contains("app_version=v99-1") }, "dwell by app version: \(kept.countsWritten.filter { $0.key.hasPrefix("dwell|") }.prefix(2).map(\.key))")
    }

    /// Finishes both stages and compares everything they wrote, merged counts included.
    private func assertSameOutputs(_ compacted: WindowsHarness, _ kept: WindowsHarness, file: StaticString = #filePath, line: UInt = #line) throws {
        try kept.finish()
        try compacted.finish()
        func texts(_ h: WindowsHarness) -> [String] { h.outputs.map { "\($0.topic) \($0.key) \(String(decoding: $0.content.value, as: UTF8.self))" } }
        XCTAssertEqual(texts(compacted), texts(kept), file: file, line: line)
        XCTAssertEqual(compacted.countsWritten.map(\.key), kept.countsWritten.map(\.key), file: file, line: line)
        XCTAssertEqual(compacted.countsWritten.map { $0.content.value }, kept.countsWritten.map { $0.content.value }, file: file, line: line)
    }
}
