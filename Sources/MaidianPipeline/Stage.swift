import Logging
import Synchronization
import MaidianEvents

/// A pipeline stage: a plugin that data engineers place in a pipeline's YAML by its `kind`.
///
/// A stage works on a whole batch at a time (loop over `0 ..< batch.eventCount` inside; no per-event calls through
/// the protocol) and changes events in place: it drops or rejects them (`batch.drop(i)`, `batch.fail(i, reason:)`), fixes properties, adds
/// properties, or writes outputs. The engine, not the stage, counts what each stage received, emitted,
/// dropped and failed.
///
/// Adding a stage means: one file with the type and its `Config`, one line in `BuiltinStages.all`, a test
/// and an example. A team can add its own stage in its own build: see `docs/custom-stage.md`.
public protocol Stage: AnyObject, SendableMetatype {
    /// The stage's options, decoded from its YAML mapping (unknown keys are rejected with file:line:column).
    associatedtype Config: Decodable & SendableMetatype

    /// The `kind:` name in YAML, `snake_case`.
    static var kind: String { get }

    /// One line for `maidian stages` and the docs.
    static var summary: String { get }

    init(config: Config, context: StageContext) throws

    /// Processes a batch. Outputs go to `output`.
    func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws

    /// Partitions of the source topic this worker no longer holds: drop their state.
    func partitionsRevoked(_ partitions: [Int32])

    /// The end of a bounded run (`--until-end`) or of a benchmark: write out all state.
    func finish(output: inout OutputBuffer) throws

    /// How far behind a partition's newest event time (ms) this stage's state can reach: after a takeover,
    /// the engine re-reads input from where event time was that far behind, so that the stage's state is
    /// rebuilt (see docs/recovery.md). 0 for stateless stages.
    var stateHorizon: Int64 { get }

    /// Topics the stage writes besides an output's `topic:` (created on an embedded broker).
    var outputTopics: [String] { get }

    /// A partition is about to be re-read from a checkpoint: `maxEventTime` is the newest event time the
    /// partition had seen just before the first re-read record (nil: none).
    func restore(partition: Int32, maxEventTime: Int64?)
}

extension Stage {
    /// Default: nothing to drop (a stateless stage).
    public func partitionsRevoked(_ partitions: [Int32]) {}
    /// Default: nothing to write out.
    public func finish(output: inout OutputBuffer) throws {}
    /// Default: 0, no state to rebuild after a takeover.
    public var stateHorizon: Int64 { 0 }
    /// Default: none besides the outputs' own topics.
    public var outputTopics: [String] { [] }
    /// Default: nothing to restore.
    public func restore(partition: Int32, maxEventTime: Int64?) {}
}

/// One record of an internal (repartition) topic, for a `PartialMerger`.
public struct InternalRecord: Sendable {
    /// Partition of the internal topic the record was read from.
    public var partition: Int32
    /// Offset of the record in that partition.
    public var offset: Int64
    /// The record key as written by the repartitioning stage.
    public var key: [UInt8]
    /// The record value: serialized partial results.
    public var value: [UInt8]
    /// Index of the record in the worker's batch (outputs derived from it carry it).
    public var index: Int32
    /// Re-read only to rebuild state (see `InputRecord.replay`).
    public var replay: Bool
    /// A record read from the internal topic; `replay` when it is re-read only to rebuild state.
    public init(partition: Int32, offset: Int64, key: [UInt8], value: [UInt8], index: Int32, replay: Bool = false) {
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.index = index
        self.replay = replay
    }
}

/// A stage that needs a second, keyed phase across workers (like Kafka Streams' repartitioning): it writes
/// partial results to an internal topic, and whichever worker holds an internal partition merges them.
public protocol Repartitioning: AnyObject {
    /// The internal topic, if the pipeline names one (else the worker derives one from the group).
    var partialsTopic: String? { get }
    /// Wiring, before the first batch: the internal topic, its partition count, and the source's.
    func connect(partialsTopic: String, partialsPartitions: Int32, sourcePartitions: Int32)
    /// The merger for internal partitions held by this worker.
    var merger: any PartialMerger { get }
    /// Called between batches with the source partitions the worker holds (idle detection, bounded runs).
    func tick(held: [Int32], output: inout OutputBuffer)
}

