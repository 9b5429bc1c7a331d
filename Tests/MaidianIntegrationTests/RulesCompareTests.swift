import Foundation
import XCTest

/// `maidian rules compare` on the sample: a candidate that narrows one rule, drops one and adds one.
final class RulesCompareTests: XCTestCase {
    func testPerRuleComparison() throws {
        let sample = try Integration.sharedFile("traffic/sample.ndjson")
        let live = try Integration.sharedFile("traffic/rules-sample.yaml")
        let text = try String(contentsOf: live, encoding: .utf8)
        let candidateText = text
            .replacingOccurrences(of: #"app_versions: [">=3.2.0", "<4.0.0"]"#, with: #"app_versions: [">=3.2.0", "<3.2.1"]"#)
            .replacingOccurrences(of: "  - id: home_pv\n    screen: HomeViewController\n", with: "")
            .replacingOccurrences(of: "elements:\n", with: "elements:\n  - {id: product_any_button, screen: ProductViewController, identifier_regex: '-UIButton\\('}\n")
        XCTAssertNotEqual(candidateText, text)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-compare-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let candidate = dir.appendingPathComponent("candidate.yaml").path
        try candidateText.write(toFile: candidate, atomically: true, encoding: .utf8)
        let geo = Integration.shared.appendingPathComponent("geo/test-city.mmdb").path
        let child = try Integration.Child(Integration.binary, ["rules", "compare", live.path, candidate, "--recording", sample.path, "--json"],
                                          environment: ["MAIDIAN_GEO_DB": geo], name: "rules-compare")
        XCTAssertEqual(child.wait(timeout: 180), 0, child.stderr)
        let json = try JSONSerialization.jsonObject(with: Data(child.stdout.utf8)) as! [String: Any]
        let rows = try XCTUnwrap(json["rules"] as? [[String: Any]])
        func row(_ id: String) -> [String: Any]? { rows.first { $0["id"] as? String == id } }
        XCTAssertEqual(rows.count, 15)
        XCTAssertEqual(row("home_pv")?["status"] as? String, "removed")
        XCTAssertNotNil(row("home_pv")?["live"] as? Int)
        XCTAssertTrue(row("home_pv")?["candidate"] is NSNull)
        XCTAssertEqual(row("product_any_button")?["status"] as? String, "added")
        XCTAssertGreaterThan(row("product_any_button")?["candidate"] as? Int ?? 0, 0)
        let cart = try XCTUnwrap(row("cart_v32"))
        XCTAssertEqual(cart["status"] as? String, "changed")
        XCTAssertLessThan(cart["candidate"] as! Int, cart["live"] as! Int, "fewer versions, fewer matches")
        for r in rows where r["status"] as? String == "unchanged" {
            XCTAssertEqual(r["live"] as? Int, r["candidate"] as? Int, "\(r)")
        }
        XCTAssertEqual(json["differing"] as? Int, 3)
    }
}
