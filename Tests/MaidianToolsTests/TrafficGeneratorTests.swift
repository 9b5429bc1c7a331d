import Foundation
import MaidianEvents
import XCTest

@testable import MaidianRecording
@testable import MaidianTools

/// Decodes generated records the slow, obvious way (Foundation JSON: tests only) and classifies them
/// per wire format §2.
private struct Classified {
    var reasons: [String: Int] = [:]
    var events: [[String: Any]] = []
    var eventNames: [String: Int] = [:]
    var duplicateValues = 0
    var wrongClocks = 0
    var fixes: Set<String> = []
    var plainJSON = 0
    var kinds: Set<String> = []

    init(_ records: [RecordingRecord]) {
        let nameRE = try! NSRegularExpression(pattern: "^[A-Za-z_$][A-Za-z0-9_$]{0,99}$")
        func validName(_ s: String) -> Bool {
            nameRE.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) != nil
        }
        let zstd = ZstdDecompressor()
        var seenValues: Set<[UInt8]> = []
        let profileTypes: Set<String> = ["profile_set", "profile_set_once", "profile_increment", "profile_delete", "profile_append", "profile_unset"]
        for r in records {
            if !seenValues.insert(r.value).inserted { duplicateValues += 1 }
            let received = Int64(r.headerString("received_at") ?? "") ?? 0
            var json: [UInt8]
            if r.value.starts(with: [0x28, 0xB5, 0x2F, 0xFD]) {
                var out: [UInt8] = []
                var failure: ZstdError? = nil
                r.value.withUnsafeBytes { raw in
                    do throws(ZstdError) {
                        _ = try zstd.decompress(raw, into: &out, limit: 16 << 20)
                    } catch {
                        failure = error
                    }
                }
                if let failure {
                    reasons[failure.code == .tooLarge ? "too_large" : "bad_zstd", default: 0] += 1
                    continue
                }
                json = out
            } else if r.value.first(where: { ![0x20, 0x0A, 0x0D, 0x09].contains($0) }) == 0x5B {
                json = r.value
                plainJSON += 1
            } else {
                reasons["bad_encoding", default: 0] += 1
                continue
            }
            guard let parsed = try? JSONSerialization.jsonObject(with: Data(json), options: [.fragmentsAllowed]) else {
                reasons["bad_json", default: 0] += 1
                continue
            }
            guard let array = parsed as? [Any] else {
                reasons["not_array", default: 0] += 1
                continue
            }
            for element in array {
                guard let e = element as? [String: Any] else { reasons["not_object", default: 0] += 1; continue }
                guard let type = e["type"] as? String, type == "track" || type == "track_signup" || profileTypes.contains(type) else {
                    reasons["bad_type", default: 0] += 1
                    continue
                }
                if type.hasPrefix("track") {
                    guard let name = e["event"] as? String, validName(name) else { reasons["bad_event_name", default: 0] += 1; continue }
                }
                guard let t = e["time"] as? NSNumber, t.doubleValue == t.doubleValue.rounded(), !(e["time"] is String) else {
                    reasons["bad_time", default: 0] += 1
                    continue
                }
                guard let did = e["distinct_id"] as? String, !did.isEmpty, did.utf8.count <= 255 else {
                    reasons["bad_distinct_id", default: 0] += 1
                    continue
                }
                if let p = e["properties"], !(p is [String: Any]) { reasons["bad_properties", default: 0] += 1; continue }
                events.append(e)
                eventNames[(e["event"] as? String) ?? type, default: 0] += 1
                if let flush = e["_flush_time"] as? NSNumber, abs(received - flush.int64Value) > 60_000 { wrongClocks += 1 }
                let props = e["properties"] as? [String: Any] ?? [:]
                if let kind = props["$element_kind"] as? String { kinds.insert(kind) }
                for (k, v) in props {
                    if !validName(k) { fixes.insert("name"); continue }
                    if v is NSNull { fixes.insert("null") }
                    if let s = v as? String, s.utf8.count > 8191 { fixes.insert("long") }
                    if let a = v as? [Any], a.contains(where: { !($0 is String) }) { fixes.insert("array") }
                    if v is [String: Any] && k != "$element_content" { fixes.insert("object") }
                }
            }
        }
    }
}

