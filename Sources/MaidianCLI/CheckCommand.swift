import ArgumentParser
import Foundation
import Logging
import MaidianKafka
import MaidianPipeline

/// `maidian check PIPELINE.yaml...`: a linter for pipeline files; every problem of every file in one run.
struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check", abstract: "Check pipeline files without running them: every error and warning in one pass.",
        discussion: """
            Reports every problem of each file at the value it is about (file:line:column): the file's structure, \
            every stage's options, the files stages read (rules files are checked through), and every librdkafka \
            property name and value (checked by librdkafka itself, offline). Warnings: pipelines without stages \
            or outputs, outputs sharing a topic, dead letters into the enriched topic, stage orders that cannot \
            work, session timeouts brokers reject. Patterns (pipelines/*.yaml) are expanded even when quoted. \
            Exit status: 0 without errors (1 with --strict and warnings), 1 with errors.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case text, json }

    @Argument(help: "Pipeline files or patterns.") var pipelines: [String]
    @Option(help: "Output: text (one line per problem) or json (one object for the whole run).") var format: Format = .text
    @Flag(help: "Warnings fail the check too.") var strict = false
    @OptionGroup var global: GlobalOptions

    func run() throws {
        var logger = global.makeLogger("maidian.check")
        logger.logLevel = max(logger.logLevel, .error)  // stage chatter while building is not a finding
        let checker = PipelineCheck(registry: stageRegistry, logger: logger, kafkaProperty: kafkaPropertyProblem)
        var reports: [PipelineCheck.Report] = []
        for pattern in pipelines {
            let paths = expandPattern(pattern)
            if paths.isEmpty {
                reports.append(PipelineCheck.Report(
                    file: pattern, errors: [PipelineError(code: .io, message: "no file matches '\(pattern)'")],
                    warnings: [], stageNames: []))
            }
            for path in paths { reports.append(checker.check(path: path)) }
        }
        switch format {
        case .text: printText(reports)
        case .json: print(Self.json(reports))
        }
        let errors = reports.reduce(0) { $0 + $1.errors.count }
        let warnings = reports.reduce(0) { $0 + $1.warnings.count }
        if errors > 0 || (strict && warnings > 0) { throw ExitCode(1) }
    }

    func printText(_ reports: [PipelineCheck.Report]) {
        var stderr = StandardError()
        for r in reports {
            let problems = (r.errors.map { ("error", $0) } + r.warnings.map { ("warning", $0) })
                .sorted { ($0.1.location ?? .init(file: "", line: .max, column: 0)) < ($1.1.location ?? .init(file: "", line: .max, column: 0)) }
            for (severity, p) in problems {
                // `file:line:column: warning: message (hint)`, as compilers write it.
                var line = p.location.map { "\($0): " } ?? "\(r.file): "
                line += "\(severity): \(p.message)"
                if let hint = p.hint, !hint.isEmpty { line += " (\(hint))" }
                print(line, to: &stderr)
            }
            if r.errors.isEmpty {
                let summary = r.warnings.isEmpty ? "ok" : "ok with \(r.warnings.count) warning\(r.warnings.count == 1 ? "" : "s")"
                print("\(r.file): \(summary) (\(r.stageNames.joined(separator: " → ")))")
            } else {
                print("\(r.file): \(r.errors.count) error\(r.errors.count == 1 ? "" : "s"), \(r.warnings.count) warning\(r.warnings.count == 1 ? "" : "s")")
            }
        }
    }

    /// `{"files": [{"file", "ok", "stages", "problems": [{"severity", "file", "line", "column", "code",
    /// "message", "hint"}]}], "errors": N, "warnings": N}`.
    static func json(_ reports: [PipelineCheck.Report]) -> String {
        func problem(_ severity: String, _ e: PipelineError) -> [String: Any] {
            var o: [String: Any] = ["severity": severity, "code": e.code.rawValue, "message": e.message]
            if let l = e.location { o["file"] = l.file; o["line"] = l.line; o["column"] = l.column }
            if let hint = e.hint { o["hint"] = hint }
            return o
        }
        let files: [[String: Any]] = reports.map { r in
            ["file": r.file, "ok": r.errors.isEmpty, "stages": r.stageNames,
             "problems": r.errors.map { problem("error", $0) } + r.warnings.map { problem("warning", $0) }]
        }
        let root: [String: Any] = [
            "files": files, "errors": reports.reduce(0) { $0 + $1.errors.count },
            "warnings": reports.reduce(0) { $0 + $1.warnings.count },
        ]
        let data = try! JSONSerialization.data(withJSONObject: root, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }
}

/// librdkafka's verdict on one property of a pipeline's `source.kafka` (consumer) or `producer.kafka`.
@Sendable func kafkaPropertyProblem(
    name: String, value: String, client: WrittenKafkaProperty.Client
) -> PipelineCheck.KafkaPropertyProblem? {
    if let problem = kafkaPropertyProblem(name: name, value: value) { return problem }
    let scope: KafkaConfigCheck.Scope = client == .consumer ? .consumer : .producer
    guard KafkaConfigCheck.ignored(name: name, by: scope) else { return nil }
    let other = client == .consumer ? "producer" : "consumer"
    return .init(
        message: "'\(name)' is a \(other) property: the \(client.rawValue) ignores it",
        hint: "move it to \(client == .consumer ? "producer.kafka" : "source.kafka")", unknownName: false, isWarning: true)
}

/// librdkafka's verdict on one property, in the words `maidian check` prints.
@Sendable func kafkaPropertyProblem(name: String, value: String) -> PipelineCheck.KafkaPropertyProblem? {
    guard let problem = KafkaConfigCheck.problem(name: name, value: value) else { return nil }
    switch problem.kind {
    case .unknownName:
        return .init(
            message: problem.message,
            hint: PipelineError.suggestion(for: name, among: KafkaConfigCheck.propertyNames).flatMap {
                $0.hasPrefix("did you mean") ? $0 : nil
            } ?? "see librdkafka's CONFIGURATION.md", unknownName: true)
    case .badValue:
        return .init(
            message: problem.message,
            hint: problem.allowed.isEmpty ? nil : "expected one of: " + problem.allowed.joined(separator: ", "),
            unknownName: false)
    }
}

/// `maidian stages`: lists the stage kinds this build knows.
struct StagesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stages", abstract: "List the stage kinds of this build, or describe one's settings.")

    @Option(name: .long, help: "Print a kind's settings: key, type, default, meaning, example.")
    var describe: String?

    @Option(name: .long, help: "Regenerate the settings tables between the markers of this Markdown file (pipelines/README.md).")
    var writeReference: String?

    func run() throws {
        if let kind = describe {
            guard let f = stageRegistry.factory(for: kind) else {
                throw PipelineError(code: .invalid, message: "no stage kind '\(kind)'", hint: PipelineError.suggestion(for: kind, among: stageRegistry.order))
            }
            print(f.describe(), terminator: "")
            return
        }
        if let path = writeReference {
            let text = try String(contentsOfFile: path, encoding: .utf8)
            let updated = try stageRegistry.updatingReference(in: text, file: path)
            if updated != text { try updated.write(toFile: path, atomically: true, encoding: .utf8) }
            print(updated == text ? "\(path): up to date" : "\(path): settings reference rewritten")
            return
        }
        let width = max(16, (stageRegistry.order.map(\.count).max() ?? 0) + 1)
        for kind in stageRegistry.order {
            let f = stageRegistry.factory(for: kind)!
            print("\(kind.padding(toLength: width, withPad: " ", startingAt: 0)) \(f.summary)")
        }
    }
}
