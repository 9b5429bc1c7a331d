import ArgumentParser
import Foundation
import Logging
import MaidianPipeline
import MaidianRuntime
import MaidianStages
import ServiceLifecycle
import Synchronization

/// `maidian replay PIPELINE.yaml --from TIME [--to TIME] [--output-suffix S]`: the pipeline over a time range
/// of the raw topic's history, under its own consumer group, into separate output topics.
struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Run a pipeline over the raw topic's records from a time on, into separate output topics.",
        discussion: """
            Reads the raw topic again from the first record with a timestamp at or after --from, under a consumer \
            group of its own, and writes every output to its topic's name plus --output-suffix, so new rules apply \
            to old data beside the live job. Stops once each partition passed --to (by record timestamp) or reached \
            the end offset it had at the start, then finishes like `run --until-end` (state written out, offsets \
            committed). The output topics must exist or be auto-created by the brokers. TIME is ISO-8601 \
            (2025-11-21T04:40:00Z, 2025-11-21T12:40:00.500+08:00, 2025-11-21) or milliseconds since the epoch.

            With --rules-changed-since OLD_RULES (a backfill), the match stage matches only the rules added or \
            changed between OLD_RULES and its rules file, and their counts go into the live counts topic \
            (--counts-topic) under their own keys: the keys of the other rules are not written. The other outputs \
            still get --output-suffix. Start --from at a window boundary: the first window's counts are those of \
            the records read.
            """)

    @Argument(help: "The pipeline YAML file.") var pipeline: String
    @Option(help: "Start: ISO-8601 or epoch ms; the first record at or after it is read first.") var from: String
    @Option(help: "End (inclusive): ISO-8601 or epoch ms. Default: the end offsets at the start.") var to: String?
    @Option(help: "Appended to every output topic name; must not be empty.") var outputSuffix: String = ".replay"
    @Option(help: "Consumer group of the replay (default: <source.group>.replay-<from in ms>).") var group: String?
    @Flag(help: "Start at --from even when the replay group already committed offsets (default: resume from them).")
    var restart = false
    @Option(help: "Backfill: recompute only the rules added or changed since this older rules file, into the live counts topic.")
    var rulesChangedSince: String?
    @Option(help: "With --rules-changed-since: the live counts topic written without --output-suffix.") var countsTopic = "metrics.counts"
    @Option(help: "Serve Prometheus /metrics and /health on this port (as `run`).") var metricsPort: Int?
    @Option(help: "Progress display: auto (a bar when standard error is a terminal, else a log line every 10 s), bar, lines, off.")
    var progress: ProgressMode = .auto
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard !outputSuffix.isEmpty else {
            throw ValidationError("--output-suffix must not be empty: a replay does not write into the live output topics")
        }
        guard ReplayTime.parse(from) != nil else { throw ValidationError("--from: '\(from)' is not ISO-8601 or epoch ms") }
        if let to {
            guard let t = ReplayTime.parse(to) else { throw ValidationError("--to: '\(to)' is not ISO-8601 or epoch ms") }
            guard t >= ReplayTime.parse(from)! else { throw ValidationError("--to is before --from") }
        }
    }

    func run() async throws {
        let logger = global.makeLogger("maidian")
        var (spec, engine) = try loadPipeline(pipeline, logger: logger)
        let properties = try kafka.resolved()
        spec.source.kafka.merge(properties) { _, commandLine in commandLine }
        spec.producerKafka.merge(properties) { _, commandLine in commandLine }
        if let b = properties["bootstrap.servers"] { spec.source.brokers = b }
        if let old = rulesChangedSince {
            do {
                spec = try MatchStage.backfill(spec, changedSince: old)
                engine = try PipelineEngine(spec: spec, registry: stageRegistry, logger: logger)
            } catch {
                reportPipelineError(error)
                throw ExitCode(1)
            }
            let m = engine.stages.compactMap { $0 as? MatchStage }.first!
            let ids = m.matcher.rules.pages.map(\.id) + m.matcher.rules.elements.map(\.id) + m.matcher.rules.actions.map(\.id)
            guard !ids.isEmpty else {
                logger.notice("no rule was added or changed since \(old): nothing to backfill")
                return
            }
            logger.notice("backfill of \(ids.count) rules added or changed since \(old) into \(countsTopic): \(ids.joined(separator: ", "))")
        }
        guard spec.source.brokers != "embedded" else {
            var stderr = StandardError()
            print("replay needs the brokers that hold the history: set source.brokers (or MAIDIAN_BROKERS, or -X bootstrap.servers)", to: &stderr)
            throw ExitCode(1)
        }
        if let partials = engine.repartitioning?.partialsTopic {
            var stderr = StandardError()
            print("the pipeline names its internal partials topic '\(partials)': a replay would merge its windows into the live job's. "
                  + "Leave partials_topic out (a replay then uses '<its group>.partials') or replay with a copy of the pipeline without it", to: &stderr)
            throw ExitCode(1)
        }
        let fromMillis = ReplayTime.parse(from)!
        let toMillis = to.flatMap(ReplayTime.parse)
        let replayGroup = group ?? ReplayPlan.defaultGroup(liveGroup: spec.source.group, from: fromMillis)
        let source = spec.source
        let restart = restart
        let planStart = ContinuousClock.now
        let internalTopic = engine.repartitioning.map { _ in PipelineSpec.defaultPartialsTopic(group: replayGroup) }
        let plan = try await runOnThread {
            try ReplayPlan.make(
                bootstrap: source.brokers, topic: source.topic, group: replayGroup, from: fromMillis, to: toMillis,
                restart: restart, internalTopic: internalTopic, kafka: source.kafka, logger: logger)
        }
        let outputs = Set(spec.outputTopics + engine.stages.flatMap(\.outputTopics)).sorted().map { $0 + outputSuffix }
        logger.notice(
            "replay of \(source.topic) from \(ReplayTime.describe(fromMillis)) to \(toMillis.map(ReplayTime.describe) ?? "the end offsets"): \(plan.records) records in \(plan.partitions.count) partitions (planned in \(GenCommand.seconds((ContinuousClock.now - planStart).milliseconds)) s), group \(replayGroup), writing to \(outputs.joined(separator: ", "))\(internalTopic.map { ", partial counts through \($0)" } ?? "")")

        spec.source.group = replayGroup
        var options = WorkerOptions()
        options.untilEnd = true
        options.maxBatch = spec.source.maxBatch
        options.stopOffsets = plan.stopOffsets
        options.outputTopicSuffix = outputSuffix
        if rulesChangedSince != nil { options.liveTopics = [countsTopic] }
        let mode = progress == .auto ? (isatty(2) != 0 ? ProgressMode.bar : .lines) : progress
        let started = ContinuousClock.now
        let status = try await WorkerLauncher(spec: spec, bootstrap: spec.source.brokers, options: options, metricsPort: metricsPort, logger: logger)
            .run { status in
                mode == .off ? [] : [ReplayProgressService(status: status, total: plan.records, mode: mode, logger: logger)]
            }
        let records = status.counters?.records.value ?? 0
        logger.notice("replay finished: \(records) records in \(GenCommand.seconds((ContinuousClock.now - started).milliseconds)) s")
    }
}

