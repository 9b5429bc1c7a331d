import Foundation
import Logging
import MaidianPipeline
import MaidianRecording

/// `maidian test`: declarative pipeline tests. A test file names a pipeline and lists tests; each test
/// feeds input records (events written in YAML, raw values, or a recording) through a fresh engine of
/// the pipeline, offline, as `maidian bench` does (partial counts merged as a worker holding every
/// partition merges them, all state written out at the end), and checks what each topic received.
/// See `pipelines/tests/README.md`.
public struct PipelineTestFile: Decodable, Sendable {
    /// The pipeline, relative to the test file.
    public var pipeline: LocatedPath
    /// Environment for `${VAR}` in the pipeline, over the process's.
    public var environment: [String: String]
    /// Partitions the records are spread over by key (default 1: one ordered stream).
    public var partitions: Int
    /// The tests, run in order, each on a fresh engine.
    public var tests: [PipelineTestCase]

    enum CodingKeys: String, CodingKey { case pipeline, environment, partitions, tests, shared }

    /// Decodes the YAML keys `pipeline`, `environment`, `partitions`, `tests`, `shared`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        pipeline = try c.decode(LocatedPath.self, forKey: .pipeline)
        environment = try c.decodeIfPresent([String: String].self, forKey: .environment) ?? [:]
        partitions = try c.decodeIfPresent(Int.self, forKey: .partitions) ?? 1
        tests = try c.decode([PipelineTestCase].self, forKey: .tests)
        // `shared:` holds YAML anchors the tests refer to; it is not read itself.
        _ = try c.decodeIfPresent(ConfigNode.self, forKey: .shared)
        if partitions < 1 { try decoder.report(decoder.fail("partitions must be at least 1", forKey: CodingKeys.partitions, code: .badValue)) }
        if tests.isEmpty { try decoder.report(decoder.fail("no tests", forKey: CodingKeys.tests, hint: "list tests under 'tests:'")) }
    }

    /// Loads a test file; errors are located in it.
    public static func load(path: String) throws -> PipelineTestFile {
        try ConfigDecoder().decode(PipelineTestFile.self, from: ConfigDocument.load(path: path, environment: [:]))
    }
}

/// One test: input records and what the topics must hold afterwards.
public struct PipelineTestCase: Decodable, Sendable {
    /// What the test shows, printed with its outcome.
    public var name: String
    /// The input records, in order.
    public var input: [PipelineTestInput]
    /// Per topic, in file order.
    public var expect: [TopicExpectation]
    /// Where the test is written.
    public var location: SourceLocation?

    enum CodingKeys: String, CodingKey { case name, input, expect }

    /// Decodes the YAML keys `name`, `input`, `expect`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        input = try c.decode([PipelineTestInput].self, forKey: .input)
        location = decoder.configLocation
        // Topic names are the keys: decoded entry by entry to keep their order and locations.
        let node = try c.decode(ConfigNode.self, forKey: .expect)
        guard let entries = node.entries else {
            throw PipelineError(code: .badType, message: "expected a mapping of topic names for 'expect'", location: node.location,
                                hint: "e.g. events.enriched: {count: 1}")
        }
        var errors = PipelineErrors.Collector()
        expect = entries.compactMap { e in
            errors.attempt {
                var x = try e.value.decode(TopicExpectation.self)
                x.topic = e.key
                x.location = e.keyLocation
                return x
            }
        }
        try errors.check()
    }
}

/// One input record.
public struct PipelineTestInput: Decodable, Sendable {
    /// The record (`events`, `value`), or every record of `recording`.
    public var records: [RecordingRecord]

    enum CodingKeys: String, CodingKey { case key, headers, timestamp, events, value, recording }

    /// Decodes the YAML keys `key`, `headers`, `timestamp` and one of `events`, `value`, `recording`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let given = [CodingKeys.events, .value, .recording].filter { c.contains($0) }
        guard given.count == 1 else {
            throw decoder.fail(
                given.isEmpty ? "an input needs 'events', 'value' or 'recording'" : "an input has one of 'events', 'value', 'recording'",
                code: given.isEmpty ? .missingKey : .invalid)
        }
        if c.contains(.recording) {
            let path = try c.decode(LocatedPath.self, forKey: .recording)
            let file = path.resolved(((decoder.configLocation?.file ?? "") as NSString).deletingLastPathComponent)
            do {
                records = try Recording.read(path: file)
            } catch {
                throw decoder.fail("cannot read recording '\(path.path)': \(error)", forKey: CodingKeys.recording, code: .io)
            }
            return
        }
        let value: [UInt8]
        var latest: Int64?
        if c.contains(.events) {
            let events = try c.decode(ConfigNode.self, forKey: .events)
            guard let list = events.elements else {
                throw PipelineError(code: .badType, message: "expected a list of events for 'events'", location: events.location)
            }
            // A record's value is a JSON array of events (raw JSON is accepted as well as zstd).
            value = Array(events.jsonText.utf8)
            latest = list.compactMap { $0["time"]?.string.flatMap { Int64($0) } }.max()
        } else {
            value = Array(try c.decode(String.self, forKey: .value).utf8)
        }
        // A producer stamps the record when it receives it: by default, the newest event time.
        let timestamp = try c.decodeIfPresent(Int64.self, forKey: .timestamp) ?? latest ?? 0
        var headers = try c.decodeIfPresent([String: String].self, forKey: .headers) ?? [:]
        if headers["received_at"] == nil { headers["received_at"] = String(timestamp) }
        let key = try c.decodeIfPresent(String.self, forKey: .key)
        records = [RecordingRecord(
            key: key.map { Array($0.utf8) }, headers: headers.sorted { $0.key < $1.key }.map { ($0.key, Array($0.value.utf8)) },
            timestamp: timestamp, value: value)]
    }
}

