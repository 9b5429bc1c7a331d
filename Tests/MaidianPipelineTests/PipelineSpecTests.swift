import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import MaidianStages
import XCTest

/// The shipped pipeline file, the errors a pipeline file can have (with exact `file:line:column` text), and
/// what `PipelineEngine` counts when it runs a batch.
final class PipelineSpecTests: XCTestCase {
    /// The repository root (this file is Tests/MaidianPipelineTests/PipelineSpecTests.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let appAnalytics = root.appendingPathComponent("pipelines/app-analytics.yaml").path

    static var logger: Logger {
        var l = Logger(label: "pipeline-spec-tests")
        l.logLevel = .critical
        return l
    }

    /// Parses `yaml` as `t.yaml` and builds the engine; returns every error's text (empty when it builds).
    func errors(_ yaml: String, environment: [String: String] = [:]) -> [String] {
        do {
            let spec = try PipelineSpec.parse(yaml: yaml, file: "t.yaml", environment: environment)
            _ = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Self.logger)
            return []
        } catch {
            return PipelineErrors.flatten(error).map(\.description)
        }
    }

    // MARK: - A pipeline without outputs (issue 13, class 6)

    func testAPipelineWithoutOutputsIsRefusedWithALocation() throws {
        func refusal(_ yaml: String) -> String? {
            do {
                try PipelineSpec.parse(yaml: yaml, file: "t.yaml").requireOutputs()
                return nil
            } catch {
                return "\(error)"
            }
        }
        XCTAssertTrue(refusal("")?.hasPrefix("t.yaml:1:1: ") == true, "an empty file is refused, located")
        XCTAssertEqual(refusal("source: {topic: raw}\n"), "t.yaml:1:1: the pipeline has no outputs: it would write nothing, not even dead letters (add e.g. 'outputs: [{kind: enriched}, {kind: dead_letter}]')")
        XCTAssertTrue(refusal("stages:\n  - kind: validate\noutputs: []\n")?.hasPrefix("t.yaml:3:1: the pipeline has no outputs") == true)
        XCTAssertNil(refusal("outputs:\n  - kind: dead_letter\n"))
        XCTAssertNoThrow(try PipelineSpec.load(path: Self.appAnalytics, environment: [:]).requireOutputs())
    }

    // MARK: - The shipped pipeline

    func testAppAnalyticsLoadsWithDefaults() throws {
        let spec = try PipelineSpec.load(path: Self.appAnalytics, environment: [:])
        XCTAssertEqual(spec.name, "app-analytics")
        XCTAssertEqual(spec.file, Self.appAnalytics)
        XCTAssertEqual(spec.baseDirectory, Self.root.appendingPathComponent("pipelines").path)
        XCTAssertEqual(spec.source.brokers, "embedded")
        XCTAssertEqual(spec.source.topic, "events.raw")
        XCTAssertEqual(spec.source.group, "maidian")
        XCTAssertEqual(spec.source.partitions, 8)
        XCTAssertEqual(spec.source.sessionTimeout, .seconds(10))
        XCTAssertEqual(spec.source.maxBatch, 250)
        XCTAssertEqual(spec.source.limits, RecordLimits(maxCompressedBytes: 1 << 20, maxDecompressedBytes: 16 << 20, maxEventsPerRecord: 10_000))
        XCTAssertEqual(spec.source.kafka, [:])
        XCTAssertEqual(spec.producerKafka, [:])
        XCTAssertEqual(spec.stages.map(\.kind), ["validate", "calibrate_time", "dedup", "record_presets", "location", "device", "noise_filter", "match", "windows"])
        XCTAssertEqual(spec.outputs.map(\.kind), ["enriched", "dead_letter"])
        XCTAssertEqual(spec.outputTopics, ["events.enriched", "events.dlq"])

        // Stage configs as written (decoded with each stage's own Config).
        let validate = try spec.stages[0].node.decode(ValidateStage.Config.self, ignoringKeys: ["kind"])
        XCTAssertEqual(validate.maxStringBytes, 8191)
        XCTAssertEqual(validate.maxDistinctIDBytes, 255)
        XCTAssertTrue(validate.listDropped)
        XCTAssertEqual(try spec.stages[1].node.decode(CalibrateTimeStage.Config.self, ignoringKeys: ["kind"]).maxSkew, .seconds(60))
        XCTAssertEqual(try spec.stages[2].node.decode(DedupStage.Config.self, ignoringKeys: ["kind"]).window, .minutes(10))
        XCTAssertEqual(try spec.stages[3].node.decode(RecordPresetsStage.Config.self, ignoringKeys: ["kind"]).defaultProject, "default")
        let location = try spec.stages[4].node.decode(LocationStage.Config.self, ignoringKeys: ["kind"])
        XCTAssertEqual(location.database, "../data/test-city.mmdb")
        XCTAssertEqual(location.locale, "zh-CN")
        XCTAssertEqual(location.reloadCheck, .seconds(5))
        XCTAssertEqual(try spec.stages[6].node.decode(NoiseFilterStage.Config.self, ignoringKeys: ["kind"]).rules, [.tabBarTouches])
        let match = try spec.stages[7].node.decode(MatchStage.Config.self, ignoringKeys: ["kind"])
        XCTAssertEqual(match.rules, "../data/rules-sample.yaml")
        XCTAssertTrue(match.reload)
        XCTAssertEqual(match.reloadCheck, .seconds(1))
        XCTAssertEqual(try spec.outputs[0].node.decode(EnrichedOutput.Config.self, ignoringKeys: ["kind"]).topic, "events.enriched")
        XCTAssertEqual(try spec.outputs[1].node.decode(DeadLetterOutput.Config.self, ignoringKeys: ["kind"]).topic, "events.dlq")

        let engine = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Self.logger)
        XCTAssertEqual(engine.stageNames, ["validate", "calibrate_time", "dedup", "record_presets", "location", "device", "noise_filter", "match", "windows", "enriched", "dead_letter"])
        XCTAssertEqual(engine.counts.count, 11)
        XCTAssertEqual(engine.decoder.limits, spec.source.limits)
        XCTAssertEqual(engine.counters.map { "\($0.stage).\($0.counter.name)" }, [
            "calibrate_time.calibrated", "calibrate_time.clamped_future", "calibrate_time.calibrated_out_of_range",
            "dedup.duplicates", "location.located", "location.lookups", "location.reloads",
            "device.unknown", "device.os_from_ua", "noise_filter.noise_dropped", "noise_filter.tab_bar_touch",
            "match.matched", "match.rules_reloads", "match.rules_reload_failures", "match.rules_version",
            "windows.late", "windows.too_late", "windows.orphan_leaves", "windows.text_compactions", "windows.combo_compactions", "windows.visits_closed", "windows.trails", "windows.idle_partitions",
        ])
        // The kind locations point into the file.
        XCTAssertEqual(spec.stages[2].kindLocation.description, "\(Self.appAnalytics):28:11")
        XCTAssertEqual(spec.source.decodeThreads, 2)
    }

    func testAppAnalyticsEnvironmentOverrides() throws {
        let env = ["MAIDIAN_BROKERS": "127.0.0.1:9092,127.0.0.1:9093", "MAIDIAN_GROUP": "analytics-eu", "MAIDIAN_SESSION_TIMEOUT": "6s",
                   "MAIDIAN_RAW_TOPIC": "raw.eu"]
        let spec = try PipelineSpec.load(path: Self.appAnalytics, environment: env)
        XCTAssertEqual(spec.source.brokers, "127.0.0.1:9092,127.0.0.1:9093")
        XCTAssertEqual(spec.source.group, "analytics-eu")
        XCTAssertEqual(spec.source.topic, "raw.eu")
        XCTAssertEqual(spec.source.sessionTimeout, .seconds(6))
        // Only the named variables change anything.
        let partial = try PipelineSpec.load(path: Self.appAnalytics, environment: ["MAIDIAN_GROUP": "g2"])
        XCTAssertEqual(partial.source.brokers, "embedded")
        XCTAssertEqual(partial.source.group, "g2")
        XCTAssertEqual(partial.source.topic, "events.raw")
    }

    func testEnvironmentSubstitutionInlineYAML() throws {
        let yaml = """
            source:
              brokers: ${MAIDIAN_BROKERS:-embedded}
              partitions: ${PARTS:-3}
              limits: {max_record_bytes: "${MAX_REC:-2MiB}"}
            stages:
              - kind: dedup
                window: ${DEDUP_WINDOW:-5m}
            """
        let defaults = try PipelineSpec.parse(yaml: yaml, file: "t.yaml")
        XCTAssertEqual(defaults.source.brokers, "embedded")
        XCTAssertEqual(defaults.source.partitions, 3)
        XCTAssertEqual(defaults.source.limits.maxCompressedBytes, 2 << 20)
        XCTAssertEqual(try defaults.stages[0].node.decode(DedupStage.Config.self, ignoringKeys: ["kind"]).window, .minutes(5))

        let env = ["MAIDIAN_BROKERS": "kafka:9092", "PARTS": "12", "MAX_REC": "512KiB", "DEDUP_WINDOW": "90s"]
        let set = try PipelineSpec.parse(yaml: yaml, file: "t.yaml", environment: env)
        XCTAssertEqual(set.source.brokers, "kafka:9092")
        XCTAssertEqual(set.source.partitions, 12)
        XCTAssertEqual(set.source.limits.maxCompressedBytes, 512 << 10)
        XCTAssertEqual(try set.stages[0].node.decode(DedupStage.Config.self, ignoringKeys: ["kind"]).window, .seconds(90))

        // A value from the environment is checked like a literal one, at the scalar's location.
        XCTAssertEqual(errors(yaml, environment: ["PARTS": "eight"]), ["t.yaml:3:15: expected an integer for 'partitions', got 'eight'"])
    }

    func testMinimalPipelineUsesDefaults() throws {
        let spec = try PipelineSpec.parse(yaml: "stages:\n  - kind: validate\n", file: "dir/min.yaml")
        XCTAssertEqual(spec.name, "min")
        XCTAssertEqual(spec.baseDirectory, "dir")
        XCTAssertEqual(spec.source.topic, "events.raw")
        XCTAssertEqual(spec.source.group, "maidian")
        XCTAssertEqual(spec.source.sessionTimeout, .seconds(10))
        XCTAssertEqual(spec.source.limits, RecordLimits())
        XCTAssertEqual(spec.outputs.count, 0)
        XCTAssertEqual(errors("stages:\n  - kind: validate\n"), [])
    }

    func testMetricsSection() throws {
        XCTAssertNil(try PipelineSpec.parse(yaml: "name: t\n", file: "t.yaml").metrics, "no section, no endpoint")
        let m = try XCTUnwrap(try PipelineSpec.parse(yaml: "metrics:\n  port: ${PORT:-9464}\n", file: "t.yaml").metrics)
        XCTAssertEqual(m.port, 9464)
        XCTAssertEqual(m.host, "0.0.0.0")
        XCTAssertEqual(m.statisticsInterval, .seconds(5))
        let set = try XCTUnwrap(try PipelineSpec.parse(
            yaml: "metrics: {port: 0, host: 127.0.0.1, statistics_interval: 1s}\n", file: "t.yaml").metrics)
        XCTAssertEqual(set.port, 0)
        XCTAssertEqual(set.host, "127.0.0.1")
        XCTAssertEqual(set.statisticsInterval, .seconds(1))
        XCTAssertEqual(errors("metrics:\n  port: 9464\n  hots: x\n"), ["t.yaml:3:3: unknown key 'hots' (did you mean 'host'?)"])
        XCTAssertEqual(errors("metrics:\n  host: x\n").count, 1, "port is required")
        XCTAssertEqual(errors("metrics:\n  port: 70000\n"), ["t.yaml:2:9: metrics.port must be in 0...65535"])
    }

    // MARK: - Errors, each with its exact location

    func testUnknownTopLevelKey() {
        XCTAssertEqual(errors("name: t\nsourse:\n  topic: x\n"), ["t.yaml:2:1: unknown key 'sourse' (did you mean 'source'?)"])
        XCTAssertEqual(errors("name: t\noutput:\n  - kind: enriched\n"), ["t.yaml:2:1: unknown key 'output' (did you mean 'outputs'?)"])
    }

    func testUnknownSourceKeyWithHint() {
        let yaml = """
            source:
              topic: events.raw
              grop: g
            """
        XCTAssertEqual(errors(yaml), ["t.yaml:3:3: unknown key 'grop' (did you mean 'group'?)"])
        // Inside source.limits too.
        let limits = """
            source:
              limits:
                max_record_byte: 1MiB
            """
        XCTAssertEqual(errors(limits), ["t.yaml:3:5: unknown key 'max_record_byte' (did you mean 'max_record_bytes'?)"])
    }

    func testUnknownStageKindWithHint() {
        let yaml = """
            stages:
              - kind: validate
              - kind: dedupe
                window: 10m
            """
        XCTAssertEqual(errors(yaml), ["t.yaml:3:11: unknown stage kind 'dedupe' (did you mean 'dedup'?)"])
        // Far from every kind: the hint lists them.
        XCTAssertEqual(
            errors("outputs:\n  - kind: kafka_sink\n"),
            ["t.yaml:2:11: unknown stage kind 'kafka_sink' (expected one of: validate, calibrate_time, dedup, record_presets, location, device, noise_filter, match, windows, enriched, dead_letter)"])
    }

    func testASecondWindowsStageIsRejected() {
        let yaml = """
            stages:
              - kind: windows
              - kind: windows
                window: 1h
            """
        XCTAssertEqual(errors(yaml), [
            "t.yaml:3:11: a second 'windows' stage: only one stage merges across workers (the first is 'windows') (for several window sizes, list the further sizes under 'more_windows' of the first 'windows' stage (line 2), e.g. 'more_windows: [{window: 1h, counts_topic: metrics.counts.hourly}]')",
        ])
        XCTAssertEqual(errors("stages:\n  - kind: windows\n"), [])
    }

    func testUnknownKeyInsideStageConfig() {
        let yaml = """
            stages:
              - kind: validate
              - kind: dedup
                windw: 5m
            """
        XCTAssertEqual(errors(yaml), ["t.yaml:4:5: unknown key 'windw' (did you mean 'window'?)"])
        XCTAssertEqual(
            errors("stages:\n  - {kind: calibrate_time, max_skw: 30s}\n"),
            ["t.yaml:2:28: unknown key 'max_skw' (did you mean 'max_skew'?)"])
        XCTAssertEqual(
            errors("outputs:\n  - kind: enriched\n    topik: out\n"),
            ["t.yaml:3:5: unknown key 'topik' (did you mean 'topic'?)"])
    }

    func testBadValueTypes() {
        XCTAssertEqual(
            errors("source:\n  topic: events.raw\n  partitions: eight\n"),
            ["t.yaml:3:15: expected an integer for 'partitions', got 'eight'"])
        XCTAssertEqual(
            errors("stages:\n  - kind: dedup\n    window: soon\n"),
            ["t.yaml:3:13: expected a duration for 'window', got 'soon' (use e.g. 60s, 10m, 500ms)"])
        XCTAssertEqual(
            errors("source:\n  limits:\n    max_record_bytes: lots\n"),
            ["t.yaml:3:23: expected a size for 'max_record_bytes', got 'lots' (use e.g. 512KiB, 16MiB, 1GiB, 1MB (10^6 bytes) or a number of bytes)"])
        XCTAssertEqual(
            errors("source:\n  session_timeout: [6s]\n"),
            ["t.yaml:2:20: expected a duration for 'session_timeout', got a list (use e.g. 60s, 10m, 500ms)"])
        XCTAssertEqual(
            errors("stages:\n  - kind: validate\n    list_dropped: maybe\n"),
            ["t.yaml:3:19: expected true or false for 'list_dropped', got 'maybe'"])
    }

    func testBadValueCodes() throws {
        func codes(_ yaml: String) -> [PipelineError.Code] {
            do {
                _ = try PipelineEngine(spec: PipelineSpec.parse(yaml: yaml, file: "t.yaml"), registry: BuiltinStages.registry, logger: Self.logger)
                return []
            } catch { return PipelineErrors.flatten(error).map(\.code) }
        }
        XCTAssertEqual(codes("source:\n  partitions: eight\n"), [.badType])
        XCTAssertEqual(codes("stages:\n  - kind: dedup\n    window: soon\n"), [.badValue])
        XCTAssertEqual(codes("stages:\n  - kind: dedupe\n"), [.unknownKind])
        XCTAssertEqual(codes("stages:\n  - kind: dedup\n    windw: 1m\n"), [.unknownKey])
        XCTAssertEqual(codes("stages:\n  - window: 1m\n"), [.missingKey])
        XCTAssertEqual(codes("source: {topic: [a\n"), [.yamlSyntax])
    }

    func testRangeChecksAreLocatedAtTheValue() {
        // Reported by SourceSpec.init at the key's value.
        XCTAssertEqual(errors("name: t\nsource:\n  partitions: 0\n"), ["t.yaml:3:15: partitions must be at least 1"])
        XCTAssertEqual(errors("name: t\nsource:\n  max_batch: 0\n"), ["t.yaml:3:14: max_batch must be at least 1"])
        XCTAssertEqual(errors("name: t\nsource:\n  decode_threads: 0\n"), ["t.yaml:3:19: decode_threads must be between 1 and 8"])
        XCTAssertEqual(errors("name: t\nsource:\n  decode_threads: 9\n"), ["t.yaml:3:19: decode_threads must be between 1 and 8"])
        // Thrown by a stage's Config without a location, naming the key first: placed at that key's value.
        XCTAssertEqual(errors("stages:\n  - kind: dedup\n    window: 0s\n"), ["t.yaml:3:13: window must be positive"])
    }

    func testMissingKind() {
        let yaml = """
            stages:
              - kind: validate
              - window: 5m
            """
        XCTAssertEqual(errors(yaml), ["t.yaml:3:5: missing key 'kind' (every stage names its kind, e.g. 'kind: validate')"])
        XCTAssertEqual(errors("stages:\n  - dedup\n"), ["t.yaml:2:5: expected a mapping with 'kind:'"])
    }

    func testSeveralErrorsReportedTogether() throws {
        // Structure errors of the file, sorted by location.
        let structure = """
            name: t
            source:
              topic: events.raw
              grop: g
            sinks: []
            stages:
              - kind: validate
              - window: 5m
            """
        XCTAssertEqual(errors(structure), [
            "t.yaml:4:3: unknown key 'grop' (did you mean 'group'?)",
            "t.yaml:5:1: unknown key 'sinks' (valid keys: name, source, stages, outputs, producer, metrics, roles)",
            "t.yaml:8:5: missing key 'kind' (every stage names its kind, e.g. 'kind: validate')",
        ])
        XCTAssertThrowsError(try PipelineSpec.parse(yaml: structure, file: "t.yaml")) { error in
            XCTAssertTrue(error is PipelineErrors, "\(type(of: error))")
        }

        // Stage errors: every stage is built, every problem reported, in pipeline order.
        let stages = """
            stages:
              - kind: validate
                max_string_bytes: many
              - kind: calibrate_tme
              - kind: dedup
                windw: 5m
              - kind: record_presets
            outputs:
              - kind: enriched
              - kind: dead_leter
            """
        XCTAssertEqual(errors(stages), [
            "t.yaml:3:23: expected an integer for 'max_string_bytes', got 'many'",
            "t.yaml:4:11: unknown stage kind 'calibrate_tme' (did you mean 'calibrate_time'?)",
            "t.yaml:6:5: unknown key 'windw' (did you mean 'window'?)",
            "t.yaml:10:11: unknown stage kind 'dead_leter' (did you mean 'dead_letter'?)",
        ])
        let spec = try PipelineSpec.parse(yaml: stages, file: "t.yaml")
        XCTAssertThrowsError(try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Self.logger)) { error in
            guard let all = error as? PipelineErrors else { return XCTFail("expected PipelineErrors, got \(type(of: error))") }
            XCTAssertEqual(all.errors.count, 4)
            XCTAssertEqual(all.description.split(separator: "\n").count, 4)
        }
    }

    func testYAMLSyntaxErrorLocation() {
        let yaml = """
            name: t
            source:
              topic: events.raw
               group: g
            """
        XCTAssertEqual(errors(yaml), ["t.yaml:4:9: YAML syntax error: mapping values are not allowed in this context"])
        let flow = "source: {topic: events.raw\nstages: []\n"
        XCTAssertEqual(errors(flow), [
            "t.yaml:2:7: YAML syntax error: did not find expected ',' or '}' (while parsing a flow mapping that starts at 1:9)",
        ])
    }

    func testMissingFileIsAnIOError() {
        XCTAssertThrowsError(try PipelineSpec.load(path: "/nonexistent/p.yaml", environment: [:])) { error in
            XCTAssertEqual((error as? PipelineError)?.code, .io)
            XCTAssertTrue("\(error)".hasPrefix("cannot read '/nonexistent/p.yaml'"), "\(error)")
        }
    }

    // MARK: - Engine counting

    func testEngineCountsStagesAndDecoding() throws {
        let spec = try PipelineSpec.load(path: Self.appAnalytics, environment: [:])
        let engine = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Self.logger)
        let zstd = ZstdCompressor()
        let t0: Int64 = 1_763_700_000_000
        let records: [TestRecord] = [
            // 2 valid events, 1 with a bad time, 1 that is not an object.
            TestRecord(json: "[\(track(id: 1, time: t0)),\(track(id: 2, time: t0 + 1)),"
                + #"{"type":"track","event":"$AppClick","distinct_id":"u1","time":"soon"},5]"#),
            // A retried copy of event 1 (duplicate) and a profile event.
            TestRecord(json: "[\(track(id: 1, time: t0)),"
                + #"{"type":"profile_set","distinct_id":"u1","time":1763700000000,"properties":{"plan":"gold"}}]"#),
            TestRecord(json: "hello"),                                        // bad_encoding
            TestRecord(json: "[1,"),                                          // bad_json
            TestRecord(bytes: zstd.compress(Array(#"{"a":1}"#.utf8))),        // not_array
            // zstd: one event from a device 2 minutes behind (calibrated), one with properties to fix.
            TestRecord(bytes: zstd.compress(Array((
                "[\(track(id: 3, time: t0 - 120_000, distinctID: "u2", flushTime: t0 - 120_000)),"
                + track(id: 4, time: t0, distinctID: "u2", properties: #"{"bad name":1,"n":null,"ok":true}"#) + "]").utf8)),
                receivedAt: t0),
        ]
        var batch = EventBatch()
        var output = OutputBuffer()
        append(records, to: &batch, topic: spec.source.topic)
        try engine.process(&batch, output: &output)

        let d = engine.decodeCounts
        XCTAssertEqual(d.records, 6)
        XCTAssertEqual(d.events, 8)
        XCTAssertGreaterThan(d.bytes, 0)
        func failed(_ counts: [Int]) -> [String: Int] {
            Dictionary(uniqueKeysWithValues: zip(DeadLetterReason.allCases, counts).filter { $0.1 > 0 }.map { ("\($0.0)", $0.1) })
        }
        XCTAssertEqual(failed(d.failedRecords), ["bad_encoding": 1, "bad_json": 1, "not_array": 1])
        XCTAssertEqual(failed(d.failedEvents), ["not_object": 1, "bad_time": 1])

        func c(_ received: Int, _ emitted: Int, dropped: Int = 0, failed: Int = 0, written: Int = 0) -> StageCounts {
            var s = StageCounts()
            s.received = received; s.emitted = emitted; s.dropped = dropped; s.failed = failed; s.written = written
            return s
        }
        // The not_object event was rejected while decoding: validate never sees it.
        XCTAssertEqual(engine.counts[0], c(7, 6, failed: 1), "validate")
        XCTAssertEqual(engine.counts[1], c(6, 6), "calibrate_time")
        XCTAssertEqual(engine.counts[2], c(6, 5, dropped: 1), "dedup")
        XCTAssertEqual(engine.counts[3], c(5, 5), "record_presets")
        XCTAssertEqual(engine.counts[4], c(5, 5), "enriched")
        XCTAssertEqual(engine.counts[5], c(5, 5), "dead_letter")
        // What the outputs wrote: the 5 live events; the 3 rejected records and 2 rejected events.
        let position = { (kind: String) in try XCTUnwrap(engine.stageNames.firstIndex(of: kind)) }
        XCTAssertEqual(engine.counts[try position("enriched")], c(5, 5, written: 5), "enriched output")
        XCTAssertEqual(engine.counts[try position("dead_letter")], c(5, 5, written: 5), "dead_letter output")
        XCTAssertTrue(engine.summaryLines().contains("dead_letter: written=5 (of 5 live events seen)"), "\(engine.summaryLines())")
        XCTAssertEqual(counter(engine, "dedup.duplicates"), 1)
        XCTAssertEqual(counter(engine, "calibrate_time.calibrated"), 1)

        var enriched: [[String: Any]] = [], reasons: [String: Int] = [:]
        // The outputs agree with the counts (the windows stage's own topics aside).
        for (i, m) in output.messages.enumerated() where ["events.enriched", "events.dlq"].contains(output.topics[Int(m.topic)]) {
            let o = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(output.valueString(i).utf8)) as? [String: Any])
            if output.topics[Int(m.topic)] == "events.enriched" {
                XCTAssertEqual(output.keyString(i), o["distinct_id"] as? String)
                enriched.append(o)
            } else {
                XCTAssertEqual(output.topics[Int(m.topic)], "events.dlq")
                XCTAssertEqual(output.keyString(i), "install-1")
                reasons[o["reason"] as? String ?? "?", default: 0] += 1
            }
        }
        XCTAssertEqual(enriched.count, 5)
        XCTAssertEqual(reasons, ["bad_encoding": 1, "bad_json": 1, "not_array": 1, "not_object": 1, "bad_time": 1])
        let byID = Dictionary(enriched.compactMap { o in (o["_track_id"] as? Int).map { ($0, o) } }) { a, _ in a }
        XCTAssertEqual(Set(byID.keys), [1, 2, 3, 4])
        let p3 = byID[3]?["properties"] as? [String: Any] ?? [:]
        XCTAssertEqual((byID[3]?["time"] as? NSNumber)?.int64Value, t0)
        XCTAssertEqual((p3["$client_time"] as? NSNumber)?.int64Value, t0 - 120_000)
        let p4 = byID[4]?["properties"] as? [String: Any] ?? [:]
        XCTAssertEqual(p4["$dropped_properties"] as? [String], ["bad name", "n"])
        XCTAssertEqual(p4["$ip"] as? String, "1.0.1.3")
        XCTAssertEqual(p4["$project"] as? String, "default")
        XCTAssertNil(p4["n"])

        // Counts accumulate over batches; a second copy of everything is all duplicates.
        batch.reset()
        output.reset()
        append(records, to: &batch, topic: spec.source.topic, firstOffset: 6)
        try engine.process(&batch, output: &output)
        XCTAssertEqual(engine.decodeCounts.records, 12)
        XCTAssertEqual(engine.counts[2], c(12, 6, dropped: 6), "dedup after the replay")
        XCTAssertEqual(counter(engine, "dedup.duplicates"), 6)
        XCTAssertEqual(engine.counts[4], c(6, 6), "enriched after the replay (only the profile event again)")
        XCTAssertTrue(engine.summaryLines().contains("dedup.duplicates=6"), "\(engine.summaryLines())")
    }

    // MARK: - Helpers (as in Tests/MaidianStagesTests/StageTestSupport.swift)

    struct TestRecord {
        var key = "install-1"
        var value: [UInt8]
        var ip = "1.0.1.3"
        var receivedAt: Int64?
        init(json: String, receivedAt: Int64? = nil) { value = Array(json.utf8); self.receivedAt = receivedAt }
        init(bytes: [UInt8], receivedAt: Int64? = nil) { value = bytes; self.receivedAt = receivedAt }
    }

    func append(_ records: [TestRecord], to batch: inout EventBatch, topic: String, firstOffset: Int64 = 0) {
        let t = batch.topicIndex(topic)
        for (i, r) in records.enumerated() {
            let key = Array(r.key.utf8), ip = Array(r.ip.utf8), rat = r.receivedAt.map { Array(String($0).utf8) }
            key.withUnsafeBytes { k in
                ip.withUnsafeBytes { ipb in
                    r.value.withUnsafeBytes { v in
                        if let rat {
                            rat.withUnsafeBytes { rb in
                                batch.appendRecord(topic: t, partition: 0, offset: firstOffset + Int64(i), timestamp: 0, key: k, value: v,
                                                   ip: ipb, receivedAt: rb, ua: nil, project: nil)
                            }
                        } else {
                            batch.appendRecord(topic: t, partition: 0, offset: firstOffset + Int64(i), timestamp: 0, key: k, value: v,
                                               ip: ipb, receivedAt: nil, ua: nil, project: nil)
                        }
                    }
                }
            }
        }
    }

    func track(id: Int64, time: Int64, distinctID: String = "u1", flushTime: Int64? = nil,
               properties: String = #"{"$screen_name":"HomeViewController"}"#) -> String {
        var s = #"{"type":"track","event":"$AppClick","time":\#(time),"distinct_id":"\#(distinctID)","_track_id":\#(id)"#
        if let flushTime { s += #","_flush_time":\#(flushTime)"# }
        return s + #","properties":\#(properties)}"#
    }

    func counter(_ engine: PipelineEngine, _ name: String) -> Int? {
        engine.counters.first { "\($0.stage).\($0.counter.name)" == name }?.counter.value
    }
}
