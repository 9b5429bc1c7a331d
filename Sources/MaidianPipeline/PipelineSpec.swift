import Foundation
import MaidianEvents

/// A pipeline file: where records come from, the stages in order, and the outputs. See `pipelines/README.md`.
public struct PipelineSpec: Sendable {
    /// A name for logs and metrics.
    public var name: String
    /// The file it was read from.
    public var file: String
    /// Directory of `file`, to resolve relative paths in stage configs.
    public var baseDirectory: String
    /// `source:`: the raw topic, its brokers and consumer group, and how records are read.
    public var source: SourceSpec
    /// Transform stages, in order.
    public var stages: [StageSpec]
    /// Output stages, run after every transform stage.
    public var outputs: [StageSpec]
    /// Extra librdkafka producer properties.
    public var producerKafka: [String: String]
    /// `metrics:`: where `maidian run` serves Prometheus metrics and health checks; nil when the file has
    /// no such section.
    public var metrics: MetricsSpec?
    /// Where the file says `outputs:` (else its start), for ``requireOutputs()``.
    public var outputsLocation: SourceLocation
    /// `producer.kafka:` as written, for locating problems with its properties.
    public var producerKafkaNode: ConfigNode?
    /// `roles:`: the event names of each role, the same for every stage (`StageContext.roles`).
    public var roles = EventRoles()

    /// Reads and checks the structure of a pipeline file (stage configs are checked when the engine is built).
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> PipelineSpec {
        let root = try ConfigDocument.load(path: path, environment: environment)
        return try from(root, file: path, environment: environment)
    }

    /// Parses pipeline YAML text (tests, embedded pipelines).
    public static func parse(yaml: String, file: String = "pipeline.yaml", environment: [String: String] = [:]) throws -> PipelineSpec {
        let root = try ConfigDocument.parse(yaml: yaml, file: file, environment: environment)
        return try from(root, file: file, environment: environment)
    }

    static func from(_ root: ConfigNode, file: String, environment: [String: String] = [:]) throws -> PipelineSpec {
        let (spec, errors) = collecting(root, file: file, environment: environment)
        if let error = PipelineErrors.combined(errors) { throw error }
        return spec!
    }

