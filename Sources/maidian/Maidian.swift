import ArgumentParser
import Foundation
import Logging
import MaidianPipeline
import MaidianStages

/// The `maidian` command line.
@main
struct Maidian: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "maidian",
        abstract: "Stream processor for mobile-app analytics on Kafka.",
        subcommands: [
            RunCommand.self, CheckCommand.self, BenchCommand.self, BrokerCommand.self, GenCommand.self,
            ProduceCommand.self, PeekCommand.self, StagesCommand.self,
        ]
    )
}

/// Options every command shares.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = ProcessInfo.processInfo.environment["MAIDIAN_LOG_LEVEL"] ?? "info"

    /// Bootstraps logging once; libraries only take a Logger.
    func makeLogger(_ label: String) -> Logger {
        let level = Logger.Level(rawValue: logLevel.lowercased()) ?? .info
        LoggingBootstrap.once(level: level)
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }
}

enum LoggingBootstrap {
    nonisolated(unsafe) private static var done = false
    static func once(level: Logger.Level) {
        // Called from the main task only, before any concurrency starts.
        if done { return }
        done = true
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = level
            return h
        }
    }
}

/// The stage registry of this build: the built-in list. A custom build adds its own stages here.
let stageRegistry: StageRegistry = BuiltinStages.registry

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
