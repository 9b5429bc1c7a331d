import Foundation
import Logging

/// `maidian check` as a linter: every problem of a pipeline file in one pass (the file's structure, every
/// stage's options, the files the stages read, librdkafka properties), each at the value it is about, plus
/// warnings for pipelines that load but cannot work as meant.
public struct PipelineCheck {
    /// What a check found in one file.
    public struct Report: Sendable {
        /// The file checked.
        public var file: String
        /// Problems that stop the pipeline from running; sorted by location.
        public var errors: [PipelineError]
        /// Problems that let it run, but not as meant; sorted by location.
        public var warnings: [PipelineError]
        /// The stage kinds in order (transform stages, then outputs) when the pipeline builds.
        public var stageNames: [String]

        /// A report.
        public init(file: String, errors: [PipelineError], warnings: [PipelineError], stageNames: [String]) {
            self.file = file
            self.errors = errors
            self.warnings = warnings
            self.stageNames = stageNames
        }
    }

    /// What librdkafka says about one property: `nil` when it takes it.
    public struct KafkaPropertyProblem: Sendable {
        /// The problem in words.
        public var message: String
        /// A suggestion (`did you mean 'sasl.password'?`, the accepted values).
        public var hint: String?
        /// The property name is unknown (the error is located at the name, else at the value).
        public var unknownName: Bool
        /// Not an error: the client ignores the property (a producer property in `source.kafka`).
        public var isWarning: Bool

        /// A problem.
        public init(message: String, hint: String? = nil, unknownName: Bool, isWarning: Bool = false) {
            self.message = message
            self.hint = hint
            self.unknownName = unknownName
            self.isWarning = isWarning
        }
    }

    /// The stage kinds a pipeline can name.
    public var registry: StageRegistry
    /// For `${VAR}` and `*_env` keys.
    public var environment: [String: String]
    /// For the stages built while checking.
    public var logger: Logger
    /// Checks one librdkafka property (MaidianKafka's `KafkaConfigCheck`; this module does not link librdkafka).
    public var kafkaProperty: @Sendable (_ name: String, _ value: String, _ client: WrittenKafkaProperty.Client) -> KafkaPropertyProblem?

    /// A checker.
    public init(
        registry: StageRegistry, environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger,
        kafkaProperty: @escaping @Sendable (_ name: String, _ value: String, _ client: WrittenKafkaProperty.Client) -> KafkaPropertyProblem?
    ) {
        self.registry = registry
        self.environment = environment
        self.logger = logger
        self.kafkaProperty = kafkaProperty
    }

    /// Checks the pipeline file at `path`.
    public func check(path: String) -> Report {
        let (spec, specErrors) = PipelineSpec.lint(path: path, environment: environment)
        guard let spec else { return Report(file: path, errors: specErrors, warnings: [], stageNames: []) }
        var errors = specErrors
        var stageNames: [String] = []
        var defaultTopics: [[String]] = []
        do {
            let engine = try PipelineEngine(spec: spec, registry: registry, logger: logger)
            stageNames = engine.stageNames
            defaultTopics = engine.stages.map(\.outputTopics)
        } catch {
            errors += PipelineErrors.flatten(error)
        }
        let kafka = kafkaFindings(spec)
        errors += kafka.errors
        // A pipeline without outputs runs and writes nothing, not even dead letters: refused, not warned of.
        do { try spec.requireOutputs() } catch { errors += PipelineErrors.flatten(error) }
        return Report(
            file: path, errors: PipelineErrors.sortedUnique(errors),
            warnings: PipelineErrors.sortedUnique(Self.warnings(spec, stageTopics: defaultTopics) + kafka.warnings),
            stageNames: stageNames)
    }

    /// librdkafka properties of `source.kafka` and `producer.kafka` that a client would reject, located.
    public func kafkaErrors(_ spec: PipelineSpec) -> [PipelineError] {
        kafkaFindings(spec).errors
    }

    func kafkaFindings(_ spec: PipelineSpec) -> (errors: [PipelineError], warnings: [PipelineError]) {
        var errors: [PipelineError] = [], warnings: [PipelineError] = []
        for p in spec.writtenKafkaProperties {
            guard let problem = kafkaProperty(p.name, p.value, p.client) else { continue }
            let e = PipelineError(
                code: problem.unknownName ? .unknownKey : .badValue, message: problem.message,
                location: problem.unknownName || problem.isWarning ? p.nameLocation : p.valueLocation, hint: problem.hint)
            if problem.isWarning { warnings.append(e) } else { errors.append(e) }
        }
        return (errors, warnings)
    }