/// `--progress`.
enum ProgressMode: String, CaseIterable, ExpressibleByArgument, Sendable {
    case auto, bar, lines, off
}

/// Shows a replay's progress until the group shuts down: a bar redrawn in place on a terminal, or a log
/// line every 10 s.
struct ReplayProgressService: Service {
    let status: WorkerStatus
    let total: Int64
    let mode: ProgressMode
    let logger: Logger

    func run() async throws {
        let (status, total) = (self.status, self.total)
        let every: Duration = mode == .bar ? .milliseconds(250) : .seconds(10)
        let meter = Mutex(RateMeter())
        @Sendable func current() -> ReplayProgress {
            let done = Int64(status.counters?.records.value ?? 0)
            return ReplayProgress(done: done, total: total, rate: meter.withLock { $0.add(done, at: .now) })
        }
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: every)
                show(current())
            }
        }
        if mode == .bar {
            show(current())
            StandardErrorLines.write("\n")
        }
    }

    private func show(_ p: ReplayProgress) {
        switch mode {
        // Back to column 0 after the bar: a log line written meanwhile overwrites it instead of trailing it.
        case .bar: StandardErrorLines.write("\r\u{1B}[K" + p.bar() + "\r")
        default: logger.info("\(p.line)", metadata: ["done": "\(p.done)", "total": "\(p.total)"])
        }
    }
}

/// Times on the command line: ISO-8601 or milliseconds since the epoch.
enum ReplayTime {
    static func parse(_ text: String) -> Int64? {
        if !text.isEmpty, text.allSatisfy(\.isASCII), text.allSatisfy(\.isNumber) { return Int64(text) }
        let withFraction = ISO8601DateFormatter()
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        for f in [withFraction, plain, day] {
            if let d = f.date(from: text) { return Int64((d.timeIntervalSince1970 * 1000).rounded()) }
        }
        return nil
    }

    static func describe(_ ms: Int64) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
    }
}

/// Runs blocking work (Kafka lookups) on a thread of its own, off Swift's cooperative pool.
func runOnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (cont: CheckedContinuation<T, any Error>) in
        let thread = Thread {
            do { cont.resume(returning: try body()) } catch { cont.resume(throwing: error) }
        }
        thread.name = "maidian-blocking"
        thread.start()
    }
}
