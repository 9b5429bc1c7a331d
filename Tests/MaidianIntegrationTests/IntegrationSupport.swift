import Foundation
import Logging
import XCTest

/// Paths and process helpers for tests that run the `maidian` binary and independent Kafka clients.
enum Integration {
    /// The repository root (this file is Tests/MaidianIntegrationTests/IntegrationSupport.swift).
    static let root: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The test data the repository carries (`testdata/`: the sample recordings, their answers, the sample
    /// rules and a small MaxMind database).
    static let shared: URL = root.appendingPathComponent("testdata")

    /// A file under `testdata/`; throws (failing the test) when it is missing.
    static func sharedFile(_ path: String) throws -> URL {
        let url = shared.appendingPathComponent(path)
        guard FileManager.default.fileExists(atPath: url.path) else { throw MissingFile(path: url.path) }
        return url
    }

    struct MissingFile: Error, CustomStringConvertible {
        let path: String
        var description: String { "missing \(path): the test data of the repository (testdata/) is missing" }
    }

    /// The `maidian` executable: `$MAIDIAN_BIN`, else next to the test bundle.
    static var binary: URL {
        if let p = ProcessInfo.processInfo.environment["MAIDIAN_BIN"] { return URL(fileURLWithPath: p) }
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("maidian"),
            Bundle.main.bundleURL.appendingPathComponent("maidian"),
            root.appendingPathComponent(".build/debug/maidian"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[2]
    }

    /// A started child process with its output captured to files.
    final class Child {
        let process = Process()
        let stdoutURL: URL
        let stderrURL: URL

        init(_ executable: URL, _ arguments: [String], environment: [String: String] = [:], name: String) throws {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-tests-\(getpid())")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            stdoutURL = dir.appendingPathComponent("\(name).out")
            stderrURL = dir.appendingPathComponent("\(name).err")
            FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
            FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
            process.executableURL = executable
            process.arguments = arguments
            var env = ProcessInfo.processInfo.environment
            for (k, v) in environment { env[k] = v }
            process.environment = env
            process.currentDirectoryURL = Integration.root
            process.standardOutput = try FileHandle(forWritingTo: stdoutURL)
            process.standardError = try FileHandle(forWritingTo: stderrURL)
            try process.run()
        }

        /// Waits up to `timeout` seconds; kills the process when it takes longer. Returns the exit status.
        @discardableResult
        func wait(timeout: TimeInterval) -> Int32 {
            let deadline = Date().addingTimeInterval(timeout)
            while process.isRunning && Date() < deadline { usleep(50_000) }
            if process.isRunning {
                process.terminate()
                usleep(500_000)
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                process.waitUntilExit()
                return -999
            }
            return process.terminationStatus
        }

        var stdout: String { (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "" }
        var stderr: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }
    }

    /// Runs a command to completion; fails the test on a non-zero exit.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String], timeout: TimeInterval = 120, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let child = try Child(URL(fileURLWithPath: executable), arguments, name: URL(fileURLWithPath: arguments.first ?? executable).lastPathComponent)
        let status = child.wait(timeout: timeout)
        XCTAssertEqual(status, 0, "\(executable) \(arguments.joined(separator: " ")) failed:\n\(child.stderr)", file: file, line: line)
        return child.stdout
    }

    static var python: String { ProcessInfo.processInfo.environment["PYTHON"] ?? "/usr/bin/env" }
    static func pythonArgs(_ script: String, _ args: [String]) -> [String] {
        let path = root.appendingPathComponent("scripts/\(script)").path
        return ProcessInfo.processInfo.environment["PYTHON"] != nil ? [path] + args : ["python3", path] + args
    }

    /// Reads topics with the independent Python reader; returns parsed records.
    typealias DumpedRecord = (topic: String, key: String?, value: String)

    static func dumpTopics(bootstrap: String, _ topics: [String]) throws -> [DumpedRecord] {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("dump-\(UUID().uuidString).ndjson")
        try run(python, pythonArgs("kafka_dump_topics.py", [bootstrap, out.path] + topics), timeout: 180)
        let text = try String(contentsOf: out, encoding: .utf8)
        try? FileManager.default.removeItem(at: out)
        return try text.split(separator: "\n").map { line in
            let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            return (o["topic"] as! String, o["key"] as? String, o["value"] as! String)
        }
    }
}
