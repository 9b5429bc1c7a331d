import Foundation
import XCTest

/// `maidian gen` and `maidian bench` count events the same way (docs/wire-format.md, "Counting"): every
/// element of every good record's array, retried copies included.
final class GenCommandTests: XCTestCase {
    func testGenAndBenchAgreeOnEvents() throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("gen-\(UUID().uuidString).ndjson.zst")
        defer { try? FileManager.default.removeItem(at: out) }
        let gen = try Integration.run(Integration.binary.path, ["gen", "--users", "40", "--minutes", "20", "--seed", "11", "--out", out.path])
        func number(before words: String, in text: String) -> Int? {
            guard let r = text.range(of: "[0-9]+ " + words, options: .regularExpression) else { return nil }
            return Int(text[r].split(separator: " ")[0])
        }
        let genEvents = try XCTUnwrap(number(before: "events", in: gen), gen)
        let retried = try XCTUnwrap(number(before: "in retried records", in: gen), gen)
        XCTAssertGreaterThan(retried, 0, "the seed generates retried uploads, where the two counts used to differ")

        let bench = try Integration.run(
            Integration.binary.path, ["bench", "pipelines/app-analytics.yaml", "--recording", out.path, "--runs", "1", "--json"], timeout: 300)
        let result = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(bench.utf8)) as? [String: Any], bench)
        XCTAssertEqual(result["events"] as? Int, genEvents, "gen and bench count the same events")
    }

    /// The real-world conditions are options: the summary says how many of each were generated, and shares that
    /// cannot hold are refused.
    func testGenTakesTheRealWorldConditions() throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("gen-\(UUID().uuidString).ndjson")
        defer { try? FileManager.default.removeItem(at: out) }
        let gen = try Integration.run(Integration.binary.path, [
            "gen", "--users", "40", "--minutes", "40", "--seed", "3", "--out", out.path, "--offline-share", "0.2",
            "--too-late-share", "0.05", "--future-clock-share", "0.1", "--login-share", "0.3",
        ])
        let line = try XCTUnwrap(gen.split(separator: "\n").first { $0.hasPrefix("gen: conditions:") }, gen)
        let numbers = line.split(separator: " ").compactMap { Int($0) }
        XCTAssertEqual(numbers.count, 4, String(line))
        XCTAssertTrue(numbers.allSatisfy { $0 > 0 }, "every condition generated: \(line)")
        XCTAssertGreaterThan(try String(contentsOf: out, encoding: .utf8).split(separator: "\n").count, 100)

        let plain = try Integration.run(Integration.binary.path, ["gen", "--users", "5", "--minutes", "10", "--out", out.path])
        XCTAssertFalse(plain.contains("conditions"), "no conditions line without the options")

        let refused = try Integration.Child(Integration.binary, [
            "gen", "--users", "5", "--minutes", "10", "--out", out.path, "--offline-share", "0.8", "--too-late-share", "0.5",
        ], name: "gen-refused")
        XCTAssertNotEqual(refused.wait(timeout: 60), 0)
        XCTAssertTrue(refused.stderr.contains("add up to more than 1"), refused.stderr)
    }

    /// `maidian bench` refuses partition counts it cannot spread records over (`--partitions 0` crashed it)
    /// with a usage error, and takes an internal-partition count of its own.
    func testBenchRefusesPartitionCountsItCannotUse() throws {
        let sample = Integration.root.appendingPathComponent("testdata/traffic/sample.ndjson").path
        for (flag, value) in [("--partitions", "0"), ("--partitions", "-3"), ("--internal-partitions", "0"), ("--partitions", "100001")] {
            let child = try Integration.Child(Integration.binary, [
                "bench", "pipelines/app-analytics.yaml", "--recording", sample, "\(flag)=\(value)",
            ], name: "bench-refused")
            XCTAssertEqual(child.wait(timeout: 60), 64, "\(flag) \(value): \(child.stderr)")
            XCTAssertTrue(child.stderr.contains("\(flag) must be between 1 and 100000"), child.stderr)
        }
        let ok = try Integration.run(Integration.binary.path, [
            "bench", "pipelines/app-analytics.yaml", "--recording", sample, "--partitions", "4", "--internal-partitions", "2", "--json",
        ])
        let result = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(ok.utf8)) as? [String: Any], ok)
        XCTAssertGreaterThan(result["merged_messages"] as? Int ?? 0, 0, ok)
    }
}
