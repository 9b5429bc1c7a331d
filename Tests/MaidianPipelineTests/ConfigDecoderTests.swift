import Foundation
import MaidianPipeline
import XCTest

// MARK: - Types used by the tests

private struct SourceConfig: Decodable, Equatable {
    var topic: String
    var partitions: Int
    var group: String?
}

private struct WindowConfig: Decodable, Equatable {
    var window: ConfigDuration?
    var maxKeys: Int?

    enum CodingKeys: String, CodingKey {
        case window
        case maxKeys = "max_keys"
    }
}

private struct Sink: Decodable, Equatable {
    var topic: String
    var compress: Bool?
}

private struct Outputs: Decodable, Equatable {
    var sinks: [Sink]
}

private struct SimplePipeline: Decodable {
    var name: String
    var source: SourceConfig
    var dedup: WindowConfig?
    var outputs: Outputs?
}

/// A stage config with its own validation.
private struct DedupConfig: Decodable, Equatable {
    var window: ConfigDuration
    var key: String?

    enum CodingKeys: String, CodingKey { case window, key }
}

extension DedupConfig {
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        window = try c.decode(ConfigDuration.self, forKey: .window)
        key = try c.decodeIfPresent(String.self, forKey: .key)
        if window == .zero {
            throw decoder.fail("window must be longer than 0", forKey: CodingKeys.window, hint: "e.g. 10m")
        }
    }
}

private struct FilterConfig: Decodable, Equatable {
    var field: String
    var equals: String
}

private enum StageConfig: Equatable {
    case dedup(DedupConfig)
    case filter(FilterConfig)
}

private let stageKinds = ["dedup", "filter"]

/// The inline pattern: read `kind`, then decode the *same* mapping with the kind's config type.
/// `kind` was asked for by this type, so it counts as known; the config's keys are checked with it.
private struct InlineStage: Decodable, Equatable {
    var kind: String
    var config: StageConfig

    enum CodingKeys: String, CodingKey { case kind }
}

extension InlineStage {
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        kind = try c.decode(String.self, forKey: .kind)
        switch kind {
        case "dedup": config = .dedup(try DedupConfig(from: decoder))
        case "filter": config = .filter(try FilterConfig(from: decoder))
        default:
            throw decoder.fail(
                "unknown stage kind '\(kind)'", forKey: CodingKeys.kind,
                hint: PipelineError.suggestion(for: kind, among: stageKinds), code: .unknownKind)
        }
    }
}

private struct InlinePipeline: Decodable {
    var stages: [InlineStage]
}

/// The lazy pattern: read `kind` and capture the mapping; decode it later with
/// `node.decode(Config.self, ignoringKeys: ["kind"])`.
private struct LazyStage: Decodable {
    var kind: String
    var kindLocation: SourceLocation?
    var node: ConfigNode

    enum CodingKeys: String, CodingKey { case kind }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        kind = try c.decode(String.self, forKey: .kind)
        kindLocation = decoder.configLocation(forKey: CodingKeys.kind)
        node = try ConfigNode(from: decoder)
    }

    func build() throws -> StageConfig {
        switch kind {
        case "dedup": return .dedup(try node.decode(DedupConfig.self, ignoringKeys: ["kind"]))
        case "filter": return .filter(try node.decode(FilterConfig.self, ignoringKeys: ["kind"]))
        default:
            throw PipelineError(
                code: .unknownKind, message: "unknown stage kind '\(kind)'", location: kindLocation,
                hint: PipelineError.suggestion(for: kind, among: stageKinds))
        }
    }
}

private struct LazyPipeline: Decodable {
    var stages: [LazyStage]
}

private enum Mode: String, Decodable, CaseIterable {
    case exact, approximate
}

private struct Scalars: Decodable {
    var i: Int
    var i8: Int8?
    var u: UInt32?
    var d: Double?
    var f: Float?
    var b: Bool?
    var s: String?
    var mode: Mode?
    var list: [Int]?
    var labels: [String: String]?
    var url: URL?
}

