import ArgumentParser
import MaidianPipeline
import MaidianRules
import MaidianRuntime
import MaidianStages
import MaidianTools

/// `maidian rules …`: tools for circle-select rules files (wire format §4).
struct RulesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules", abstract: "Tools for circle-select rules files.", subcommands: [RulesTestCommand.self, RulesDoctorCommand.self, RulesCompareCommand.self])
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

/// `maidian rules doctor RULES --recording FILE [--pipeline P] [--min-events N] [--drop-ratio R] [--json]`.
struct RulesDoctorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Find the rules a release broke in a recording and propose repaired definitions.",
        discussion: """
        Runs the pipeline's stages up to 'match' with RULES over the recording (as 'rules test') and counts, per \
        rule and app_version, the events of the rule's page and the rule's matches (the watchdog of the match \
        stage's health_topic). A version with at least --min-events events of the rule's kind on its page, where \
        the rule matches nothing or less than --drop-ratio of its share on the previous version, is reported as \
        a rules.health record. For element rules, a second pass collects the near misses on that version \
        (clicks on the page the rule did not match) and proposes the rule with the element path that repairs \
        it, as an any_of fragment to paste in place of the rule.
        """)

    @Argument(help: "The rules file (YAML or JSON).") var rules: String
    @Option(help: "Recording (.ndjson or .ndjson.zst, wire format §6).") var recording: String
    @Option(help: "The pipeline whose stages run up to 'match'.") var pipeline = "pipelines/app-analytics.yaml"
    @Option(help: "Events of a rule's kind on its page before a version is judged.") var minEvents = 100
    @Option(help: "A share of matches below this fraction of the previous version's is reported.") var dropRatio = 0.1
    @Flag(help: "Print one JSON object.") var json = false
    @Option(help: "Records per batch.") var batch = 1000
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if minEvents < 1 { throw ValidationError("--min-events must be at least 1") }
        if !(dropRatio > 0 && dropRatio <= 1) { throw ValidationError("--drop-ratio must be in (0, 1]") }
        if batch < 1 { throw ValidationError("--batch must be at least 1") }
    }

    func run() throws {
        let logger = global.makeLogger("maidian.rules")
        let doctor: RulesDoctorRun
        do {
            let spec = try PipelineSpec.load(path: pipeline)
            doctor = try RulesDoctorRun(spec: spec, registry: stageRegistry, rules: rules,
                                        options: .init(minEvents: minEvents, dropRatio: dropRatio), logger: logger)
            let partitions = Int32(spec.source.partitions)
            try Bench.replay(path: recording, topic: spec.source.topic, partitions: partitions, batchSize: batch) { try doctor.process(&$0) }
            if try doctor.finishFirstPass() {
                try Bench.replay(path: recording, topic: spec.source.topic, partitions: partitions, batchSize: batch) { try doctor.process(&$0) }
            }
            doctor.finish()
        } catch {
            reportPipelineError(error)
            throw ExitCode(1)
        }
        print(json ? doctor.json : doctor.text, terminator: "")
    }
}

/// `maidian rules compare LIVE CANDIDATE --recording FILE [--pipeline P] [--json]`.
struct RulesCompareCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compare",
        abstract: "Compare what two rules files match in a recording, rule by rule.",
        discussion: """
        Runs the pipeline's stages up to 'match' over the recording once with each file (as 'rules test') and \
        prints per rule its matches with LIVE and with CANDIDATE and whether its definition is unchanged, \
        changed, added or removed; rules that match differently are marked '*'.
        """)

    @Argument(help: "The live rules file.") var live: String
    @Argument(help: "The candidate rules file.") var candidate: String
    @Option(help: "Recording (.ndjson or .ndjson.zst, wire format §6).") var recording: String
    @Option(help: "The pipeline whose stages run up to 'match'.") var pipeline = "pipelines/app-analytics.yaml"
    @Flag(help: "Print one JSON object.") var json = false
    @Option(help: "Records per batch.") var batch = 1000
    @OptionGroup var global: GlobalOptions

    func run() throws {
        let logger = global.makeLogger("maidian.rules")
        let comparison: RulesComparison
        do {
            let spec = try PipelineSpec.load(path: pipeline)
            let runs = try [live, candidate].map {
                try RulesTestRun(spec: spec, registry: stageRegistry, rules: $0, options: .init(examples: 0), logger: logger)
            }
            try Bench.replay(path: recording, topic: spec.source.topic, partitions: Int32(spec.source.partitions), batchSize: max(batch, 1)) { b in
                var copy = b
                try runs[0].process(&b)
                try runs[1].process(&copy)
            }
            comparison = RulesComparison(live: runs[0].result, candidate: runs[1].result,
                                         diff: RulesDiff(from: runs[0].match.matcher.rules, to: runs[1].match.matcher.rules))
        } catch {
            reportPipelineError(error)
            throw ExitCode(1)
        }
        print(json ? comparison.json : comparison.text, terminator: "")
    }
}