    /// Reads a pipeline file as far as it can, for `maidian check`: the spec (`nil` when the file cannot
    /// be parsed; with defaults where there are errors) and every problem found, sorted by location.
    public static func lint(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> (spec: PipelineSpec?, errors: [PipelineError]) {
        do {
            let (root, documentErrors) = try ConfigDocument.loadCollecting(path: path, environment: environment)
            if root.isNull { return (nil, [emptyFileError(root)]) }
            let (spec, errors) = collecting(root, file: path, environment: environment)
            return (spec, PipelineErrors.sortedUnique(documentErrors + errors))
        } catch {
            return (nil, PipelineErrors.flatten(error))
        }
    }

    static func emptyFileError(_ root: ConfigNode) -> PipelineError {
        PipelineError(
            code: .invalid, message: "the file is empty", location: root.location,
            hint: "a pipeline has at least 'source:', 'stages:' and 'outputs:'; see pipelines/app-analytics.yaml")
    }

    static func collecting(_ root: ConfigNode, file: String, environment: [String: String]) -> (PipelineSpec?, [PipelineError]) {
        var errors: [PipelineError] = []
        if root.isNull { errors.append(emptyFileError(root)) }
        let decoded = ConfigDecoder(userInfo: [SecuritySpec.environmentKey: environment])
            .decodeCollecting(PipelineFile.self, from: root)
        errors += decoded.errors
        let top = decoded.value ?? PipelineFile()
        func stageSpecs(_ nodes: [ConfigNode]) -> [StageSpec] {
            nodes.compactMap { node in
                guard node.isMapping else {
                    errors.append(PipelineError(code: .badType, message: "expected a mapping with 'kind:'", location: node.location))
                    return nil
                }
                guard let kind = node["kind"]?.string else {
                    errors.append(PipelineError(code: .missingKey, message: "missing key 'kind'", location: node.location, hint: "every stage names its kind, e.g. 'kind: validate'"))
                    return nil
                }
                return StageSpec(kind: kind, kindLocation: node["kind"]?.location ?? node.location, node: node)
            }
        }
        let stages = stageSpecs(top.stages ?? [])
        let outputs = stageSpecs(top.outputs ?? [])
        let dir = (file as NSString).deletingLastPathComponent
        var source = top.source ?? SourceSpec()
        // The producer reaches the same cluster as the consumer unless it says otherwise.
        let producerSecurity = top.producer?.security ?? source.security
        var producerKafka = top.producer?.kafka ?? [:]
        if let security = source.security {
            errors += security.checkFiles(baseDirectory: dir)
            source.kafka.merge(security.properties(baseDirectory: dir)) { written, _ in written }
        }
        if let security = producerSecurity {
            if top.producer?.security != nil { errors += security.checkFiles(baseDirectory: dir) }
            producerKafka.merge(security.properties(baseDirectory: dir)) { written, _ in written }
        }
        var spec = PipelineSpec(
            name: top.name ?? ((file as NSString).lastPathComponent as NSString).deletingPathExtension,
            file: file, baseDirectory: dir, source: source, stages: stages, outputs: outputs,
            producerKafka: producerKafka, metrics: top.metrics,
            outputsLocation: root.location(ofKey: "outputs") ?? SourceLocation(file: file, line: 1, column: 1),
            producerKafkaNode: top.producer?.kafkaNode)
        spec.roles = top.roles?.roles ?? EventRoles()
        return (spec, PipelineErrors.sortedUnique(errors))
    }

    /// Every librdkafka property the file sets in `source.kafka` and `producer.kafka`, with where it is
    /// written, for checking names and values (`maidian check`).
    public var writtenKafkaProperties: [WrittenKafkaProperty] {
        func from(_ node: ConfigNode?, _ client: WrittenKafkaProperty.Client) -> [WrittenKafkaProperty] {
            (node?.entries ?? []).compactMap { e in
                guard let value = e.value.string else { return nil }
                return WrittenKafkaProperty(
                    client: client, name: e.key, value: value, nameLocation: e.keyLocation, valueLocation: e.value.location)
            }
        }
        return from(source.kafkaNode, .consumer) + from(producerKafkaNode, .producer)
    }

    /// Refuses a pipeline without outputs: it would run and write nothing, not even dead letters. `check`,
    /// `run`, `bench`, `replay` and workers call it; tests of single stages build such pipelines on purpose.
    ///
    /// - Throws: ``PipelineError`` `.missingKey` located at `outputs:` (or the file's start).
    public func requireOutputs() throws {
        guard outputs.isEmpty else { return }
        throw PipelineError(
            code: .missingKey, message: "the pipeline has no outputs: it would write nothing, not even dead letters",
            location: outputsLocation, hint: "add e.g. 'outputs: [{kind: enriched}, {kind: dead_letter}]'")
    }

    /// The output topics the pipeline writes (each output stage's `topic:`), for creating them on an
    /// embedded broker.
    public var outputTopics: [String] {
        outputs.compactMap { $0.node["topic"]?.string }
    }

    /// The internal topic of a repartitioning stage that names none: `<group>.partials`, with characters
    /// Kafka does not allow in topic names replaced.
    public static func defaultPartialsTopic(group: String) -> String {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        return String(group.map { allowed.contains($0) ? $0 : "_" }) + ".partials"
    }
}

/// One stage entry of a pipeline: its kind and its YAML mapping (decoded by the stage's own `Config`).
public struct StageSpec: Sendable {
    /// The stage's `kind:` value.
    public var kind: String
    /// Where `kind:` is written, for messages about the stage.
    public var kindLocation: SourceLocation
    /// The stage's whole YAML mapping, `kind` included.
    public var node: ConfigNode
}

/// `source:`: the raw topic and how to read it.
public struct SourceSpec: Decodable, Sendable {
    /// `embedded` starts librdkafka's mock cluster in-process; otherwise a bootstrap list `host:port,...`.
    public var brokers: String = "embedded"
    /// The raw topic the worker consumes.
    public var topic: String = "events.raw"
    /// Kafka consumer group id; workers of one group share the raw topic's partitions.
    public var group: String = "maidian"
    /// Partitions of the raw topic when the broker is embedded.
    public var partitions: Int = 8
    /// Consumer group session timeout.
    public var sessionTimeout: ConfigDuration = ConfigDuration(milliseconds: 10_000)
    /// Most records per poll.
    public var maxBatch: Int = 250
    /// Threads that decode a batch: the worker thread, which scans the records in order, and `decode_threads - 1`
    /// helpers that decompress zstd values beside it. 1 decodes on the worker thread alone.
    public var decodeThreads: Int = 2
    /// A worker whose processing loop completes no iteration for this long is stuck: it exits with status 3
    /// (the group would not evict it: librdkafka keeps heartbeating). See docs/recovery.md.
    public var livenessTimeout: ConfigDuration = ConfigDuration(milliseconds: 120_000)
    /// `limits:`: per-record and per-batch size bounds (wire format §1 defaults).
    public var limits: RecordLimits = RecordLimits()
    /// Extra librdkafka consumer properties (they win over Maidian's). After loading, the properties of
    /// `security:` are in here too (under the ones written in `kafka:`).
    public var kafka: [String: String] = [:]
    /// `security:`: how to reach a secured cluster (TLS, SASL).
    public var security: SecuritySpec?
    /// `kafka:` as written, for locating problems with its properties.
    public var kafkaNode: ConfigNode?
    /// Where `session_timeout` is written, if it is.
    public var sessionTimeoutLocation: SourceLocation?

