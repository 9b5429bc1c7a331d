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
}
