import ArgumentParser
import Foundation
import Logging
import MaidianPipeline
import MaidianRuntime
import MaidianStages

/// The whole `maidian` command line as a library, so a team's own executable can reuse every command
/// (`run`, `replay`, `check`, `test`, `bench`, `bench-match`, `broker`, `gen`, `produce`, `record`, `peek`, `stages`, `rules`) with extra stages.
///
/// A custom build's `main.swift`:
///
/// ```swift
/// import MaidianCLI
/// import MaidianStages
///
/// var registry = BuiltinStages.registry
/// registry.register(TagInternalUsersStage.self)
/// await MaidianCLI.main(registry: registry)
/// ```
///
/// See `docs/custom-stage.md` and `examples/custom-stage/`.
public enum MaidianCLI {
    /// Parses the command line, runs the command with `registry` as the stage kinds a pipeline can
    /// name, and exits the process with the command's exit code.
    ///
    /// This is the entry point of an executable: it is the only place that bootstraps logging
    /// (`LoggingSystem.bootstrap`, once, to standard error at `--log-level`). Call it once, from
    /// `main.swift`, before anything else runs.
    ///
    /// - Parameters:
    ///   - registry: The stage kinds of this build, usually `BuiltinStages.registry` plus your own.
    ///   - arguments: The arguments without the program name; `nil` reads the process's arguments.
    public static func main(registry: StageRegistry, arguments: [String]? = nil) async {
        CLISettings.registry = registry
        CLISettings.bootstrapsLogging = true
        await MaidianCommand.main(arguments)
    }
}

/// What the entry point configured for the commands of this process.
enum CLISettings {
    // Written only by `MaidianCLI.main` on the main task before any command is parsed or any other task
    // or thread starts; read-only afterwards. That ordering is what makes the unsynchronized access safe.
    nonisolated(unsafe) static var registry: StageRegistry = BuiltinStages.registry
    nonisolated(unsafe) static var bootstrapsLogging = false
}

/// The stage registry the commands use (set by ``MaidianCLI/main(registry:arguments:)``).
var stageRegistry: StageRegistry { CLISettings.registry }

/// The `maidian` command.
struct MaidianCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "maidian",
        abstract: "Stream processor for mobile-app analytics on Kafka.",
        version: MaidianBuild.version,
        subcommands: [
            RunCommand.self, ReplayCommand.self, CheckCommand.self, BenchCommand.self, BenchMatchCommand.self, BrokerCommand.self, GenCommand.self,
            ProduceCommand.self, RecordCommand.self, PeekCommand.self, StagesCommand.self, RulesCommand.self, TestCommand.self,
        ]
    )
}

/// Options every command shares.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = ProcessInfo.processInfo.environment["MAIDIAN_LOG_LEVEL"] ?? "info"

    @Option(name: .long, help: "Log format on standard error: text, or json (one object per line: time, level, label, message, metadata).")
    var logFormat: LogFormat = LogFormat(rawValue: ProcessInfo.processInfo.environment["MAIDIAN_LOG_FORMAT"] ?? "") ?? .text

    /// A logger at `--log-level`. Logging is bootstrapped (once) only when the process started through
    /// ``MaidianCLI/main(registry:arguments:)``; libraries only take a Logger.
    func makeLogger(_ label: String) -> Logger {
        let level = Logger.Level(rawValue: logLevel.lowercased()) ?? .info
        if CLISettings.bootstrapsLogging { LoggingBootstrap.once(level: level, format: logFormat) }
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }
}

enum LoggingBootstrap {
    // Called from the main task only, before any concurrency starts.
    nonisolated(unsafe) private static var done = false
    static func once(level: Logger.Level, format: LogFormat) {
        if done { return }
        done = true
        LoggingSystem.bootstrap { label in
            switch format {
            case .text:
                var h = StreamLogHandler.standardError(label: label)
                h.logLevel = level
                return h
            case .json:
                var h = JSONLogHandler(label: label)
                h.logLevel = level
                return h
            }
        }
    }
}

/// Reads a pipeline file and builds its engine, so configuration errors show before anything connects;
/// on an error prints it (`reportPipelineError`) and exits 1. `clock`: the stages' processing time
/// (`ProcessingClock.frozen()` for offline runs over a recording).
func loadPipeline(_ path: String, logger: Logger, clock: ProcessingClock = .live, adjust: (inout PipelineSpec) -> Void = { _ in }) throws -> (PipelineSpec, PipelineEngine) {
    do {
        var spec = try PipelineSpec.load(path: path)
        adjust(&spec)
        try spec.requireOutputs()
        let checker = PipelineCheck(registry: stageRegistry, logger: logger, kafkaProperty: kafkaPropertyProblem)
        // librdkafka would reject these only once a client starts, without saying where they are written.
        if let error = PipelineErrors.combined(checker.kafkaErrors(spec)) { throw error }
        return (spec, try PipelineEngine(spec: spec, registry: stageRegistry, logger: logger, clock: clock))
    } catch {
        reportPipelineError(error)
        throw ExitCode(1)
    }
}

/// Prints pipeline errors one per line (`file:line:column: message (hint)`) to standard error.
func reportPipelineError(_ error: any Error) {
    var stderr = StandardError()
    if let e = error as? PipelineErrors {
        for one in e.errors { print("\(one)", to: &stderr) }
    } else {
        print("\(error)", to: &stderr)
    }
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) { FileHandle.standardError.write(Data(string.utf8)) }
}