    enum CodingKeys: String, CodingKey {
        case brokers, topic, group, partitions, limits, kafka, security
        case sessionTimeout = "session_timeout", maxBatch = "max_batch", livenessTimeout = "liveness_timeout"
        case decodeThreads = "decode_threads"
    }

    /// The defaults: embedded broker, `events.raw`, group `maidian`.
    public init() {}

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        brokers = try c.decodeIfPresent(String.self, forKey: .brokers) ?? brokers
        topic = try c.decodeIfPresent(String.self, forKey: .topic) ?? topic
        group = try c.decodeIfPresent(String.self, forKey: .group) ?? group
        partitions = try c.decodeIfPresent(Int.self, forKey: .partitions) ?? partitions
        sessionTimeout = try c.decodeIfPresent(ConfigDuration.self, forKey: .sessionTimeout) ?? sessionTimeout
        sessionTimeoutLocation = c.contains(.sessionTimeout) ? decoder.configLocation(forKey: CodingKeys.sessionTimeout) : nil
        maxBatch = try c.decodeIfPresent(Int.self, forKey: .maxBatch) ?? maxBatch
        livenessTimeout = try c.decodeIfPresent(ConfigDuration.self, forKey: .livenessTimeout) ?? livenessTimeout
        decodeThreads = try c.decodeIfPresent(Int.self, forKey: .decodeThreads) ?? decodeThreads
        limits = try c.decodeIfPresent(LimitsSpec.self, forKey: .limits)?.limits ?? limits
        kafka = try c.decodeIfPresent([String: String].self, forKey: .kafka) ?? kafka
        security = try c.decodeIfPresent(SecuritySpec.self, forKey: .security)
        kafkaNode = decoder.configNode?["kafka"]
        if partitions < 1 { try decoder.report(decoder.fail("partitions must be at least 1", forKey: CodingKeys.partitions, code: .badValue)) }
        if maxBatch < 1 { try decoder.report(decoder.fail("max_batch must be at least 1", forKey: CodingKeys.maxBatch, code: .badValue)) }
        if decodeThreads < 1 || decodeThreads > 8 {
            try decoder.report(decoder.fail("decode_threads must be between 1 and 8", forKey: CodingKeys.decodeThreads, code: .badValue))
        }
        if livenessTimeout.milliseconds <= 0 {
            try decoder.report(decoder.fail("liveness_timeout must be positive", forKey: CodingKeys.livenessTimeout, code: .badValue))
        }
    }
}

/// `source.limits:` (wire format §1).
struct LimitsSpec: Decodable {
    var limits = RecordLimits()
    enum CodingKeys: String, CodingKey {
        case maxRecordBytes = "max_record_bytes", maxDecompressedBytes = "max_decompressed_bytes", maxEventsPerRecord = "max_events_per_record"
        case maxBatchBytes = "max_batch_bytes"
    }
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        if let v = try c.decodeIfPresent(ByteSize.self, forKey: .maxRecordBytes) { limits.maxCompressedBytes = Int(v.bytes) }
        if let v = try c.decodeIfPresent(ByteSize.self, forKey: .maxDecompressedBytes) { limits.maxDecompressedBytes = Int(v.bytes) }
        if let v = try c.decodeIfPresent(Int.self, forKey: .maxEventsPerRecord) { limits.maxEventsPerRecord = v }
        if let v = try c.decodeIfPresent(ByteSize.self, forKey: .maxBatchBytes) { limits.maxBatchBytes = Int(v.bytes) }
        // A batch's arenas are addressed with 32-bit offsets: one record and one batch stay well below 2 GiB.
        if limits.maxDecompressedBytes > 1 << 30 || limits.maxCompressedBytes > 1 << 30 {
            throw PipelineError(code: .badValue, message: "max_record_bytes and max_decompressed_bytes must be at most 1GiB")
        }
        if limits.maxBatchBytes < 1 || limits.maxBatchBytes > 512 << 20 {
            throw PipelineError(code: .badValue, message: "max_batch_bytes must be between 1 byte and 512MiB")
        }
    }
}

