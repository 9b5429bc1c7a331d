import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import XCTest
@testable import MaidianStages

final class LocationStageTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let database = root.appendingPathComponent("testdata/geo/test-city.mmdb").path

    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.fileExists(atPath: Self.database), "needs testdata/geo/test-city.mmdb")
    }

    /// validate → calibrate_time → dedup → record_presets → location, then the outputs.
    func harness(database: String = LocationStageTests.database, locale: String = "zh-CN", reloadCheck: ConfigDuration = .seconds(5), cacheSize: Int = 65536) throws -> (StageHarness, LocationStage) {
        let ctx = StageHarness.context()
        let location = try LocationStage(config: .init(database: database, locale: locale, reloadCheck: reloadCheck, cacheSize: cacheSize), context: ctx)
        let h = try StageHarness(stages: [
            ValidateStage(config: .init(), context: ctx),
            CalibrateTimeStage(config: .init(), context: ctx),
            DedupStage(config: .init(), context: ctx),
            RecordPresetsStage(config: .init(), context: ctx),
            location,
        ])
        return (h, location)
    }

    func props(_ r: StageHarness.Result, _ i: Int) -> [String: Any] {
        r.enriched[i].value["properties"] as? [String: Any] ?? [:]
    }

    func location(_ p: [String: Any]) -> [String?] {
        [p["$country"] as? String, p["$province"] as? String, p["$city"] as? String]
    }

    func events(_ n: Int, from first: Int64 = 1, properties: String = "{\"$screen_name\":\"Home\"}") -> String {
        "[" + (0..<n).map { trackEvent(trackID: first + Int64($0), properties: properties) }.joined(separator: ",") + "]"
    }

    func testEveryEventOfARecordGetsItsLocation() throws {
        let (h, stage) = try harness()
        let r = try h.run([
            TestRecord(json: events(3), ip: "125.70.56.154"),
            TestRecord(json: events(2, from: 10), ip: "8.8.8.215"),
        ])
        XCTAssertEqual(r.enriched.count, 5)
        for i in 0..<3 { XCTAssertEqual(location(props(r, i)), ["中国", "四川", "成都"]) }
        for i in 3..<5 { XCTAssertEqual(location(props(r, i)), ["美国", "加利福尼亚州", "山景城"]) }
        XCTAssertTrue(r.enriched[0].raw.hasSuffix("\"$ip\":\"125.70.56.154\",\"$receive_time\":1763700000000,\"$project\":\"default\",\"$country\":\"中国\",\"$province\":\"四川\",\"$city\":\"成都\"}}"), r.enriched[0].raw)
        XCTAssertEqual(stage.located.value, 5)
        XCTAssertEqual(stage.lookups.value, 2, "one database lookup per distinct IP")
        // The next batch is served from the cache.
        _ = try h.run([TestRecord(json: events(2, from: 20), ip: "125.70.56.154")])
        XCTAssertEqual(stage.lookups.value, 2)
        XCTAssertEqual(stage.located.value, 7)
    }

    func testIPv6CountryOnlyPrivateAndMissing() throws {
        let (h, _) = try harness()
        let r = try h.run([
            TestRecord(json: events(1, from: 1), ip: "2001:da8::150:185"),
            TestRecord(json: events(1, from: 2), ip: "1.0.1.3"),
            TestRecord(json: events(1, from: 3), ip: "10.1.79.65"),
            TestRecord(json: events(1, from: 4), ip: "192.168.0.7"),
            TestRecord(json: events(1, from: 5), ip: "fd00::1"),
            TestRecord(json: events(1, from: 6), ip: nil),
            TestRecord(json: events(1, from: 7), ip: "not an ip"),
            TestRecord(json: events(1, from: 8), ip: "9.9.9.9"),
        ])
        XCTAssertEqual(r.enriched.count, 8)
        XCTAssertEqual(location(props(r, 0)), ["中国", "北京", "北京"])
        XCTAssertEqual(location(props(r, 1)), ["中国", nil, nil], "country-only entry")
        for i in 2..<8 {
            XCTAssertEqual(location(props(r, i)), [nil, nil, nil], "record \(i)")
            XCTAssertFalse(r.enriched[i].raw.contains("$country"))
        }
    }

    func testLocaleFallsBackToEnglish() throws {
        let (h, _) = try harness(locale: "fr")
        let r = try h.run([TestRecord(json: events(1), ip: "125.70.56.154")])
        XCTAssertEqual(location(props(r, 0)), ["China", "Sichuan", "Chengdu"])
        let (en, _) = try harness(locale: "en")
        XCTAssertEqual(location(props(try en.run([TestRecord(json: events(1), ip: "8.8.8.215")]), 0)), ["United States", "California", "Mountain View"])
    }

    func testClientIPIsUsedWhenSent() throws {
        let (h, _) = try harness()
        let r = try h.run([TestRecord(json: "[" + [
            trackEvent(trackID: 1, properties: "{\"$ip\":\"8.8.8.215\"}"),
            trackEvent(trackID: 2),
            trackEvent(trackID: 3, properties: "{\"$ip\":\"10.0.0.1\"}"),
            trackEvent(trackID: 4),
        ].joined(separator: ",") + "]", ip: "125.70.56.154")])
        XCTAssertEqual(location(props(r, 0)), ["美国", "加利福尼亚州", "山景城"])
        XCTAssertEqual(props(r, 0)["$ip"] as? String, "8.8.8.215")
        XCTAssertEqual(location(props(r, 1)), ["中国", "四川", "成都"])
        XCTAssertEqual(location(props(r, 2)), [nil, nil, nil], "the client's private $ip")
        XCTAssertEqual(location(props(r, 3)), ["中国", "四川", "成都"])
    }

    func testNeverOverwritesClientLocation() throws {
        let (h, _) = try harness()
        let r = try h.run([TestRecord(json: "[" + [
            trackEvent(trackID: 1, properties: "{\"$country\":\"Atlantis\"}"),
            trackEvent(trackID: 2, properties: "{\"$city\":\"Springfield\"}"),
            trackEvent(trackID: 3),
        ].joined(separator: ",") + "]", ip: "125.70.56.154")])
        XCTAssertEqual(location(props(r, 0)), ["Atlantis", nil, nil])
        XCTAssertEqual(r.enriched[0].raw.components(separatedBy: "$country").count, 2, "one $country only")
        XCTAssertEqual(location(props(r, 1)), [nil, nil, "Springfield"], "a client location is kept whole, not mixed")
        XCTAssertEqual(location(props(r, 2)), ["中国", "四川", "成都"])
    }

    func testDroppedClientLocationIsReplaced() throws {
        // A null $country is dropped by validate: the client did not really send one.
        let (h, _) = try harness()
        let r = try h.run([TestRecord(json: events(1, properties: "{\"$country\":null}"), ip: "125.70.56.154")])
        XCTAssertEqual(location(props(r, 0)), ["中国", "四川", "成都"])
        XCTAssertEqual(props(r, 0)["$dropped_properties"] as? [String], ["$country"])
    }

    func testSmallCacheStaysCorrect() throws {
        let (h, stage) = try harness(cacheSize: 2)
        let ips = ["125.70.56.154", "8.8.8.215", "1.0.1.3", "2001:da8::150:185", "10.0.0.1"]
        let want: [[String?]] = [["中国", "四川", "成都"], ["美国", "加利福尼亚州", "山景城"], ["中国", nil, nil], ["中国", "北京", "北京"], [nil, nil, nil]]
        for round in 0..<3 {
            var records: [TestRecord] = []
            for k in 0..<10 { records.append(TestRecord(json: events(2, from: Int64(round * 100 + k * 2 + 1)), ip: ips[k % ips.count])) }
            let r = try h.run(records)
            XCTAssertEqual(r.enriched.count, 20)
            for i in 0..<20 { XCTAssertEqual(location(props(r, i)), want[(i / 2) % ips.count], "round \(round) event \(i)") }
        }
        XCTAssertLessThanOrEqual(stage.entries.count, 2)
    }

    func testProfileEventsUntouched() throws {
        let (h, _) = try harness()
        let profile = "{\"type\":\"profile_set\",\"time\":1700000000000,\"distinct_id\":\"u\",\"properties\":{\"a\":1}}"
        let r = try h.run([TestRecord(json: "[\(profile)]", ip: "125.70.56.154")])
        XCTAssertEqual(r.enriched[0].raw, profile)
    }

    // MARK: - reloading

    func tempDatabase() throws -> (dir: URL, path: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-location-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("city.mmdb").path
        try FileManager.default.copyItem(atPath: Self.database, toPath: path)
        return (dir, path)
    }

    /// The test database with `中国` renamed `中华` (same UTF-8 length): tells which database enriched an event.
    static func variantBytes() throws -> Data {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: database)))
        let from = Array("中国".utf8), to = Array("中华".utf8)
        let at = (0...(bytes.count - from.count)).first { bytes[$0..<($0 + from.count)].elementsEqual(from) }!
        bytes.replaceSubrange(at..<(at + from.count), with: to)
        return Data(bytes)
    }

    /// Replaces `path` atomically: write a new file next to it, rename it over.
    static func replaceAtomically(_ path: String, with data: Data) throws {
        let tmp = path + ".tmp-\(UUID().uuidString.prefix(6))"
        try data.write(to: URL(fileURLWithPath: tmp))
        guard rename(tmp, path) == 0 else { throw CocoaError(.fileWriteUnknown) }
    }

    /// Batches of records from Chinese IPs; returns each batch's set of `$country` values, checking that every
    /// event is there and has a location.
    func runBatch(_ h: StageHarness, _ n: Int, first: Int64) throws -> Set<String> {
        let ips = ["125.70.56.154", "2001:da8::150:185", "1.0.1.3", "58.246.243.7"]
        var records: [TestRecord] = []
        for k in 0..<n { records.append(TestRecord(json: events(3, from: first + Int64(k * 3)), ip: ips[k % ips.count])) }
        let r = try h.run(records)
        XCTAssertEqual(r.enriched.count, n * 3, "no event lost")
        var countries = Set<String>()
        for i in 0..<r.enriched.count {
            let c = props(r, i)["$country"] as? String
            XCTAssertNotNil(c, "event \(i) without location")
            if let c { countries.insert(c) }
        }
        return countries
    }

    func testDatabaseReplacedBetweenBatches() throws {
        let (dir, path) = try tempDatabase()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (h, stage) = try harness(database: path, reloadCheck: .zero)
        XCTAssertEqual(try runBatch(h, 8, first: 1), ["中国"])

        try Self.replaceAtomically(path, with: try Self.variantBytes())
        XCTAssertEqual(try runBatch(h, 8, first: 1000), ["中华"], "the next batch uses the new database entirely")
        XCTAssertEqual(stage.reloads.value, 1)

        // A broken replacement keeps the loaded database; so does a deleted file.
        try Self.replaceAtomically(path, with: Data("<html>not found</html>".utf8))
        XCTAssertEqual(try runBatch(h, 8, first: 2000), ["中华"])
        XCTAssertEqual(try runBatch(h, 8, first: 3000), ["中华"])
        XCTAssertEqual(stage.reloads.value, 1)
        try FileManager.default.removeItem(atPath: path)
        XCTAssertEqual(try runBatch(h, 8, first: 4000), ["中华"])

        // A non-atomic rewrite in place is picked up too, and never affects the loaded copy.
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: nil))
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
        try handle.write(contentsOf: Data(contentsOf: URL(fileURLWithPath: Self.database)).prefix(1000))
        XCTAssertEqual(try runBatch(h, 8, first: 5000), ["中华"], "half-written file: old database kept")
        try handle.write(contentsOf: Data(contentsOf: URL(fileURLWithPath: Self.database)).dropFirst(1000))
        try handle.close()
        XCTAssertEqual(try runBatch(h, 8, first: 6000), ["中国"])
        XCTAssertEqual(stage.reloads.value, 2)

        // Same content under a new inode: reloaded, nothing changes for events.
        try Self.replaceAtomically(path, with: try Data(contentsOf: URL(fileURLWithPath: Self.database)))
        XCTAssertEqual(try runBatch(h, 8, first: 7000), ["中国"])
        XCTAssertEqual(stage.reloads.value, 3)
    }

    func testDatabaseSwappedWhileEventsFlow() throws {
        let (dir, path) = try tempDatabase()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (h, stage) = try harness(database: path, reloadCheck: .zero)
        let original = try Data(contentsOf: URL(fileURLWithPath: Self.database))
        let variant = try Self.variantBytes()
        let swaps = 40
        // Another thread replaces the file (alternating versions, sometimes a broken file) while batches run.
        let writer = DispatchGroup()
        DispatchQueue.global().async(group: writer) {
            for k in 0..<swaps {
                usleep(3_000)
                let data = k % 7 == 6 ? Data("broken".utf8) : (k % 2 == 0 ? variant : original)
                try? Self.replaceAtomically(path, with: data)
            }
            try? Self.replaceAtomically(path, with: variant)
        }
        var batches = 0
        var seen = Set<String>()
        var first: Int64 = 1
        while writer.wait(timeout: .now()) == .timedOut || batches < 5 {
            let countries = try runBatch(h, 6, first: first)
            first += 18
            XCTAssertEqual(countries.count, 1, "batch \(batches) enriched by one database: \(countries)")
            seen.formUnion(countries)
            batches += 1
            if batches > 100_000 { break }
        }
        // After the last swap the variant is in use.
        XCTAssertEqual(try runBatch(h, 6, first: first), ["中华"])
        XCTAssertEqual(seen, ["中国", "中华"])
        XCTAssertGreaterThanOrEqual(stage.reloads.value, 2)
    }

    func testReloadCheckInterval() throws {
        let (dir, path) = try tempDatabase()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (h, stage) = try harness(database: path, reloadCheck: .minutes(10))
        try Self.replaceAtomically(path, with: try Self.variantBytes())
        XCTAssertEqual(try runBatch(h, 4, first: 1), ["中国"], "not checked before reload_check passed")
        XCTAssertEqual(stage.reloads.value, 0)
        stage.checkForNewDatabase()
        XCTAssertEqual(try runBatch(h, 4, first: 100), ["中华"])
    }

    // MARK: - configuration

    func engine(_ stageYAML: String) throws -> PipelineEngine {
        let yaml = """
        name: t
        stages:
          - kind: record_presets
          - kind: location
        \(stageYAML)
        outputs:
          - kind: enriched
        """
        let spec = try PipelineSpec.parse(yaml: yaml, file: "t.yaml")
        return try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Logger(label: "test"))
    }

    func testConfigFromYAML() throws {
        XCTAssertNoThrow(try engine("    database: \(Self.database)\n    locale: en\n    reload_check: 1m\n    cache_size: 100"))
    }

    func testMissingDatabaseIsAClearErrorAtStart() throws {
        XCTAssertThrowsError(try engine("    database: /nowhere/GeoLite2-City.mmdb")) { error in
            let e = error as! PipelineError
            XCTAssertEqual(e.code, .io)
            XCTAssertEqual(e.location?.line, 5)
            XCTAssertTrue(e.description.hasPrefix("t.yaml:5:15: location: geo database '/nowhere/GeoLite2-City.mmdb' does not exist"), e.description)
        }
    }

    func testNotADatabaseIsAClearErrorAtStart() throws {
        let notes = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-notes-\(getpid()).txt")
        try "hello\n".write(to: notes, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: notes) }
        XCTAssertThrowsError(try engine("    database: \(notes.path)")) { error in
            let e = error as! PipelineError
            XCTAssertEqual(e.code, .badValue)
            XCTAssertTrue(e.description.contains("is not a valid MaxMind DB (.mmdb) file"), e.description)
        }
    }

    func testBadKeys() throws {
        XCTAssertThrowsError(try engine("    locale: en")) { error in
            XCTAssertEqual((error as? PipelineError)?.code, .missingKey, "\(error)")
        }
        XCTAssertThrowsError(try engine("    database: \(Self.database)\n    cache_size: 0")) { error in
            XCTAssertEqual((error as? PipelineError)?.code, .badValue, "\(error)")
        }
        XCTAssertThrowsError(try engine("    database: \(Self.database)\n    locale: \"zh CN\"")) { error in
            XCTAssertEqual((error as? PipelineError)?.code, .badValue, "\(error)")
        }
    }
}
