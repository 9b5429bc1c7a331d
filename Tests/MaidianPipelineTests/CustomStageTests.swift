import Logging
import MaidianEvents
import MaidianPipeline
import MaidianStages
import XCTest

/// A stage a team might write in its own build: drops events whose name is in `events` (noise such as
/// heartbeats) and counts them. Defined here, outside `BuiltinStages`, to prove the plugin API is enough.
private final class DropEventsStage: Stage {
    struct Config: Decodable, Sendable {
        var events: [String]
        var reason: String = "noise"
        enum CodingKeys: String, CodingKey { case events, reason }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            events = try c.decode([String].self, forKey: .events)
            reason = try c.decodeIfPresent(String.self, forKey: .reason) ?? "noise"
        }
    }

    static let kind = "drop_events"
    static let summary = "drops events by name"

    let names: TextSet
    let matched: StageCounter

    init(config: Config, context: StageContext) throws {
        names = TextSet(config.events)
        matched = context.counter("matched")
    }

    func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        for i in 0..<batch.eventCount where batch.isLiveTrack(i) {
            if batch.index(of: batch.eventName(i), in: names) != nil {
                batch.drop(i)
                matched.add()
            }
        }
    }
}

final class CustomStageTests: XCTestCase {
    /// The built-in stages plus the custom one, as a custom build's `main.swift` registers them.
    private var registry: StageRegistry {
        var r = StageRegistry(BuiltinStages.all)
        r.register(DropEventsStage.self)
        return r
    }

    private let pipeline = """
        name: custom
        source:
          topic: events.raw
        stages:
          - kind: validate
          - kind: drop_events
            events: [heartbeat]
        outputs:
          - kind: enriched
            topic: events.enriched
          - kind: dead_letter
            topic: events.dlq
        """

    func testRegistryListsCustomKindAfterBuiltins() {
        XCTAssertEqual(registry.order.last, "drop_events")
        XCTAssertEqual(Array(registry.order.dropLast()), BuiltinStages.all.map(\.kind))
        XCTAssertEqual(registry.factory(for: "drop_events")?.summary, "drops events by name")
    }

    func testEngineRunsCustomStageAndCountsIt() throws {
        let spec = try PipelineSpec.parse(yaml: pipeline, file: "custom.yaml")
        let engine = try PipelineEngine(spec: spec, registry: registry, logger: Logger(label: "test"))
        XCTAssertEqual(engine.stageNames, ["validate", "drop_events", "enriched", "dead_letter"])

        // One upload: two clicks, one heartbeat (dropped by the custom stage), one event without
        // distinct_id (failed by validate).
        let events = [
            event("$AppClick", trackID: 1), event("heartbeat", trackID: 2), event("$AppClick", trackID: 3),
            #"{"type":"track","event":"$AppClick","time":1763700000000,"properties":{}}"#,
        ]
        var batch = EventBatch()
        var output = OutputBuffer()
        append("[" + events.joined(separator: ",") + "]", to: &batch)
        try engine.process(&batch, output: &output)

        func counts(_ r: Int, _ e: Int, _ d: Int, _ f: Int, written: Int = 0) -> StageCounts {
            var c = StageCounts()
            c.received = r; c.emitted = e; c.dropped = d; c.failed = f; c.written = written
            return c
        }
        XCTAssertEqual(engine.counts, [
            counts(4, 3, 0, 1),  // validate
            counts(3, 2, 1, 0),  // drop_events
            counts(2, 2, 0, 0, written: 2),  // enriched
            counts(2, 2, 0, 0, written: 1),  // dead_letter: the event validate rejected
        ])
        XCTAssertEqual(engine.counters.map { "\($0.stage).\($0.counter.name)=\($0.counter.value)" }, ["drop_events.matched=1"])
        XCTAssertTrue(engine.summaryLines().contains("drop_events: received=3 emitted=2 dropped=1 failed=0"))
        XCTAssertTrue(engine.summaryLines().contains("dead_letter: written=1 (of 2 live events seen)"), "an output's line says what it wrote")

        let topics = output.messages.map { output.topics[Int($0.topic)] }
        XCTAssertEqual(topics.filter { $0 == "events.enriched" }.count, 2)
        XCTAssertEqual(topics.filter { $0 == "events.dlq" }.count, 1)
    }

    func testUnknownKeyInCustomConfigHasLocationAndHint() throws {
        let yaml = """
            stages:
              - kind: drop_events
                events: [heartbeat]
                reasn: noise
            """
        let spec = try PipelineSpec.parse(yaml: yaml, file: "pipelines/x.yaml")
        XCTAssertThrowsError(try PipelineEngine(spec: spec, registry: registry, logger: Logger(label: "test"))) { error in
            guard let e = error as? PipelineError else { return XCTFail("unexpected \(error)") }
            XCTAssertEqual(e.code, .unknownKey)
            XCTAssertEqual(e.location, SourceLocation(file: "pipelines/x.yaml", line: 4, column: 5))
            XCTAssertEqual("\(e)", "pipelines/x.yaml:4:5: unknown key 'reasn' (did you mean 'reason'?)")
        }
    }

    func testUnknownKindSuggestsCustomKind() throws {
        let spec = try PipelineSpec.parse(yaml: "stages:\n  - kind: drop_event\n    events: [x]\n", file: "p.yaml")
        XCTAssertThrowsError(try PipelineEngine(spec: spec, registry: registry, logger: Logger(label: "test"))) { error in
            XCTAssertEqual("\(error)", "p.yaml:2:11: unknown stage kind 'drop_event' (did you mean 'drop_events'?)")
        }
    }

    // MARK: - helpers

    private func event(_ name: String, trackID: Int64) -> String {
        #"{"type":"track","event":"\#(name)","time":1763700000000,"distinct_id":"u1","_track_id":\#(trackID),"properties":{"$screen_name":"HomeViewController"}}"#
    }

    private func append(_ json: String, to batch: inout EventBatch) {
        let topic = batch.topicIndex("events.raw")
        Array(json.utf8).withUnsafeBytes { value in
            Array("install-1".utf8).withUnsafeBytes { key in
                batch.appendRecord(
                    topic: topic, partition: 0, offset: 0, timestamp: 0, key: key, value: value,
                    ip: nil, receivedAt: nil, ua: nil, project: nil)
            }
        }
    }
}