/// `producer:`.
struct ProducerSpec: Decodable {
    var kafka: [String: String]?
    var security: SecuritySpec?
    var kafkaNode: ConfigNode?

    enum CodingKeys: String, CodingKey { case kafka, security }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        kafka = try c.decodeIfPresent([String: String].self, forKey: .kafka)
        security = try c.decodeIfPresent(SecuritySpec.self, forKey: .security)
        kafkaNode = decoder.configNode?["kafka"]
    }
}

/// One librdkafka property written in a pipeline file.
public struct WrittenKafkaProperty: Sendable {
    /// Which client gets it.
    public enum Client: String, Sendable { case consumer, producer }
    /// `source.kafka` is the consumer's, `producer.kafka` the producer's.
    public var client: Client
    /// The property name.
    public var name: String
    /// Its value, as text.
    public var value: String
    /// Where the name is written.
    public var nameLocation: SourceLocation
    /// Where the value is written.
    public var valueLocation: SourceLocation
}

/// The top level of a pipeline file.
struct PipelineFile: Decodable {
    var name: String?
    var source: SourceSpec?
    var stages: [ConfigNode]?
    var outputs: [ConfigNode]?
    var producer: ProducerSpec?
    var metrics: MetricsSpec?
    var roles: RolesSpec?
}

/// `roles:`: the event names of each role (wire format §3), for every stage of the pipeline. Keys left
/// out keep their defaults; a list no stage can honour (`EventRoles.problems()`) is reported at its key.
struct RolesSpec: Decodable {
    var roles = EventRoles()

    init(from decoder: any Decoder) throws {
        enum CodingKeys: String, CodingKey { case page_enter, page_leave, click, app_start, app_end, crash }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        for kind in RoleKind.allCases {
            let key = CodingKeys(rawValue: kind.key)!
            if let names = try c.decodeIfPresent([String].self, forKey: key) { roles[kind] = names }
        }
        for problem in roles.problems() {
            try decoder.report(decoder.fail(
                problem.message, forKey: CodingKeys(rawValue: problem.role.key)!,
                hint: "each event name belongs to one role; defaults: page_enter [$AppViewScreen, enter_view], page_leave [$AppPageLeave, leave_view], click [$AppClick]",
                code: .badValue))
        }
    }
}

/// `metrics:`: the HTTP endpoint of a worker (`/metrics` in Prometheus text format, `/health/live`,
/// `/health/ready`).
public struct MetricsSpec: Decodable, Sendable {
    /// TCP port; 0 picks a free one (the log says which).
    public var port: Int
    /// Address to listen on.
    public var host: String = "0.0.0.0"
    /// How often librdkafka reports statistics (consumer lag); `statistics.interval.ms` in `source.kafka` wins.
    public var statisticsInterval: ConfigDuration = .milliseconds(5000)

    enum CodingKeys: String, CodingKey {
        case port, host
        case statisticsInterval = "statistics_interval"
    }

    /// An endpoint on `host:port` with the default statistics interval (5 s).
    public init(port: Int, host: String = "0.0.0.0") {
        self.port = port
        self.host = host
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        port = try c.decode(Int.self, forKey: .port)
        host = try c.decodeIfPresent(String.self, forKey: .host) ?? host
        statisticsInterval = try c.decodeIfPresent(ConfigDuration.self, forKey: .statisticsInterval) ?? statisticsInterval
        if !(0...65535).contains(port) {
            try decoder.report(decoder.fail("metrics.port must be in 0...65535", forKey: CodingKeys.port, code: .badValue))
        }
    }
}