// MARK: - Helpers

private func parse(_ yaml: String, file: String = "pipelines/x.yaml", env: [String: String] = [:]) throws -> ConfigNode {
    try ConfigDocument.parse(yaml: yaml, file: file, environment: env)
}

private func decode<T: Decodable>(_ type: T.Type, _ yaml: String, file: String = "pipelines/x.yaml") throws -> T {
    try ConfigDecoder().decode(type, from: parse(yaml, file: file))
}

/// The errors `body` throws, flattened, as `file:line:column: message (hint)` lines.
private func errorLines(_ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) -> [String] {
    do {
        try body()
        XCTFail("expected an error", file: file, line: line)
        return []
    } catch {
        return PipelineErrors.flatten(error).map(\.description)
    }
}

private func errors(_ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) -> [PipelineError] {
    do {
        try body()
        XCTFail("expected an error", file: file, line: line)
        return []
    } catch {
        return PipelineErrors.flatten(error)
    }
}

// MARK: - Tests

final class ConfigDecoderTests: XCTestCase {
    func testDecodesValidDocument() throws {
        let p = try decode(SimplePipeline.self, """
            name: orders
            source:
              topic: orders.v1
              partitions: 8
            dedup:
              window: 10m
              max_keys: 100_000
            outputs:
              sinks:
                - topic: a
                - topic: b
                  compress: yes
            """)
        XCTAssertEqual(p.name, "orders")
        XCTAssertEqual(p.source, SourceConfig(topic: "orders.v1", partitions: 8, group: nil))
        XCTAssertEqual(p.dedup, WindowConfig(window: .minutes(10), maxKeys: 100_000))
        XCTAssertEqual(p.outputs?.sinks, [Sink(topic: "a", compress: nil), Sink(topic: "b", compress: true)])
    }

    func testUnknownKeyHasHintAndExactLocation() {
        let lines = errorLines {
            _ = try decode(SimplePipeline.self, """
                name: orders
                source:
                  topic: orders
                  partitions: 8
                dedup:
                  windw: 10m
                """)
        }
        XCTAssertEqual(lines, ["pipelines/x.yaml:6:3: unknown key 'windw' (did you mean 'window'?)"])
    }

    func testUnknownKeyErrorFields() {
        let errs = errors {
            _ = try decode(WindowConfig.self, "window: 1m\nzzz: 1\n", file: "a.yaml")
        }
        XCTAssertEqual(errs.count, 1)
        XCTAssertEqual(errs.first?.code, .unknownKey)
        XCTAssertEqual(errs.first?.message, "unknown key 'zzz'")
        XCTAssertEqual(errs.first?.location, SourceLocation(file: "a.yaml", line: 2, column: 1))
        XCTAssertEqual(errs.first?.hint, "valid keys: window, max_keys")
        XCTAssertEqual(errs.first?.description, "a.yaml:2:1: unknown key 'zzz' (valid keys: window, max_keys)")
    }

    func testSeveralUnknownKeysAreReportedTogether() {
        var thrown: (any Error)?
        XCTAssertThrowsError(try decode(SimplePipeline.self, """
            name: orders
            nmae: typo
            source:
              topic: orders
              partitons: 8
              partitions: 8
            dedup:
              window: 1m
              maxkeys: 3
            """)) { thrown = $0 }
        guard let all = thrown as? PipelineErrors else {
            return XCTFail("expected PipelineErrors, got \(String(describing: thrown))")
        }
        XCTAssertEqual(all.errors.map(\.description), [
            "pipelines/x.yaml:2:1: unknown key 'nmae' (did you mean 'name'?)",
            "pipelines/x.yaml:5:3: unknown key 'partitons' (did you mean 'partitions'?)",
            "pipelines/x.yaml:9:3: unknown key 'maxkeys' (did you mean 'max_keys'?)",
        ])
        XCTAssertEqual(all.description.split(separator: "\n").count, 3)
    }