/// Merges partial results read from an internal topic (see `Repartitioning`).
public protocol PartialMerger: AnyObject {
    /// Reads internal records and writes what became final to `output` (attributed to the record index).
    func process(_ records: [InternalRecord], output: inout OutputBuffer) throws
    /// The oldest message of `partition` still needed to rebuild the merger's state (nil: none held): its
    /// record's offset and its item in that record (0 unless the record bundles several messages).
    func replayFrom(partition: Int32) -> (offset: Int64, item: Int32)?
    /// How far `partition`'s output is final: every window ending at or before it was written (nil: none).
    /// Committed beside the offset (as `max_time`), because the messages that moved it may lie before
    /// `replayFrom`.
    func writtenUpTo(partition: Int32) -> Int64?
    /// `partition` is about to be re-read from `point`, committed by a checkpoint that had written every
    /// window ending at or before `point.maxEventTime`.
    func restore(partition: Int32, from point: ReplayPoint)
    /// Whether everything of `partition` is final and written (bounded runs end only then).
    func isComplete(partition: Int32) -> Bool
    /// Internal partitions this worker no longer holds.
    func partitionsRevoked(_ partitions: [Int32])
    /// Named counts for logs and metrics (late partials and the like).
    var counters: [StageCounter] { get }
}

/// A counter a stage owns and the engine reports (for example `duplicates`), or a gauge (a level such as a
/// rule-set version) when registered with `StageContext.gauge(_:)`.
/// The worker thread adds; metrics may read from another thread, hence a relaxed atomic (an uncontended
/// `lock xadd`: negligible next to the work counted).
public final class StageCounter: Sendable {
    private let storage = Atomic<Int>(0)
    /// The counter's name within its stage (reported as `<kind>.<name>`).
    public let name: String
    /// A gauge goes up and down (`set`); a counter only grows. Metrics export them as such.
    public let isGauge: Bool
    /// A counter at 0, or a gauge when `isGauge`; `StageContext.counter(_:)` makes and registers one.
    public init(name: String, isGauge: Bool = false) {
        self.name = name
        self.isGauge = isGauge
    }
    /// The current count.
    public var value: Int { storage.load(ordering: .relaxed) }
    /// Adds `n` (wrapping on overflow); safe from any thread.
    @inline(__always) public func add(_ n: Int = 1) { storage.wrappingAdd(n, ordering: .relaxed) }
    /// Sets the level of a gauge.
    @inline(__always) public func set(_ n: Int) { storage.store(n, ordering: .relaxed) }
}

/// Where stages read processing time: wall-time throttles (`late_flush`), idle detection (`idle_timeout`),
/// timed health checks. A worker's runs on the wall clock; an offline run over a recording (`maidian bench`,
/// `maidian test`, `rules test`) on a clock that stands still, so that its outputs depend on its input alone
/// and not on how fast the machine is: nothing wall-timed fires during the run, and what it would have
/// written comes at the end of the input, as in a run shorter than every such period.
public struct ProcessingClock: Sendable {
    @usableFromInline let frozenAt: ContinuousClock.Instant?

    /// The wall clock (a worker).
    public static var live: ProcessingClock { ProcessingClock(frozenAt: nil) }
    /// A clock that stands still at the moment it is made (an offline run).
    public static func frozen() -> ProcessingClock { ProcessingClock(frozenAt: .now) }

    /// Whether this clock stands still.
    public var isFrozen: Bool { frozenAt != nil }
    /// The current processing time.
    @inlinable public var now: ContinuousClock.Instant { frozenAt ?? ContinuousClock.now }
}