/// What one topic must hold after a test.
public struct TopicExpectation: Decodable, Sendable {
    /// The topic (the key under `expect`).
    public var topic = ""
    /// Where the topic is written under `expect`.
    public var location: SourceLocation?
    /// Exactly this many messages.
    public var count: Int?
    /// Each must match at least one message: every key it gives is in the message with an equal value
    /// (objects compared the same way, lists element by element; `null` means absent or null).
    public var contains: [ConfigNode]
    /// None may match any message.
    public var absent: [ConfigNode]

    enum CodingKeys: String, CodingKey { case count, contains, absent }

    /// Decodes the YAML keys `count`, `contains`, `absent`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        count = try c.decodeIfPresent(Int.self, forKey: .count)
        contains = try c.decodeIfPresent([ConfigNode].self, forKey: .contains) ?? []
        absent = try c.decodeIfPresent([ConfigNode].self, forKey: .absent) ?? []
    }
}

/// Runs the tests of a test file.
public struct PipelineTestRunner {
    /// The stage kinds a pipeline can name.
    public var registry: StageRegistry
    /// For the stages (tests usually keep it at warning).
    public var logger: Logger

    /// A runner.
    public init(registry: StageRegistry, logger: Logger) {
        self.registry = registry
        self.logger = logger
    }

    /// The outcome of one test.
    public struct Outcome: Sendable {
        /// The test's name.
        public var name: String
        /// Where the test is written.
        public var location: SourceLocation?
        /// Empty when the test passed; each located at the expectation that failed.
        public var failures: [String]
        /// Whether every expectation held.
        public var passed: Bool { failures.isEmpty }
    }

    /// Runs every test of `file` (loaded from `path`). Throws when the pipeline does not load.
    public func run(_ file: PipelineTestFile, path: String) throws -> [Outcome] {
        let dir = (path as NSString).deletingLastPathComponent
        let pipelinePath = file.pipeline.resolved(dir)
        var environment = ProcessInfo.processInfo.environment
        environment.merge(file.environment) { _, test in test }
        let spec: PipelineSpec
        do {
            spec = try PipelineSpec.load(path: pipelinePath, environment: environment)
        } catch {
            throw PipelineErrors.combined(PipelineErrors.flatten(error) + [PipelineError(
                code: .invalid, message: "the pipeline '\(file.pipeline.path)' does not load", location: file.pipeline.location)])!
        }
        return try file.tests.map { try run($0, spec: spec, partitions: file.partitions) }
    }

    func run(_ test: PipelineTestCase, spec: PipelineSpec, partitions: Int) throws -> Outcome {
        let engine = try PipelineEngine(spec: spec, registry: registry, logger: logger, clock: .frozen())
        let source = Bench.prepare(test.input.flatMap(\.records), partitions: Int32(partitions))
        var received: [String: [String]] = [:]
        _ = try Bench.run(engine: engine, records: source, topic: spec.source.topic, batchSize: spec.source.maxBatch, merge: true) { _, out in
            for (i, m) in out.messages.enumerated() { received[out.topics[Int(m.topic)], default: []].append(out.valueString(i)) }
        }
        var failures: [String] = []
        for x in test.expect {
            let messages = received[x.topic] ?? []
            let at = x.location.map { "\($0): " } ?? ""
            if let count = x.count, count != messages.count {
                failures.append("\(at)'\(x.topic)': expected \(count) message\(count == 1 ? "" : "s"), got \(messages.count)"
                                + Self.sample(messages))
            }
            let parsed = messages.map { try? JSONSerialization.jsonObject(with: Data($0.utf8), options: [.fragmentsAllowed]) }
            for wanted in x.contains {
                let expected = try JSONSerialization.jsonObject(with: Data(wanted.jsonText.utf8), options: [.fragmentsAllowed])
                if !parsed.contains(where: { $0.map { Self.matches(expected, $0) } ?? false }) {
                    failures.append("\(wanted.location): '\(x.topic)': no message matches \(wanted.jsonText)" + Self.sample(messages))
                }
            }
            for unwanted in x.absent {
                let expected = try JSONSerialization.jsonObject(with: Data(unwanted.jsonText.utf8), options: [.fragmentsAllowed])
                if let hit = parsed.firstIndex(where: { $0.map { Self.matches(expected, $0) } ?? false }) {
                    failures.append("\(unwanted.location): '\(x.topic)': a message matches \(unwanted.jsonText): \(Self.clip(messages[hit]))")
                }
            }
        }
        return Outcome(name: test.name, location: test.location, failures: failures)
    }

    static func clip(_ s: String) -> String { s.count > 400 ? String(s.prefix(400)) + " …" : s }

    static func sample(_ messages: [String]) -> String {
        messages.isEmpty ? "" : "; the first: " + clip(messages[0])
    }

    /// Whether `actual` has everything `expected` gives (see ``TopicExpectation/contains``).
    static func matches(_ expected: Any, _ actual: Any) -> Bool {
        switch expected {
        case let e as [String: Any]:
            guard let a = actual as? [String: Any] else { return false }
            return e.allSatisfy { key, value in
                if value is NSNull { return a[key] == nil || a[key] is NSNull }
                return a[key].map { matches(value, $0) } ?? false
            }
        case let e as [Any]:
            guard let a = actual as? [Any], a.count == e.count else { return false }
            return zip(e, a).allSatisfy { matches($0, $1) }
        case let e as String:
            return (actual as? String) == e
        case let e as NSNumber:
            guard let a = actual as? NSNumber, !(actual is String) else { return false }
            return e == a
        case is NSNull:
            return actual is NSNull
        default:
            return false
        }
    }
}