    func testUnknownKeysInListOfMappingsInsideMapping() {
        let lines = errorLines {
            _ = try decode(SimplePipeline.self, """
                name: orders
                source: {topic: orders, partitions: 1}
                outputs:
                  sinks:
                    - topic: a
                      compres: true
                    - topic: b
                    - {topic: c, partition: 2}
                """)
        }
        XCTAssertEqual(lines, [
            "pipelines/x.yaml:6:7: unknown key 'compres' (did you mean 'compress'?)",
            "pipelines/x.yaml:8:18: unknown key 'partition' (valid keys: topic, compress)",
        ])
    }

    func testMissingKeyIsReportedAtTheMapping() {
        let errs = errors {
            _ = try decode(SimplePipeline.self, """
                name: orders
                source:
                  partitions: 8
                """)
        }
        XCTAssertEqual(errs.map(\.description), ["pipelines/x.yaml:3:3: missing key 'topic'"])
        XCTAssertEqual(errs.first?.code, .missingKey)
    }

    func testMissingKeyPointsAtLikelyMisspelling() {
        let lines = errorLines {
            _ = try decode(SourceConfig.self, "topc: orders\npartitions: 8\n")
        }
        // The misspelling is the problem; the missing key is its consequence and is not reported.
        XCTAssertEqual(lines, ["pipelines/x.yaml:1:1: unknown key 'topc' (did you mean 'topic'?)"])
    }

    func testTypeMismatchIsReportedAtTheValue() {
        let errs = errors {
            _ = try decode(SimplePipeline.self, """
                name: orders
                source:
                  topic: orders
                  partitions: eight
                """)
        }
        XCTAssertEqual(errs.map(\.description), [
            "pipelines/x.yaml:4:15: expected an integer for 'partitions', got 'eight'",
        ])
        XCTAssertEqual(errs.first?.code, .badType)

        XCTAssertEqual(errorLines { _ = try decode(SourceConfig.self, "topic: [a, b]\npartitions: 1") }, [
            "pipelines/x.yaml:1:8: expected a string for 'topic', got a list",
        ])
        XCTAssertEqual(errorLines { _ = try decode(SimplePipeline.self, "name: x\nsource: orders") }, [
            "pipelines/x.yaml:2:9: expected a mapping for 'source', got 'orders'",
        ])
        XCTAssertEqual(errorLines { _ = try decode(Scalars.self, "i: 1\ni8: 300") }, [
            "pipelines/x.yaml:2:5: '300' is out of range for 'i8' (must be between -128 and 127)",
        ])
        XCTAssertEqual(errorLines { _ = try decode(Scalars.self, "i: 1\nlist: [1, 2, x]") }, [
            "pipelines/x.yaml:2:14: expected an integer for 'list[2]', got 'x'",
        ])
        XCTAssertEqual(errorLines { _ = try decode(Scalars.self, "i:\n") }, [
            "pipelines/x.yaml:1:3: expected an integer for 'i', got an empty value",
        ])
        XCTAssertEqual(errorLines { _ = try decode([Int].self, "{a: 1}") }, [
            "pipelines/x.yaml:1:1: expected a list, got a mapping",
        ])
    }

    func testScalars() throws {
        let s = try decode(Scalars.self, """
            i: -0x1F
            i8: -128
            u: 4_000_000_000
            d: 1e3
            f: 0.5
            b: off
            s: 42
            mode: approximate
            list: [1, 2, 3]
            labels: {team: data, tier: 1}
            url: https://example.com/x
            """)
        XCTAssertEqual(s.i, -31)
        XCTAssertEqual(s.i8, -128)
        XCTAssertEqual(s.u, 4_000_000_000)
        XCTAssertEqual(s.d, 1000)
        XCTAssertEqual(s.f, 0.5)
        XCTAssertEqual(s.b, false)
        XCTAssertEqual(s.s, "42")
        XCTAssertEqual(s.mode, .approximate)
        XCTAssertEqual(s.list, [1, 2, 3])
        XCTAssertEqual(s.labels, ["team": "data", "tier": "1"])
        XCTAssertEqual(s.url?.host, "example.com")
    }