/// What a stage gets when it is built.
public final class StageContext {
    /// The pipeline's logger, with the stage's kind as metadata.
    public var logger: Logger
    /// Directory of the pipeline file, to resolve relative paths in stage configs.
    public let baseDirectory: String
    /// Position of the stage in the pipeline (for messages).
    public let position: String
    /// Counters the stage registers; the engine reports them.
    public private(set) var counters: [StageCounter] = []
    /// The pipeline's `roles:` (which event names are page views, leaves, clicks, ...): every stage that
    /// cares takes them from here, none has its own.
    public let roles: EventRoles
    /// Where the stage reads processing time (never `ContinuousClock.now` directly: an offline run's
    /// outputs must not depend on the machine's speed).
    public let clock: ProcessingClock

    /// A context for building one stage; `clock` is `.frozen()` for offline runs over a recording.
    public init(logger: Logger, baseDirectory: String, position: String, roles: EventRoles = EventRoles(), clock: ProcessingClock = .live) {
        self.logger = logger
        self.baseDirectory = baseDirectory
        self.position = position
        self.roles = roles
        self.clock = clock
    }

    /// Registers a named counter (reported as `<kind>.<name>`; metrics: `maidian_<kind>_<name>_total`).
    public func counter(_ name: String) -> StageCounter {
        let c = StageCounter(name: name)
        counters.append(c)
        return c
    }

    /// Registers a named gauge, a level the stage `set`s (e.g. the loaded rule-set version; metrics:
    /// `maidian_<kind>_<name>`).
    public func gauge(_ name: String) -> StageCounter {
        let c = StageCounter(name: name, isGauge: true)
        counters.append(c)
        return c
    }

    /// Resolves a path relative to the pipeline file's directory.
    public func resolvePath(_ path: String) -> String {
        if path.hasPrefix("/") || baseDirectory.isEmpty { return path }
        return baseDirectory + "/" + path
    }
}

/// How to build one kind of stage from its YAML mapping.
public struct StageFactory: Sendable {
    /// The stage's `kind:` name in YAML (`Stage.kind`).
    public let kind: String
    /// The stage's one-line description (`Stage.summary`).
    public let summary: String
    /// The declared settings (``DeclaredSettings``); nil for a stage that declares none.
    public let settings: ConfigSpec?
    let make: @Sendable (ConfigNode, StageContext) throws -> any Stage
    let decodeConfig: @Sendable (ConfigNode) throws -> Void

    /// A factory for a stage type.
    public init<S: Stage>(_ type: S.Type) {
        self.kind = S.kind
        self.summary = S.summary
        self.settings = (S.Config.self as? any DeclaredSettings.Type)?.settings
        self.make = { node, context in
            let config = try node.decode(S.Config.self, ignoringKeys: ["kind"])
            return try S(config: config, context: context)
        }
        self.decodeConfig = { node in _ = try node.decode(S.Config.self, ignoringKeys: ["kind"]) }
    }

    /// Decodes the stage's settings from its YAML mapping without building the stage (no files opened).
    public func checkSettings(_ node: ConfigNode) throws {
        try decodeConfig(node)
    }

    /// Builds the stage from its YAML mapping.
    public func build(_ node: ConfigNode, context: StageContext) throws -> any Stage {
        try make(node, context)
    }
}

/// The kinds a pipeline can name: the built-in list plus whatever a custom build registers.
public struct StageRegistry: Sendable {
    /// The registered factories by kind.
    public private(set) var factories: [String: StageFactory] = [:]
    /// The registered kinds in registration order (how `maidian stages` lists them).
    public private(set) var order: [String] = []

    /// A registry of `factories` (for the built-in list, `BuiltinStages.all`).
    public init(_ factories: [StageFactory] = []) {
        for f in factories { register(f) }
    }

    /// Adds a kind; a later registration of the same kind replaces the earlier one.
    public mutating func register(_ factory: StageFactory) {
        if factories[factory.kind] == nil { order.append(factory.kind) }
        factories[factory.kind] = factory
    }

    /// Adds a stage type.
    public mutating func register<S: Stage>(_ type: S.Type) {
        register(StageFactory(type))
    }

    /// The factory of `kind`, or nil when no stage of that kind is registered.
    public func factory(for kind: String) -> StageFactory? { factories[kind] }
}
