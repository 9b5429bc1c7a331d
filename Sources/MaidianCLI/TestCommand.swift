import ArgumentParser
import Foundation
import Logging
import MaidianPipeline
import MaidianRuntime
import MaidianTools

/// `maidian test TESTS.yaml...`: declarative pipeline tests, run offline.
struct TestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test", abstract: "Run declarative pipeline tests (input records, expected topic contents) offline.",
        discussion: """
            Each test file names a pipeline and lists tests; each test runs its input records through a fresh \
            engine of the pipeline without a broker (as `maidian bench` does: partial counts merged, all state \
            written out at the end) and checks what each output topic received: `count`, `contains` (each given \
            object must match a message: the keys it gives, with equal values) and `absent`. \
            See pipelines/tests/README.md. Exit status: 0 when every test passed, 1 otherwise.
            """)

    @Argument(help: "Test files or patterns (pipelines/tests/*.yaml).") var files: [String]
    @OptionGroup var global: GlobalOptions

    func run() throws {
        var logger = global.makeLogger("maidian.test")
        logger.logLevel = max(logger.logLevel, .warning)
        let runner = PipelineTestRunner(registry: stageRegistry, logger: logger)
        var stderr = StandardError()
        var passed = 0, failed = 0, broken = 0
        for pattern in files {
            let paths = expandPattern(pattern)
            if paths.isEmpty {
                print("\(pattern): no file matches", to: &stderr)
                broken += 1
            }
            for path in paths {
                do {
                    let file = try PipelineTestFile.load(path: path)
                    for outcome in try runner.run(file, path: path) {
                        if outcome.passed {
                            passed += 1
                            print("PASS \(path): \(outcome.name)")
                        } else {
                            failed += 1
                            print("FAIL \(path): \(outcome.name)")
                            for f in outcome.failures { print("  \(f)") }
                        }
                    }
                } catch {
                    broken += 1
                    reportPipelineError(error)
                }
            }
        }
        print("\(passed) passed, \(failed) failed" + (broken > 0 ? ", \(broken) file\(broken == 1 ? "" : "s") could not run" : ""))
        if failed > 0 || broken > 0 { throw ExitCode(1) }
    }
}

/// The files a pattern names: itself when it has no wildcard, else its matches, sorted (patterns work
/// quoted too, and the same way in every shell).
func expandPattern(_ pattern: String) -> [String] {
    guard pattern.contains(where: { "*?[".contains($0) }) else { return [pattern] }
    var g = glob_t()
    defer { globfree(&g) }
    guard glob(pattern, 0, nil, &g) == 0 else { return [] }
    return (0..<Int(g.gl_pathc)).compactMap { g.gl_pathv[$0].map { String(cString: $0) } }.sorted()
}