    func testNullsAndQuotedScalars() throws {
        for value in ["", "~", "null", "NULL"] {
            let s = try decode(Scalars.self, "i: 1\ns: \(value)\nd: \(value)\n")
            XCTAssertNil(s.s, "s: \(value)")
            XCTAssertNil(s.d, "d: \(value)")
        }
        let quoted = try decode(Scalars.self, "i: \"7\"\ns: \"null\"\nb: 'true'\n")
        XCTAssertEqual(quoted.i, 7, "quoted numbers decode by parsing their text")
        XCTAssertEqual(quoted.s, "null", "a quoted null is a string")
        XCTAssertEqual(quoted.b, true)
        let empty = try decode(Scalars.self, "i: 1\ns: ''\nlist:\nlabels:\n")
        XCTAssertEqual(empty.s, "")
        XCTAssertNil(empty.list)
        XCTAssertNil(empty.labels)
        // An empty value where a non-optional collection is expected is an empty collection.
        XCTAssertEqual(try decode(Outputs.self, "sinks:\n").sinks, [])
    }

    func testEnumValueHint() {
        XCTAssertEqual(errorLines { _ = try decode(Scalars.self, "i: 1\nmode: exakt") }, [
            "pipelines/x.yaml:2:7: invalid value 'exakt' for 'mode' (did you mean 'exact'?)",
        ])
        XCTAssertEqual(errorLines { _ = try decode(Scalars.self, "i: 1\nmode: fast") }, [
            "pipelines/x.yaml:2:7: invalid value 'fast' for 'mode' (expected one of: exact, approximate)",
        ])
    }

    func testYamlSyntaxErrorLocation() {
        let errs = errors {
            _ = try parse("""
                name: orders
                source:
                  topic: [orders
                  partitions: 8
                """)
        }
        XCTAssertEqual(errs.count, 1)
        XCTAssertEqual(errs.first?.code, .yamlSyntax)
        XCTAssertEqual(errs.first?.location?.file, "pipelines/x.yaml")
        XCTAssertEqual(errs.first?.location?.line, 4)
        XCTAssertTrue(errs.first?.message.hasPrefix("YAML syntax error: ") ?? false)

        let tab = errors { _ = try parse("source:\n\ttopic: a\n") }
        XCTAssertEqual(tab.first?.code, .yamlSyntax)
        XCTAssertEqual(tab.first?.location, SourceLocation(file: "pipelines/x.yaml", line: 2, column: 1))
        XCTAssertEqual(
            tab.first?.description,
            "pipelines/x.yaml:2:1: YAML syntax error: found character that cannot start any token: a tab character"
                + " (YAML does not allow tabs for indentation; indent with spaces)")
    }

    func testMoreThanOneDocumentIsAnError() {
        XCTAssertEqual(errorLines { _ = try parse("a: 1\n---\nb: 2\n") }, [
            "pipelines/x.yaml:2:1: YAML syntax error: expected a single document in the stream, but found another document",
        ])
    }

    func testDuplicateKeysAreAllReported() {
        let lines = errorLines {
            _ = try parse("""
                name: a
                source:
                  topic: x
                  topic: y
                name: b
                """)
        }
        XCTAssertEqual(lines, [
            "pipelines/x.yaml:4:3: duplicate key 'topic' (first defined at 3:3)",
            "pipelines/x.yaml:5:1: duplicate key 'name' (first defined at 1:1)",
        ])
    }

    func testInlineStageListKindFirst() throws {
        let ok = try decode(InlinePipeline.self, """
            stages:
              - kind: dedup
                window: 10m
              - {kind: filter, field: type, equals: click}
            """)
        XCTAssertEqual(ok.stages, [
            InlineStage(kind: "dedup", config: .dedup(DedupConfig(window: .minutes(10), key: nil))),
            InlineStage(kind: "filter", config: .filter(FilterConfig(field: "type", equals: "click"))),
        ])

        let lines = errorLines {
            _ = try decode(InlinePipeline.self, """
                stages:
                  - {kind: dedup, window: 10m, windw: 1}
                  - kind: filter
                    field: type
                    equal: click
                    equals: click
                """)
        }
        XCTAssertEqual(lines, [
            "pipelines/x.yaml:2:32: unknown key 'windw' (did you mean 'window'?)",
            "pipelines/x.yaml:5:5: unknown key 'equal' (did you mean 'equals'?)",
        ])
    }

