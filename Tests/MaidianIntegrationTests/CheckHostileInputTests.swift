import Foundation
import XCTest

/// `maidian check` on pipeline files that used to pass or crash it (issue 13, classes 5 and 6).
final class CheckHostileInputTests: XCTestCase {
    func check(_ yaml: String, name: String) throws -> (status: Int32, stdout: String, stderr: String, path: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-check-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent(name).path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        let child = try Integration.Child(Integration.binary, ["check", path], name: "check-\(name)")
        let status = child.wait(timeout: 60)
        return (status, child.stdout, child.stderr, path)
    }

    func testEmptyPipelineIsRefused() throws {
        let r = try check("", name: "empty.yaml")
        XCTAssertEqual(r.status, 1, "stdout: \(r.stdout)")
        XCTAssertTrue(r.stderr.hasPrefix("\(r.path):1:1: "), r.stderr)
        XCTAssertFalse(r.stdout.contains("ok"), r.stdout)
    }

    func testPipelineWithoutOutputsIsRefused() throws {
        let r = try check("source: {topic: events.raw}\nstages:\n  - kind: validate\n", name: "no-outputs.yaml")
        XCTAssertEqual(r.status, 1, "stdout: \(r.stdout) stderr: \(r.stderr)")
        XCTAssertTrue(r.stderr.contains("the pipeline has no outputs"), r.stderr)
    }

    func testDeeplyNestedPipelineIsRefusedWithoutCrashing() throws {
        let r = try check("stages: " + String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000) + "\n", name: "deep.yaml")
        XCTAssertEqual(r.status, 1, "stderr: \(r.stderr)")  // it died of SIGSEGV before
        XCTAssertTrue(r.stderr.hasPrefix("\(r.path):1:"), r.stderr)
        XCTAssertTrue(r.stderr.contains("nested more than 64 deep"), r.stderr)
    }

    func testAliasBombIsRefusedQuickly() throws {
        var yaml = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n"
        for i in 1...9 { yaml += "l\(i): &l\(i) [" + Array(repeating: "*l\(i - 1)", count: 10).joined(separator: ", ") + "]\n" }
        let started = Date()
        let r = try check(yaml, name: "bomb.yaml")
        XCTAssertEqual(r.status, 1, "stderr: \(r.stderr)")
        XCTAssertTrue(r.stderr.contains("expand to more than"), r.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 30)
    }
}
