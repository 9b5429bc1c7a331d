import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
@testable import MaidianStages

/// One output of the windows stage or its merger, with the input record it is attributed to.
struct WindowsOutput: Hashable, CustomStringConvertible {
    /// Topic, key and value: what a consumer of the topic sees.
    struct Content: Hashable, CustomStringConvertible {
        var topic: String
        var key: String
        var value: [UInt8]
        var description: String {
            guard topic == "maidian.partials" else { return "\(topic) \(key) \(String(decoding: value, as: UTF8.self))" }
            switch try? InternalMessage.decode(value) {
            case .partial(let p)?:
                return "partial \(key) source \(p.sourcePartition) count \(p.count) users \(p.users.count) sum \(p.sumMs)"
            case .progress(let s, let w, let idle)?:
                return "progress source \(s) watermark \(w)\(idle ? " idle" : "")"
            case nil:
                return "malformed \(value)"
            }
        }
    }

    var content: Content
    /// The record it is attributed to (nil: none, as for `tick` and `finish`).
    var partition: Int32?
    var offset: Int64?
    var replay: Bool
    /// The explicit partition of an internal-topic message.
    var targetPartition: Int32

    var topic: String { content.topic }
    var key: String { content.key }
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(content.value))) as? [String: Any] ?? [:]
    }
    var message: InternalMessage? { try? InternalMessage.decode(content.value) }
    var description: String { "\(content) <- \(partition.map(String.init) ?? "-")@\(offset.map(String.init) ?? "-")\(replay ? " replay" : "")" }
}

/// A small windows pipeline (validate, match with a rules file in a temp directory, windows) over the stage
/// harness; partials go through the stage's merger the way a worker routes the internal topic.
final class WindowsHarness {
    /// A minute boundary.
    static let t0: Int64 = 1_763_700_000_000
    static let viewPath = "UIWindow-UIView"
    static let listPath = "UIWindow-UIView-UITableView"

    static let rules = """
    version: 1
    ignore_pages: [DebugMenuViewController]
    pages:
      - id: home
        screen: HomeViewController
      - id: product
        screen: ProductViewController
      - id: product_any
        screen: ProductViewController
    elements:
      - id: buy
        path: "\(viewPath)"
        type: UIButton
        index: 0
      - id: titles
        path: "\(listPath)"
        type: UITableViewCell
        section: 1
        group_by_content: true
    """

    let harness: StageHarness
    let stage: WindowsStage
    var merger: WindowMerger { stage.windowMerger }
    private var mergerOutput = OutputBuffer()
    private var internalOffsets: [Int32: Int64] = [:]
    private var internalIndex: Int32 = 0

    /// Every output of the stage so far, in order.
    var outputs: [WindowsOutput] = []
    /// `metrics.counts` records the merger wrote, in order.
    var countsWritten: [WindowsOutput] = []
    /// The enriched events of the last batch.
    var enriched: [[String: Any]] = []