    func testLazyStageListKindFirst() throws {
        let pipeline = try decode(LazyPipeline.self, """
            stages:
              - {kind: dedup, window: 10m, windw: 1}
              - kind: filtr
                field: type
            """)
        XCTAssertEqual(pipeline.stages.map(\.kind), ["dedup", "filtr"])
        // Captured nodes are not checked by the outer decode; each is checked when built.
        var collector = PipelineErrors.Collector()
        let built = pipeline.stages.map { stage in collector.attempt { try stage.build() } }
        XCTAssertNil(built[0])
        XCTAssertEqual(collector.errors.map(\.description), [
            "pipelines/x.yaml:2:32: unknown key 'windw' (did you mean 'window'?)",
            "pipelines/x.yaml:3:11: unknown stage kind 'filtr' (did you mean 'filter'?)",
        ])
        XCTAssertEqual(collector.errors.map(\.code), [.unknownKey, .unknownKind])
        XCTAssertThrowsError(try collector.check()) { XCTAssertTrue($0 is PipelineErrors) }

        let good = try decode(LazyPipeline.self, "stages: [{kind: dedup, window: 1h30m, key: user}]")
        XCTAssertEqual(try good.stages[0].build(), .dedup(DedupConfig(window: .minutes(90), key: "user")))
        XCTAssertEqual(good.stages[0].node.location, SourceLocation(file: "pipelines/x.yaml", line: 1, column: 10))
    }

    func testUnknownKeysAreReportedAlongsideAFailure() {
        let lines = errorLines {
            _ = try decode(InlinePipeline.self, """
                stages:
                  - {kind: dedup, window: 10m, windw: 1}
                  - {kind: dedup, window: soon}
                """)
        }
        XCTAssertEqual(lines, [
            "pipelines/x.yaml:2:32: unknown key 'windw' (did you mean 'window'?)",
            "pipelines/x.yaml:3:27: expected a duration for 'window', got 'soon' (use e.g. 60s, 10m, 500ms)",
        ])
    }

    func testErrorsFromInitGetTheNodeLocation() {
        // decoder.fail(_:forKey:) points at the key's value.
        XCTAssertEqual(errorLines { _ = try decode(InlinePipeline.self, "stages:\n  - kind: dedup\n    window: 0s\n") }, [
            "pipelines/x.yaml:3:13: window must be longer than 0 (e.g. 10m)",
        ])
        // decoder.fail(_:forKey:) with code .unknownKind, and a hint from PipelineError.suggestion(for:among:).
        let errs = errors { _ = try decode(InlinePipeline.self, "stages: [{kind: dedupe}]") }
        XCTAssertEqual(errs.map(\.description), ["pipelines/x.yaml:1:17: unknown stage kind 'dedupe' (did you mean 'dedup'?)"])
        XCTAssertEqual(errs.first?.code, .unknownKind)

        // A PipelineError thrown without location gets the location of the node being decoded.
        struct Port: Decodable {
            init(from decoder: any Decoder) throws {
                throw PipelineError(code: .badValue, message: "ports are not supported")
            }
        }
        struct Holder: Decodable { var port: Port }
        XCTAssertEqual(errorLines { _ = try decode(Holder.self, "\nport:   80") }, [
            "pipelines/x.yaml:2:9: ports are not supported",
        ])
        // Any other error is wrapped with the location too.
        struct Other: Error, CustomStringConvertible { var description: String { "boom" } }
        struct Boom: Decodable {
            init(from decoder: any Decoder) throws { throw Other() }
        }
        struct BoomHolder: Decodable { var x: Boom }
        XCTAssertEqual(errorLines { _ = try decode(BoomHolder.self, "x: 1") }, [
            "pipelines/x.yaml:1:4: invalid value for 'x': boom",
        ])
    }

