import ArgumentParser
import Foundation
import MaidianKafka
import MaidianPipeline

/// `--kafka-config FILE` and `-X name=value`: librdkafka properties for every command that talks to Kafka,
/// as kcat (`-F`, `-X`) and rpk take them, so that a secured cluster is reachable from the command line
/// (`-X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 ...`).
struct KafkaOptions: ParsableArguments {
    @Option(name: .customLong("kafka-config"), help: ArgumentHelp(
        "librdkafka properties file: name=value lines, # comments (as kcat -F).", valueName: "file"))
    var kafkaConfig: String?

    @Option(name: .customShort("X"), help: ArgumentHelp(
        "A librdkafka property, e.g. -X security.protocol=SASL_SSL (repeatable; wins over --kafka-config and the pipeline).",
        valueName: "name=value"))
    var properties: [String] = []

    /// The properties of `--kafka-config`, then `-X` (later ones win), each checked by librdkafka;
    /// problems printed located (`file:line:column`) and the command ends with exit status 1.
    func resolved() throws -> [String: String] {
        do {
            return try Self.parse(file: kafkaConfig, properties: properties)
        } catch {
            reportPipelineError(error)
            throw ExitCode(1)
        }
    }

    static func parse(file: String?, properties: [String]) throws -> [String: String] {
        var out: [String: String] = [:]
        var errors = PipelineErrors.Collector()
        if let file {
            let text: String
            do {
                text = try String(contentsOfFile: file, encoding: .utf8)
            } catch {
                throw PipelineError(code: .io, message: "cannot read --kafka-config '\(file)'", hint: (error as NSError).localizedFailureReason)
            }
            for (i, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = String(raw).trimmingCharacters(in: .whitespaces)
                if line.isEmpty || line.hasPrefix("#") || line.hasPrefix("!") { continue }
                let indent = raw.prefix { $0 == " " || $0 == "\t" }.count
                func at(_ column: Int) -> SourceLocation { SourceLocation(file: file, line: i + 1, column: indent + column) }
                guard let sep = line.firstIndex(where: { $0 == "=" || $0 == ":" }) else {
                    errors.record(PipelineError(code: .badType, message: "expected name=value", location: at(1)))
                    continue
                }
                let name = line[..<sep].trimmingCharacters(in: .whitespaces)
                let afterSep = line[line.index(after: sep)...]
                let value = afterSep.trimmingCharacters(in: .whitespaces)
                let valueColumn = line.distance(from: line.startIndex, to: sep) + 2 + afterSep.prefix { $0 == " " }.count
                if let problem = kafkaPropertyProblem(name: name, value: value) {
                    errors.record(PipelineError(
                        code: problem.unknownName ? .unknownKey : .badValue, message: problem.message,
                        location: at(problem.unknownName ? 1 : valueColumn), hint: problem.hint))
                }
                out[name] = value
            }
        }
        for p in properties {
            guard let eq = p.firstIndex(of: "="), eq != p.startIndex else {
                errors.record(PipelineError(code: .badType, message: "-X \(p): expected name=value"))
                continue
            }
            let name = String(p[..<eq]), value = String(p[p.index(after: eq)...])
            if let problem = kafkaPropertyProblem(name: name, value: value) {
                errors.record(PipelineError(
                    code: problem.unknownName ? .unknownKey : .badValue, message: "-X \(p): \(problem.message)", hint: problem.hint))
            }
            out[name] = value
        }
        try errors.check()
        return out
    }

    /// The brokers of a command that does not start an embedded broker: `--brokers`, else
    /// `bootstrap.servers` of the properties, else `MAIDIAN_BROKERS`; none is an error (exit 1).
    static func brokers(_ option: String?, _ properties: [String: String]) throws -> String {
        if let b = option ?? properties["bootstrap.servers"] ?? ProcessInfo.processInfo.environment["MAIDIAN_BROKERS"], !b.isEmpty {
            return b
        }
        var stderr = StandardError()
        print("no brokers: pass --brokers host:port, -X bootstrap.servers=host:port, or set MAIDIAN_BROKERS "
              + "(this command does not start an embedded broker; `maidian broker` runs one)", to: &stderr)
        throw ExitCode(1)
    }
}