    /// Holds the rules file; removed with the harness.
    let directory: URL

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// `enrich`: stages between `match` and `windows` (built with the harness's context), e.g. presets.
    init(config: WindowsStage.Config = .init(), rules: String = WindowsHarness.rules, sourcePartitions: Int32 = 1, partialsPartitions: Int32 = 1,
         enrich: (StageContext) throws -> [any Stage] = { _ in [] }) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-windows-\(UUID().uuidString)")
        directory = dir
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try rules.write(to: dir.appendingPathComponent("rules.yaml"), atomically: true, encoding: .utf8)
        let ctx = StageContext(logger: Logger(label: "test"), baseDirectory: dir.path, position: "0")
        stage = try WindowsStage(config: config, context: ctx)
        stage.connect(partialsTopic: "maidian.partials", partialsPartitions: partialsPartitions, sourcePartitions: sourcePartitions)
        harness = try StageHarness(stages: [
            ValidateStage(config: .init(), context: ctx),
            MatchStage(config: .init(rules: "rules.yaml"), context: ctx),
        ] + enrich(ctx) + [stage])
    }

    /// One batch of records; returns the stage's outputs (merged counts land in `countsWritten`).
    @discardableResult
    func run(_ records: [TestRecord]) throws -> [WindowsOutput] {
        try harness.feed(records)
        enriched = []
        for (i, m) in harness.output.messages.enumerated() where harness.output.topics[Int(m.topic)] == "events.enriched" {
            let obj = try JSONSerialization.jsonObject(with: Data(harness.output.valueString(i).utf8)) as? [String: Any]
            enriched.append(obj ?? [:])
        }
        return try collect()
    }

    /// Records of one event list each (one upload per record), received when their newest event happened (an
    /// online phone) unless `receivedAt` says otherwise.
    @discardableResult
    func run(_ uploads: [[String]], partition: Int32 = 0, receivedAt: Int64? = nil) throws -> [WindowsOutput] {
        try run(uploads.map { TestRecord(json: "[" + $0.joined(separator: ",") + "]", receivedAt: receivedAt ?? Self.newestTime($0), partition: partition) })
    }

    /// The newest `"time"` of the events (t0 when none).
    static func newestTime(_ events: [String]) -> Int64 {
        var newest = t0
        for e in events {
            guard let r = e.range(of: "\"time\":") else { continue }
            let digits = e[r.upperBound...].prefix { $0.isNumber }
            if let t = Int64(digits), t > newest { newest = t }
        }
        return newest
    }

    /// The worker's call between batches.
    @discardableResult
    func tick(held: [Int32]) throws -> [WindowsOutput] {
        harness.batch.reset()
        harness.output.reset()
        stage.tick(held: held, output: &harness.output)
        return try collect()
    }

    /// The end of a bounded run.
    @discardableResult
    func finish() throws -> [WindowsOutput] {
        harness.batch.reset()
        harness.output.reset()
        try stage.finish(output: &harness.output)
        return try collect()
    }

    /// The stage's outputs in `harness.output`; what a worker would produce to the internal topic goes
    /// through the merger (outputs of replayed records are not produced).
    private func collect() throws -> [WindowsOutput] {
        let out = harness.output
        var batchOutputs: [WindowsOutput] = []
        var internalRecords: [InternalRecord] = []
        for (i, m) in out.messages.enumerated() {
            let topic = out.topics[Int(m.topic)]
            if topic == "events.enriched" || topic == "events.dlq" { continue }
            let record = m.record >= 0 ? harness.batch.records[Int(m.record)] : nil
            let o = WindowsOutput(
                content: .init(topic: topic, key: out.keyString(i) ?? "", value: Array(out.bytes[Int(m.value.start)..<Int(m.value.end)])),
                partition: record?.partition, offset: record?.offset, replay: record?.replay ?? false, targetPartition: m.partition)
            // A bundle counts as the messages it holds: which messages share a record depends on where
            // batches end, what they say does not.
            if topic == "maidian.partials" && InternalMessage.isBundle(o.content.value) {
                for item in try InternalMessage.bundleItems(o.content.value) {
                    var one = o
                    one.content.key = item.key.map { String(decoding: o.content.value[$0], as: UTF8.self) } ?? ""
                    one.content.value = Array(o.content.value[item.value])
                    batchOutputs.append(one)
                }
            } else {
                batchOutputs.append(o)
            }
            if topic == "maidian.partials" && !o.replay {
                let q = m.partition
                let offset = internalOffsets[q, default: 0]
                internalOffsets[q] = offset + 1
                internalRecords.append(InternalRecord(partition: q, offset: offset, key: Array(o.key.utf8), value: o.content.value, index: internalIndex))
                internalIndex += 1
            }
        }
        outputs += batchOutputs
        if !internalRecords.isEmpty {
            mergerOutput.reset()
            try merger.process(internalRecords, output: &mergerOutput)
            for (i, m) in mergerOutput.messages.enumerated() {
                countsWritten.append(WindowsOutput(
                    content: .init(topic: mergerOutput.topics[Int(m.topic)], key: mergerOutput.keyString(i) ?? "",
                                   value: Array(mergerOutput.bytes[Int(m.value.start)..<Int(m.value.end)])),
                    partition: nil, offset: nil, replay: false, targetPartition: -1))
            }
        }
        return batchOutputs
    }

    // What came out so far, decoded.

    var dwell: [[String: Any]] { outputs.filter { $0.topic == "metrics.dwell" }.map(\.json) }
    var trails: [[String: Any]] { outputs.filter { $0.topic == "crash.trails" }.map(\.json) }
    var partials: [PartialAggregate] {
        outputs.compactMap { if case .partial(let p)? = $0.message, $0.topic == "maidian.partials" { return p } else { return nil } }
    }
    var progress: [(source: Int32, watermark: Int64, idle: Bool)] {
        outputs.compactMap {
            if case .progress(let s, let w, let idle)? = $0.message, $0.topic == "maidian.partials" { return (s, w, idle) } else { return nil }
        }
    }
    /// The last `metrics.counts` value per key.
    var counts: [String: [String: Any]] {
        var m: [String: [String: Any]] = [:]
        for o in countsWritten { m[o.key] = o.json }
        return m
    }

    /// The dwell records of one `closed_by`.
    func dwell(closedBy: String) -> [[String: Any]] { dwell.filter { $0["closed_by"] as? String == closedBy } }
}