    func testConfigLocationFromInsideInit() throws {
        struct Located: Decodable {
            var here: SourceLocation?
            var child: SourceLocation?
            enum CodingKeys: String, CodingKey { case child }
            init(from decoder: any Decoder) throws {
                here = decoder.configLocation
                child = decoder.configLocation(forKey: CodingKeys.child)
                _ = try decoder.container(keyedBy: CodingKeys.self).decode(Int.self, forKey: .child)
            }
        }
        struct Root: Decodable { var items: [Located] }
        let root = try decode(Root.self, "items:\n  - child: 1\n  -   child: 2\n", file: "f.yaml")
        XCTAssertEqual(root.items.map(\.here), [
            SourceLocation(file: "f.yaml", line: 2, column: 5), SourceLocation(file: "f.yaml", line: 3, column: 7),
        ])
        XCTAssertEqual(root.items.map(\.child?.column), [12, 14])
    }

    func testAnchorsAndMergeKeys() throws {
        struct Root: Decodable {
            var defaults: Sink?
            var sinks: [Sink]
        }
        let root = try decode(Root.self, """
            defaults: &d {topic: base, compress: true}
            sinks:
              - <<: *d
                topic: a
              - *d
            """)
        XCTAssertEqual(root.sinks, [Sink(topic: "a", compress: true), Sink(topic: "base", compress: true)])
    }

    func testAllKeysOfDictionariesAreKnown() throws {
        struct Root: Decodable { var labels: [String: Int] }
        let root = try decode(Root.self, "labels: {a: 1, b: 2}")
        XCTAssertEqual(root.labels, ["a": 1, "b": 2])
    }

    func testNodeAccessors() throws {
        let node = try parse("a: 1\nb: [x, ~]\nc: {d: 'q'}\n")
        XCTAssertEqual(node.keys, ["a", "b", "c"])
        XCTAssertEqual(node["a"]?.string, "1")
        XCTAssertEqual(node["b"]?.elements?.count, 2)
        XCTAssertEqual(node["b"]?.elements?[1].isNull, true)
        XCTAssertEqual(node["c"]?["d"]?.scalarStyle, .singleQuoted)
        XCTAssertEqual(node.location(ofKey: "c"), SourceLocation(file: "pipelines/x.yaml", line: 3, column: 1))
        XCTAssertNil(node["zz"])
        XCTAssertTrue(try parse("").isNull, "an empty document is a null root")
        XCTAssertEqual(try parse("# only a comment\n").location.line, 1)
    }

    func testLoadFromFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("p.yaml").path
        try "topic: ${T:-orders}\npartitions: 3\nextra: 1\n".write(toFile: path, atomically: true, encoding: .utf8)
        let node = try ConfigDocument.load(path: path, environment: [:])
        XCTAssertEqual(node["topic"]?.string, "orders")
        XCTAssertEqual(errorLines { _ = try ConfigDecoder().decode(SourceConfig.self, path: path, environment: [:]) }, [
            "\(path):3:1: unknown key 'extra' (valid keys: topic, partitions, group)",
        ])

