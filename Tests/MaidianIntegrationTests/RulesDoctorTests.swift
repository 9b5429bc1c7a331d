import Foundation
import MaidianRecording
import XCTest

/// `maidian rules doctor` on a recording made here: release 4.0 of the app moved the Buy button into a stack
/// view, so the rule drawn on 3.9 matches nothing on 4.0 although 4.0 users click on the product page as much.
final class RulesDoctorTests: XCTestCase {
    let rules = """
    version: 1
    pages:
      - {id: product, screen: ProductViewController}
    elements:
      - {id: buy, screen: ProductViewController, path: "UIWindow-UIView-UIButton", type: UIButton, index: 0}
      - {id: share, screen: ProductViewController, path: "UIWindow-UIView-UINavigationBar-UIButton", type: UIButton, index: 1}
    """

    /// 40 users per version; each views the product page and clicks Buy twice and Share once.
    func writeRecording(_ path: String) throws {
        let writer = try RecordingWriter(path: path)
        var track = 0
        let start: Int64 = 1_763_700_000_000
        for (v, version) in ["3.9", "4.0"].enumerated() {
            for u in 0..<40 {
                let time = start + Int64(v * 100_000 + u * 1000)
                func event(_ name: String, _ props: String) -> String {
                    track += 1
                    return #"{"type":"track","event":"\#(name)","time":\#(time),"distinct_id":"u\#(v)-\#(u)","_track_id":\#(track),"lib":{"$lib":"iOS","$app_version":"\#(version)"},"properties":{"$screen_name":"ProductViewController","$app_version":"\#(version)"\#(props)}}"#
                }
                let buyPath = version == "3.9" ? "UIWindow-UIView-UIButton" : "UIWindow-UIView-UIStackView-UIButton"
                let buy = #","$element_path":"\#(buyPath)","$element_type":"UIButton","$element_index":0"#
                let share = #","$element_path":"UIWindow-UIView-UINavigationBar-UIButton","$element_type":"UIButton","$element_index":1"#
                let events = [event("$AppViewScreen", ""), event("$AppClick", buy), event("$AppClick", buy), event("$AppClick", share)]
                try writer.append(RecordingRecord(
                    key: "u\(v)-\(u)", headers: [("ip", "1.0.1.3"), ("received_at", "\(time + 500)"), ("project", "shop")], timestamp: time + 500,
                    value: Array(("[" + events.joined(separator: ",") + "]").utf8)))
            }
        }
        try writer.close()
    }

    func testDoctorNamesTheRuleAndVersionAndProposesTheNewPath() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-doctor-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let recording = dir.appendingPathComponent("release.ndjson").path
        let rulesPath = dir.appendingPathComponent("rules.yaml").path
        try writeRecording(recording)
        try rules.write(toFile: rulesPath, atomically: true, encoding: .utf8)
        let geo = Integration.shared.appendingPathComponent("geo/test-city.mmdb").path
        let child = try Integration.Child(Integration.binary, ["rules", "doctor", rulesPath, "--recording", recording, "--min-events", "50", "--json"],
                                          environment: ["MAIDIAN_GEO_DB": geo], name: "rules-doctor")
        XCTAssertEqual(child.wait(timeout: 120), 0, child.stderr)
        let json = try JSONSerialization.jsonObject(with: Data(child.stdout.utf8)) as! [String: Any]
        let alerts = try XCTUnwrap(json["alerts"] as? [[String: Any]])
        XCTAssertEqual(alerts.count, 1, "share and the page rule still match: \(alerts)")
        XCTAssertEqual(alerts.first?["rule"] as? String, "buy")
        XCTAssertEqual(alerts.first?["app_version"] as? String, "4.0")
        XCTAssertEqual(alerts.first?["events"] as? Int, 120)
        XCTAssertEqual(alerts.first?["matched"] as? Int, 0)
        XCTAssertEqual(alerts.first?["previous_matched"] as? Int, 80)
        let proposal = try XCTUnwrap((json["proposals"] as? [[String: Any]])?.first)
        XCTAssertEqual(proposal["new_path"] as? String, "UIWindow-UIView-UIStackView-UIButton")
        XCTAssertEqual(proposal["repaired"] as? Int, 80, "both Buy clicks of every 4.0 user; Share has another path and index")

        // The fragment, pasted in place of the rule, repairs it: no alert on the same recording any more.
        let fragment = try XCTUnwrap(proposal["fragment"] as? String)
        let repaired = rules.replacingOccurrences(
            of: #"  - {id: buy, screen: ProductViewController, path: "UIWindow-UIView-UIButton", type: UIButton, index: 0}"# + "\n", with: "")
            .replacingOccurrences(of: "elements:\n", with: fragment)
        try repaired.write(toFile: rulesPath, atomically: true, encoding: .utf8)
        let again = try Integration.Child(Integration.binary, ["rules", "doctor", rulesPath, "--recording", recording, "--min-events", "50", "--json"],
                                          environment: ["MAIDIAN_GEO_DB": geo], name: "rules-doctor-2")
        XCTAssertEqual(again.wait(timeout: 120), 0, again.stderr + "\n" + repaired)
        let after = try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as! [String: Any]
        XCTAssertEqual((after["alerts"] as? [Any])?.count, 0, repaired)
    }
}