/// Track events for windows tests (times are offsets from `WindowsHarness.t0` in ms).
enum Ev {
    static func props(_ pairs: [(String, String)]) -> String {
        "{" + pairs.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    static func q(_ s: String) -> String { "\"\(s)\"" }

    /// The event with a top-level `anonymous_id` (the install), as SDKs send it beside `distinct_id`.
    static func install(_ anonymousID: String, _ event: String) -> String {
        "{\"anonymous_id\":\"\(anonymousID)\"," + event.dropFirst()
    }

    static func enter(_ user: String, _ page: String, _ t: Int64, version: String? = "3.2.1", extra: [(String, String)] = []) -> String {
        var p = [("$screen_name", q(page))] + extra
        if let version { p.append(("$app_version", q(version))) }
        return trackEvent(event: "$AppViewScreen", time: WindowsHarness.t0 + t, distinctID: user, trackID: nil, properties: props(p))
    }

    static func leave(_ user: String, _ page: String, _ t: Int64, version: String? = "9.9.9") -> String {
        var p = [("$screen_name", q(page))]
        if let version { p.append(("$app_version", q(version))) }
        return trackEvent(event: "$AppPageLeave", time: WindowsHarness.t0 + t, distinctID: user, trackID: nil, properties: props(p))
    }

    /// A button click on `page` (independent element at `index`).
    static func click(_ user: String, _ page: String, _ t: Int64, index: Int = 0, content: String? = "Buy", version: String? = "3.2.1") -> String {
        var p = [("$screen_name", q(page)), ("$element_path", q(WindowsHarness.viewPath)), ("$element_type", q("UIButton")),
                 ("$element_index", "\(index)")]
        if let content { p.append(("$element_content", q(content))) }
        if let version { p.append(("$app_version", q(version))) }
        return trackEvent(event: "$AppClick", time: WindowsHarness.t0 + t, distinctID: user, trackID: nil, properties: props(p))
    }

    /// A list-cell click at `section-row` with a string content.
    static func cell(_ user: String, _ page: String, _ t: Int64, position: String, content: String, extra: [(String, String)] = []) -> String {
        let p = [("$screen_name", q(page)), ("$element_path", q(WindowsHarness.listPath)), ("$element_type", q("UITableViewCell")),
                 ("$element_position", q(position)), ("$element_content", q(content)), ("$app_version", q("3.2.1"))] + extra
        return trackEvent(event: "$AppClick", time: WindowsHarness.t0 + t, distinctID: user, trackID: nil, properties: props(p))
    }

    static func app(_ event: String, _ user: String, _ t: Int64, extra: [(String, String)] = []) -> String {
        trackEvent(event: event, time: WindowsHarness.t0 + t, distinctID: user, trackID: nil, properties: props(extra))
    }

    static func start(_ user: String, _ t: Int64) -> String { app("$AppStart", user, t) }
    static func end(_ user: String, _ t: Int64) -> String { app("$AppEnd", user, t) }
    static func crash(_ user: String, _ t: Int64, version: String? = "3.2.1") -> String {
        app("$AppCrashed", user, t, extra: version.map { [("$app_version", q($0))] } ?? [])
    }
    /// Any other track event (moves the watermark).
    static func other(_ user: String, _ t: Int64) -> String { app("heartbeat", user, t) }
}