final class TrafficGeneratorTests: XCTestCase {
    private func generate(_ config: TrafficConfig) -> [RecordingRecord] {
        let g = TrafficGenerator(config)
        var out: [RecordingRecord] = []
        while let r = g.next() { out.append(r) }
        XCTAssertEqual(g.stats.records, out.count)
        // "Events": every element of every good record's array, retried copies included (as the pipeline counts).
        let c = Classified(out)
        let recordLevel: Set<String> = ["bad_encoding", "bad_zstd", "too_large", "bad_json", "not_array"]
        let elements = c.events.count + c.reasons.filter { !recordLevel.contains($0.key) }.map(\.value).reduce(0, +)
        XCTAssertEqual(g.stats.events, elements, "gen's events are the elements of the good records")
        XCTAssertGreaterThan(g.stats.retriedEvents, 0)
        return out
    }

    func testDeterministicForASeed() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-gen-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var files: [[UInt8]] = []
        for (i, seed) in [7, 7, 8].enumerated() {
            let path = dir.appendingPathComponent("g\(i).ndjson.zst").path
            let summary = try TrafficGenerator.generate(TrafficConfig(users: 40, minutes: 30, seed: UInt64(seed)), to: path)
            XCTAssertGreaterThan(summary.stats.records, 200)
            XCTAssertEqual(summary.fileBytes, try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
            files.append([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
        }
        XCTAssertEqual(files[0], files[1], "same seed, same bytes")
        XCTAssertNotEqual(files[0], files[2], "another seed, other traffic")
        // The file is a valid recording.
        let records = try Recording.read(path: dir.appendingPathComponent("g0.ndjson.zst").path)
        XCTAssertEqual(records, generate(TrafficConfig(users: 40, minutes: 30, seed: 7)))
    }

    func testSampleSizedTrafficCoversEveryDeadLetterReasonAndTheEventMix() throws {
        let config = TrafficConfig(users: 300, minutes: 60, seed: 1)
        let records = generate(config)
        // Similar in size to the recorded sample (9,568 records for 300 users, 60 minutes).
        XCTAssertGreaterThan(records.count, 8_000)
        XCTAssertLessThan(records.count, 16_000)

        // Topic order: receive time, which is also the record timestamp.
        var last: Int64 = .min
        var keys: Set<String> = []
        for r in records {
            let ts = try XCTUnwrap(r.timestamp)
            XCTAssertGreaterThanOrEqual(ts, last)
            last = ts
            XCTAssertEqual(r.headerString("received_at"), String(ts))
            XCTAssertEqual(r.headerString("project"), "shop")
            XCTAssertNotNil(r.header("ip"))
            keys.insert(try XCTUnwrap(r.keyString))
        }
        XCTAssertGreaterThan(keys.count, 280)
        XCTAssertTrue(keys.allSatisfy { $0.count == 17 && $0.hasPrefix("a0000") })
        XCTAssertTrue(records.contains { $0.header("ua") != nil })
        XCTAssertTrue(records.contains { $0.headerString("ip")?.contains(":") ?? false })
        XCTAssertTrue(records.contains { $0.headerString("ip")?.hasPrefix("10.") ?? false })

        let c = Classified(records)
        let reasons = ["bad_encoding", "bad_zstd", "bad_json", "not_array", "not_object", "bad_type", "bad_event_name",
                       "bad_time", "bad_distinct_id", "bad_properties"]
        for reason in reasons {
            XCTAssertGreaterThan(c.reasons[reason] ?? 0, 0, "no \(reason) in \(c.reasons)")
        }
        let bad = c.reasons.values.reduce(0, +)
        XCTAssertLessThan(Double(bad), 0.03 * Double(records.count), "bad records and events stay a small share")
        XCTAssertEqual(c.fixes, ["name", "null", "long", "array", "object"])

        for name in ["$AppStart", "$AppViewScreen", "$AppPageLeave", "enter_view", "leave_view", "$AppClick", "$AppEnd",
                     "$AppCrashed", "$SignUp", "profile_set"] {
            XCTAssertGreaterThan(c.eventNames[name] ?? 0, 0, "no \(name) in \(c.eventNames)")
        }
        let clicks = c.eventNames["$AppClick"] ?? 0
        XCTAssertGreaterThan(Double(clicks), 0.35 * Double(c.events.count))
        XCTAssertEqual(c.kinds, ["control", "gesture", "table", "collection", "alert"])
        XCTAssertGreaterThan(c.duplicateValues, 50, "retried uploads repeat values")
        XCTAssertGreaterThan(c.wrongClocks, 100, "some devices' clocks are hours off")
        XCTAssertGreaterThan(c.plainJSON, 20, "some uploads are plain JSON")

        // Composite list-cell content and page paths as in the sample.
        let cell = try XCTUnwrap(c.events.lazy.compactMap { $0["properties"] as? [String: Any] }.first { $0["$element_type"] as? String == "UITableViewCell" })
        let content = try XCTUnwrap(cell["$element_content"] as? [String: String])
        XCTAssertEqual(Set(content.keys), ["UIView-UILabel(0)", "UIView-UIImageView(1)"])
        XCTAssertEqual(cell["item_name"] as? String, content["UIView-UILabel(0)"])
        XCTAssertTrue(c.events.contains {
            ($0["properties"] as? [String: Any])?["$page_path"] as? String == "UITabBarController-UINavigationController(3)-ProfileViewController(0)"
        })
        // Logged-in users use their login id; others their anonymous id.
        XCTAssertTrue(c.events.contains { ($0["distinct_id"] as? String)?.hasPrefix("user") ?? false })
        XCTAssertTrue(c.events.contains { ($0["distinct_id"] as? String)?.hasPrefix("a0") ?? false })
        XCTAssertTrue(c.events.contains { (($0["properties"] as? [String: Any])?["$os"] as? String) == "Android" })
    }

    /// The events of each good record with its `received_at` (Foundation JSON: tests only); a retried copy (the
    /// same bytes again) once.
    private func uploads(_ records: [RecordingRecord]) -> [(received: Int64, events: [[String: Any]])] {
        let zstd = ZstdDecompressor()
        var out: [(Int64, [[String: Any]])] = []
        var seen: Set<[UInt8]> = []
        for r in records where seen.insert(r.value).inserted {
            let received = Int64(r.headerString("received_at") ?? "") ?? 0
            var json = r.value
            if r.value.starts(with: [0x28, 0xB5, 0x2F, 0xFD]) {
                json = []
                var failed = false
                r.value.withUnsafeBytes { raw in
                    do throws(ZstdError) { _ = try zstd.decompress(raw, into: &json, limit: 16 << 20) } catch { failed = true }
                }
                if failed { continue }
            }
            guard let array = (try? JSONSerialization.jsonObject(with: Data(json))) as? [Any] else { continue }
            out.append((received, array.compactMap { $0 as? [String: Any] }.filter { ($0["time"] as? NSNumber) != nil }))
        }
        return out
    }

    private func ms(_ v: Any?) -> Int64? { (v as? NSNumber)?.int64Value }

    /// What each condition of `maidian gen` (wire format revision 2) puts into the traffic, found in the records
    /// themselves; without the options none of it is there.
    func testRealWorldConditionsAreOptInAndShowInTheRecords() {
        func look(_ config: TrafficConfig) -> (offline: Int, tooLate: Int, future: Int, logins: Int, stats: TrafficStats) {
            let g = TrafficGenerator(config)
            var records: [RecordingRecord] = []
            while let r = g.next() { records.append(r) }
            var offline = 0, tooLate = 0, future = 0
            var aheadIDs: Set<Int64> = []
            for (received, events) in uploads(records) {
                // A cached upload says when it was sent (`_flush_time` near `received_at`: calibration does not move
                // its events), and its events are older than that.
                let flushed = events.compactMap { ms($0["_flush_time"]) }
                let oldest = events.compactMap { ms($0["time"]) }.min() ?? received
                if let f = flushed.first, abs(received - f) <= 60_000 {
                    if received - oldest > 24 * 3_600_000 { tooLate += 1 } else if received - oldest > 120_000 { offline += 1 }
                }
                for e in events where (e["type"] as? String)?.hasPrefix("track") == true && e["_flush_time"] == nil
                    && (ms(e["time"]) ?? 0) > received + 86_400_000 {
                    if let id = ms(e["_track_id"]), aheadIDs.insert(id).inserted { future += 1 }
                }
            }
            // A login during a visit: the install's page-enter under its anonymous id, then its `track_signup`
            // (`original_id` the anonymous id), then the leave of that page under the login id.
            var logins = 0
            var opened: [String: String] = [:]  // anonymous id -> page entered anonymously
            var signedUp: Set<String> = []
            let all = uploads(records).flatMap(\.events).sorted { (ms($0["time"]) ?? 0) < (ms($1["time"]) ?? 0) }
            for e in all {
                guard let anon = e["anonymous_id"] as? String, let did = e["distinct_id"] as? String else { continue }
                let props = e["properties"] as? [String: Any] ?? [:]
                let page = (props["$screen_name"] as? String) ?? (props["current_url"] as? String)
                switch e["event"] as? String {
                case "$AppViewScreen", "enter_view":
                    if did == anon, let page { opened[anon] = page } else { opened[anon] = nil }
                case "$SignUp":
                    if e["original_id"] as? String == anon, opened[anon] != nil { signedUp.insert(anon) }
                case "$AppPageLeave", "leave_view":
                    if signedUp.contains(anon), did != anon, page == opened[anon] { logins += 1 }
                    signedUp.remove(anon)
                    opened[anon] = nil
                default:
                    break
                }
            }
            return (offline, tooLate, future, logins, g.stats)
        }
        let plain = look(TrafficConfig(users: 60, minutes: 60, seed: 5))
        XCTAssertEqual(plain.offline + plain.tooLate + plain.future, 0, "no condition without its option")
        XCTAssertEqual([plain.stats.offlineRecords, plain.stats.tooLateRecords, plain.stats.futureClockEvents, plain.stats.logins], [0, 0, 0, 0])

        // Each condition alone on clean traffic, found in the records: all but those of devices whose clock is also
        // hours off (6%: their `_flush_time` is off too, so the look cannot tell) or too little ahead to tell.
        var late = TrafficConfig(users: 60, minutes: 60, seed: 5, faultScale: 0)
        late.offlineShare = 0.2
        late.tooLateShare = 0.05
        let l = look(late)
        var ahead = TrafficConfig(users: 60, minutes: 60, seed: 5, faultScale: 0)
        ahead.futureClockShare = 0.1
        let a = look(ahead)
        for (found, counted, what) in [(l.offline, l.stats.offlineRecords, "cached uploads sent minutes to hours after their events"),
                                       (l.tooLate, l.stats.tooLateRecords, "uploads more than a day late"),
                                       (a.future, a.stats.futureClockEvents, "events more than a day ahead without _flush_time")] {
            XCTAssertGreaterThan(found, 0, what)
            XCTAssertLessThanOrEqual(found, counted, what)
            XCTAssertGreaterThanOrEqual(Double(found), 0.8 * Double(counted), what)
        }
        var config = TrafficConfig(users: 60, minutes: 60, seed: 5)
        config.offlineShare = 0.2
        config.tooLateShare = 0.05
        config.futureClockShare = 0.1
        config.loginShare = 0.3
        let got = look(config)
        XCTAssertGreaterThan(got.stats.logins, 0)
        XCTAssertGreaterThan(got.logins, 0, "logins between a page-enter and its leave")
        XCTAssertLessThanOrEqual(got.logins, got.stats.logins)
        // Options and seed still decide every byte.
        let again = look(config)
        XCTAssertEqual(again.stats, got.stats)
    }

    func testFaultScaleZeroIsClean() {
        let records = generate(TrafficConfig(users: 30, minutes: 30, seed: 3, faultScale: 0))
        let c = Classified(records)
        XCTAssertEqual(c.reasons, [:])
        XCTAssertEqual(c.fixes, [])
        XCTAssertGreaterThan(c.events.count, 100)
    }
}
