import Foundation
import Logging
import MaidianPipeline
import MaidianRecording
import MaidianRuntime
import MaidianStages
import MaidianTools
import XCTest

/// `any_of` through the whole job (windows included) on the sample traffic: an event matching two drawings of
/// a rule counts once, and the rule's users are the distinct users of all its drawings.
final class AnyOfCountsTests: XCTestCase {
    static let table = "UIWindow-UITransitionView-UIDropShadowView-UILayoutContainerView-UITransitionView-UIViewControllerWrapperView-UILayoutContainerView-UINavigationTransitionView-UIViewControllerWrapperView-UIView-UITableView"

    func testDrawingsCountOnceAndUsersAreDistinctAcrossThem() throws {
        let sample = try Integration.sharedFile("traffic/sample.ndjson")
        let rules = """
        version: 1
        elements:
          # Every cell of row 1 of section 1 is also a cell of section 1: both drawings match it.
          - {id: overlapping, path: "\(Self.table)", type: UITableViewCell, any_of: [{section: 1}, {section: 1, row: 1}]}
          - {id: section1, path: "\(Self.table)", type: UITableViewCell, section: 1}
          # Disjoint drawings: the counts add up, the users are those of either.
          - {id: either, path: "\(Self.table)", type: UITableViewCell, any_of: [{section: 1, row: 1}, {section: 2}]}
          - {id: row11, path: "\(Self.table)", type: UITableViewCell, section: 1, row: 1}
          - {id: section2, path: "\(Self.table)", type: UITableViewCell, section: 2}
        """
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-anyof-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("rules.yaml").path
        try rules.write(toFile: path, atomically: true, encoding: .utf8)
        let spec = try PipelineSpec.load(path: Integration.root.appendingPathComponent("pipelines/app-analytics.yaml").path, environment: [
            "MAIDIAN_GEO_DB": Integration.shared.appendingPathComponent("geo/test-city.mmdb").path, "MAIDIAN_RULES": path,
        ])
        let engine = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Logger(label: "any-of"))
        var counts: [String: [String: Any]] = [:]
        _ = try Bench.run(engine: engine, records: Bench.prepare(try Recording.read(path: sample.path), partitions: 8), topic: spec.source.topic,
                          batchSize: 1000, merge: true) { _, o in
            for (i, m) in o.messages.enumerated() where o.topics[Int(m.topic)] == "metrics.counts" {
                counts[o.keyString(i) ?? ""] = try? JSONSerialization.jsonObject(with: Data(o.valueString(i).utf8)) as? [String: Any]
            }
        }
        /// (count, users) per `{window}|{dims}` of a rule's click keys.
        func of(_ rule: String) -> [String: (Int, Int)] {
            var out: [String: (Int, Int)] = [:]
            for (k, v) in counts where k.hasPrefix("click|\(rule)|") {
                out[String(k.dropFirst("click|\(rule)|".count))] = (v["count"] as? Int ?? -1, v["users"] as? Int ?? -1)
            }
            return out
        }
        let overlapping = of("overlapping"), section1 = of("section1")
        XCTAssertFalse(section1.isEmpty)
        XCTAssertFalse(of("row11").isEmpty, "some events match both drawings")
        XCTAssertEqual(overlapping.mapValues { "\($0.0)/\($0.1)" }, section1.mapValues { "\($0.0)/\($0.1)" },
                       "counted once per event, users as the one drawing's that covers both")
        let either = of("either"), row11 = of("row11"), section2 = of("section2")
        XCTAssertEqual(Set(either.keys), Set(row11.keys).union(section2.keys))
        for (k, (count, users)) in either {
            let a = row11[k] ?? (0, 0), b = section2[k] ?? (0, 0)
            XCTAssertEqual(count, a.0 + b.0, k)
            XCTAssertGreaterThanOrEqual(users, max(a.1, b.1), k)
            XCTAssertLessThanOrEqual(users, a.1 + b.1, k)
        }
    }
}