    /// Pipelines that load but cannot work as meant. `stageTopics`: the topics each stage and output (in
    /// that order) writes, defaults included, when the engine was built (empty otherwise).
    public static func warnings(_ spec: PipelineSpec, stageTopics: [[String]] = []) -> [PipelineError] {
        var warnings: [PipelineError] = []
        let fileStart = SourceLocation(file: spec.file, line: 1, column: 1)
        func warn(_ message: String, _ location: SourceLocation?, hint: String? = nil) {
            warnings.append(PipelineError(code: .invalid, message: message, location: location ?? fileStart, hint: hint))
        }

        if spec.stages.isEmpty {
            warn("the pipeline has no stages: records are only decoded and written out", nil,
                 hint: "add stages under 'stages:', e.g. '- kind: validate'")
        }

        // Topics written by more than one output (or stage), and outputs into the source topic.
        var writers: [String: (kind: String, location: SourceLocation)] = [:]
        let all = spec.stages + spec.outputs
        for (i, stage) in all.enumerated() {
            var topics: [(String, SourceLocation)] = []
            for entry in stage.node.entries ?? [] where entry.key == "topic" || entry.key.hasSuffix("_topic") {
                if let topic = entry.value.string { topics.append((topic, entry.value.location)) }
            }
            // Topics the stage writes by default (windows' metrics.counts when counts_topic is left out).
            if stageTopics.count == all.count {
                for topic in stageTopics[i] where !topics.contains(where: { $0.0 == topic }) {
                    topics.append((topic, stage.kindLocation))
                }
            }
            for (topic, at) in topics {
                if topic == spec.source.topic {
                    warn("'\(stage.kind)' writes into the source topic '\(topic)': the pipeline would read its own output", at)
                }
                if let first = writers[topic] {
                    warn("topic '\(topic)' is also written by '\(first.kind)' at \(first.location.line):\(first.location.column)", at,
                         hint: "consumers of the topic could not tell the two kinds of records apart")
                } else {
                    writers[topic] = (stage.kind, at)
                }
            }
        }
        for output in spec.outputs where output.kind == "dead_letter" {
            guard let topicNode = output.node["topic"], let topic = topicNode.string else { continue }
            let enrichedTopics = spec.outputs.filter { $0.kind == "enriched" }.compactMap { $0.node["topic"]?.string }
            if topic == "events.enriched" || enrichedTopics.contains(topic) {
                warn("dead letters go to '\(topic)', the topic of enriched events", topicNode.location,
                     hint: "dead letters belong in a topic of their own, e.g. events.dlq")
            }
        }

        // Stage orders that cannot work.
        let kinds = spec.stages.map(\.kind)
        func firstIndex(_ kind: String) -> Int? { kinds.firstIndex(of: kind) }
        if let windows = firstIndex("windows"), let match = firstIndex("match"), windows < match {
            warn("'windows' runs before 'match': it counts rule hits that 'match' has not found yet",
                 spec.stages[windows].kindLocation, hint: "put 'match' before 'windows'")
        }
        if let noise = firstIndex("noise_filter"), let match = firstIndex("match"), noise > match {
            warn("'noise_filter' runs after 'match': the noise it drops has been matched against the rules already",
                 spec.stages[noise].kindLocation, hint: "put 'noise_filter' before 'match'")
        }
        if let validate = firstIndex("validate"), validate > 0 {
            warn("'\(kinds[0])' runs before 'validate': it sees events that validation would drop or repair",
                 spec.stages[0].kindLocation, hint: "put 'validate' first")
        }

        // Timeouts a broker or the worker cannot keep.
        let session = spec.source.sessionTimeout.milliseconds
        if session < 6_000 || session > 1_800_000 {
            warn("session_timeout \(ConfigDuration(milliseconds: session)) is outside what brokers accept by default (6s to 30m)",
                 spec.source.sessionTimeoutLocation,
                 hint: "brokers reject it unless group.min.session.timeout.ms / group.max.session.timeout.ms allow it; 10s to 45s is usual")
        }
        return warnings
    }
}
