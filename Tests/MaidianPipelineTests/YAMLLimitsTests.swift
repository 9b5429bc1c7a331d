import MaidianPipeline
import XCTest

/// Issue 13, class 5: YAML that recurses or expands is refused before it is composed, with a location.
final class YAMLLimitsTests: XCTestCase {
    private func error(_ yaml: String, file: String = "p.yaml") -> PipelineError? {
        do {
            _ = try ConfigDocument.parse(yaml: yaml, file: file, environment: [:])
            return nil
        } catch {
            return PipelineErrors.flatten(error).first
        }
    }

    func testDeepFlowNestingIsRefusedWithALocation() throws {
        // 100,000 levels overflowed the stack (SIGSEGV) in the composer before the limit.
        for depth in [65, 100_000] {
            let yaml = "rules: " + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "\n"
            let e = try XCTUnwrap(error(yaml), "depth \(depth)")
            XCTAssertEqual(e.code, .tooLarge)
            // The root mapping is level 1, so the 64th '[' (column 8 + 63) is the 65th level.
            XCTAssertEqual(e.location, SourceLocation(file: "p.yaml", line: 1, column: 8 + 63), "\(e)")
            XCTAssertTrue("\(e)".hasPrefix("p.yaml:1:71: mappings and lists are nested more than 64 deep"), "\(e)")
        }
    }

    func testDeepBlockNestingIsRefused() throws {
        let yaml = String(repeating: "- ", count: 200) + "x\n"
        XCTAssertEqual(error(yaml)?.code, .tooLarge)
    }

    func testNestingWithinTheLimitLoads() throws {
        let depth = 63
        let yaml = "a: " + String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth) + "\n"
        XCTAssertNil(error(yaml))
    }

    /// "Billion laughs": each level repeats the previous one ten times.
    static func aliasBomb(levels: Int) -> String {
        var yaml = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n"
        for i in 1...levels {
            yaml += "l\(i): &l\(i) [" + Array(repeating: "*l\(i - 1)", count: 10).joined(separator: ", ") + "]\n"
        }
        return yaml
    }

    func testAliasBombIsRefusedWithALocation() throws {
        // Six levels expand to about 1.1 million values (nine took all memory).
        let e = try XCTUnwrap(error(Self.aliasBomb(levels: 6)))
        XCTAssertEqual(e.code, .tooLarge)
        XCTAssertTrue("\(e)".contains("expand to more than 100000 values"), "\(e)")
        // 100,000 is passed on line 5 (l4: ten aliases of l3's 11,111 values each).
        XCTAssertEqual(e.location?.line, 5, "\(e)")
        XCTAssertNotNil(error(Self.aliasBomb(levels: 9)))
        // Aliases that stay small are fine.
        XCTAssertNil(error(Self.aliasBomb(levels: 3)))
    }

    func testMergeKeyBombIsRefused() throws {
        var yaml = "m0: &m0 {a: 1, b: 2, c: 3, d: 4}\n"
        for i in 1...12 {
            yaml += "m\(i): &m\(i)\n  <<: [" + Array(repeating: "*m\(i - 1)", count: 4).joined(separator: ", ") + "]\n  k\(i): 1\n"
        }
        XCTAssertEqual(error(yaml)?.code, .tooLarge)
    }

    func testRulesFilesGoThroughTheSameLimits() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-yaml-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("deep.yaml").path
        try ("pages: " + String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000) + "\n")
            .write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try ConfigDocument.load(path: path, environment: [:])) { e in
            XCTAssertTrue("\(e)".hasPrefix("\(path):1:"), "\(e)")
        }
    }
}
