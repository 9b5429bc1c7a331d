import ArgumentParser
import Logging
import MaidianPipeline

/// `maidian check PIPELINE.yaml`: validates a pipeline without running it.
struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "check", abstract: "Validate a pipeline file without running it.")

    @Argument(help: "The pipeline YAML file.") var pipeline: String
    @OptionGroup var global: GlobalOptions

    func run() throws {
        let logger = global.makeLogger("maidian.check")
        let (_, engine) = try loadPipeline(pipeline, logger: logger)
        print("\(pipeline): ok (\(engine.stageNames.joined(separator: " → ")))")
    }
}

/// `maidian stages`: lists the stage kinds this build knows.
struct StagesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stages", abstract: "List the stage kinds of this build.")
    func run() throws {
        let width = max(16, (stageRegistry.order.map(\.count).max() ?? 0) + 1)
        for kind in stageRegistry.order {
            let f = stageRegistry.factory(for: kind)!
            print("\(kind.padding(toLength: width, withPad: " ", startingAt: 0)) \(f.summary)")
        }
    }
}
