import ArgumentParser
import MaidianPipeline
import MaidianRuntime
import MaidianStages

/// `maidian rules …`: tools for circle-select rules files (wire format §4).
struct RulesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules", abstract: "Tools for circle-select rules files.", subcommands: [RulesTestCommand.self])
}

/// `maidian rules test RULES --recording FILE [--pipeline P] [--rule ID] [--json]`.
struct RulesTestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Show what a rules file matches in a recording.",
        discussion: """
        Runs the pipeline's stages up to and including 'match', with RULES in place of the match stage's rules \
        file, over the recording (nothing is written), then prints per rule the events it matched and a few \
        examples, and the rules that matched nothing. Events the pipeline drops (duplicates, noise) or rejects \
        are not counted. With --rule, also the near misses of that rule: events on its page (page rules), with \
        its $element_path (element rules) or its $element_target (action rules) that it did not match, grouped \
        by what differs, marked [-expected-]{+actual+}.
        """)

    @Argument(help: "The rules file (YAML or JSON).") var rules: String
    @Option(help: "Recording (.ndjson or .ndjson.zst; format: docs/wire-format.md §6).") var recording: String
    @Option(help: "The pipeline whose stages run up to 'match'.") var pipeline = "pipelines/app-analytics.yaml"
    @Option(help: "Show only this rule (id; action rules: their identifier), with its near misses.") var rule: String?
    @Option(help: "Examples per rule.") var examples = 3
    @Flag(help: "Print one JSON object.") var json = false
    @Option(help: "Records per batch.") var batch = 1000
    @Option(help: "Partitions to spread the records over (by key); default: the pipeline's source.partitions.") var partitions: Int?
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if examples < 0 { throw ValidationError("--examples must be 0 or more") }
        if batch < 1 { throw ValidationError("--batch must be at least 1") }
        if let partitions, partitions < 1 { throw ValidationError("--partitions must be at least 1") }
    }

    func run() throws {
        let logger = global.makeLogger("maidian.rules")
        let test: RulesTestRun
        do {
            let spec = try PipelineSpec.load(path: pipeline)
            test = try RulesTestRun(
                spec: spec, registry: stageRegistry, rules: rules,
                options: .init(examples: examples, nearMissesOf: rule), logger: logger)
            try Bench.replay(path: recording, topic: spec.source.topic, partitions: Int32(partitions ?? spec.source.partitions), batchSize: batch) {
                try test.process(&$0)
            }
        } catch {
            reportPipelineError(error)
            throw ExitCode(1)
        }
        let report = test.result
        print(json ? report.json : report.text(only: rule))
    }
}