        let missing = errors { _ = try ConfigDocument.load(path: dir.appendingPathComponent("nope.yaml").path) }
        XCTAssertEqual(missing.first?.code, .io)
        XCTAssertNil(missing.first?.location)
        XCTAssertTrue(missing.first?.message.hasPrefix("cannot read '") ?? false)
    }

    func testErrorRendering() {
        let e = PipelineError(
            code: .unknownKey, message: "unknown key 'windw'",
            location: SourceLocation(file: "pipelines/x.yaml", line: 12, column: 5), hint: "did you mean 'window'?")
        XCTAssertEqual(e.description, "pipelines/x.yaml:12:5: unknown key 'windw' (did you mean 'window'?)")
        XCTAssertEqual("\(PipelineError(code: .invalid, message: "no stages"))", "no stages")
        XCTAssertEqual(PipelineError.suggestion(for: "dedpu", among: ["dedup", "filter"]), "did you mean 'dedup'?")
        XCTAssertEqual(PipelineError.suggestion(for: "xyz", among: ["dedup", "filter"]), "expected one of: dedup, filter")
        XCTAssertNil(PipelineError.suggestion(for: "xyz", among: []))
        XCTAssertNil(PipelineErrors.combined([]))
        XCTAssertTrue(PipelineErrors.combined([e]) is PipelineError)
        XCTAssertTrue(PipelineErrors.combined([e, PipelineError(code: .invalid, message: "x")]) is PipelineErrors)
    }

    // MARK: - One pass

    func testEveryProblemOfADocumentInOnePass() {
        // Bad optional keys, bad list elements, a check reported from init(from:), and unknown keys:
        // all of them, each at its value, without stopping at the first.
        let lines = errorLines {
            _ = try decode(ReportingConfig.self, """
                limit: 0
                name: [x]
                items:
                  - {topic: a, partitions: many}
                  - {topic: b, partitions: 2, extra: 1}
                  - {partitions: 3}
                dedup: {window: soon}
                """)
        }
        XCTAssertEqual(lines, [
            "pipelines/x.yaml:1:8: limit must be at least 1",
            "pipelines/x.yaml:2:7: expected a string for 'name', got a list",
            "pipelines/x.yaml:4:28: expected an integer for 'partitions', got 'many'",
            "pipelines/x.yaml:5:31: unknown key 'extra' (valid keys: topic, partitions, group)",
            "pipelines/x.yaml:6:5: missing key 'topic'",
            "pipelines/x.yaml:7:17: expected a duration for 'window', got 'soon' (use e.g. 60s, 10m, 500ms)",
        ])
    }

    func testDecodeCollectingReturnsTheValueWithItsProblems() throws {
        let node = try parse("limit: 0\nitems: []\nname: n\ntypo: 1\n")
        let (value, problems) = ConfigDecoder().decodeCollecting(ReportingConfig.self, from: node)
        XCTAssertEqual(value?.name, "n")
        XCTAssertEqual(value?.limit, 0, "kept as written, reported")
        XCTAssertEqual(problems.map(\.description), [
            "pipelines/x.yaml:1:8: limit must be at least 1",
            "pipelines/x.yaml:4:1: unknown key 'typo' (valid keys: limit, name, items, dedup)",
        ])
        let broken = ConfigDecoder().decodeCollecting(SourceConfig.self, from: try parse("partitions: 1\n"))
        XCTAssertNil(broken.value)
        XCTAssertEqual(broken.errors.map(\.code), [.missingKey])
    }

    func testScalarsAsJSON() throws {
        let node = try parse("""
            a: 1
            b: -2.5e3
            c: 3.2.1
            d: '42'
            e: true
            f: yes
            g: ~
            h: [x, {i: "q\\"uote"}]
            j: 0x1F
            """)
        XCTAssertEqual(node.jsonText, #"{"a":1,"b":-2.5e3,"c":"3.2.1","d":"42","e":true,"f":"yes","g":null,"h":["x",{"i":"q\"uote"}],"j":"0x1F"}"#)
    }
}

/// Decoded in one pass: every problem is reported.
private struct ReportingConfig: Decodable {
    var limit: Int
    var name: String?
    var items: [SourceConfig]
    var dedup: DedupConfig?

    enum CodingKeys: String, CodingKey { case limit, name, items, dedup }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        limit = try c.decodeIfPresent(Int.self, forKey: .limit) ?? 1
        name = try c.decodeIfPresent(String.self, forKey: .name)
        items = try c.decodeIfPresent([SourceConfig].self, forKey: .items) ?? []
        dedup = try c.decodeIfPresent(DedupConfig.self, forKey: .dedup)
        if limit < 1 { try decoder.report(decoder.fail("limit must be at least 1", forKey: CodingKeys.limit)) }
    }
}
