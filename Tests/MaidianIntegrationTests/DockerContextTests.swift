import Foundation
import XCTest

/// `scripts/docker_context.py`, the emulation of Docker's build context behind `make build-context-check`:
/// .dockerignore rules as Docker applies them, and the build stage assembled from the Dockerfile's COPY lines.
final class DockerContextTests: XCTestCase {
    /// The repository's context: what the image build needs is in, the rest is out.
    func testRepositoryContextHoldsWhatTheBuildNeeds() throws {
        let files = Set(try Integration.run(Integration.python, Integration.pythonArgs("docker_context.py", ["list"]))
            .split(separator: "\n").map(String.init))
        for needed in ["Package.swift", "Sources/maidian/main.swift", "bench/state-size/Sources/main.swift",
                       "bench/state-size/CHeapStats/heap_stats.c", "pipelines/app-analytics.yaml", "data/test-city.mmdb"] {
            XCTAssertTrue(files.contains(needed), "\(needed) is not in the build context")
        }
        for left in ["bench/README.md", "README.md", "testdata/traffic/sample.ndjson", "docs/wire-format.md", "deploy/prometheus/alerts.yml"] {
            XCTAssertFalse(files.contains(left), "\(left) should stay out of the build context")
        }
        XCTAssertTrue(files.contains("pipelines/README.md"), "a '!' exception re-includes a file")
        XCTAssertFalse(files.contains { $0.hasPrefix(".build/") || $0.hasPrefix(".git/") })
    }

    /// A COPY of something .dockerignore leaves out fails, as `docker build` would; an exception fixes it.
    func testCopyOfAnIgnoredPathFails() throws {
        let tree = FileManager.default.temporaryDirectory.appendingPathComponent("context-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: tree) }
        func write(_ path: String, _ text: String) throws {
            let url = tree.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try text.write(to: url, atomically: true, encoding: .utf8)
        }
        try write("Dockerfile", """
            FROM swift AS build
            WORKDIR /src
            COPY Package.* ./
            COPY bench/state-size ./bench/state-size
            FROM debian
            COPY --from=build /out/x /x
            """)
        try write("Package.swift", "// tools")
        try write("bench/state-size/tool.c", "int main(void) { return 0; }")
        try write("bench/README.md", "figures")
        func assemble(_ dockerignore: String) throws -> (Int32, String, URL) {
            try write(".dockerignore", dockerignore)
            let out = FileManager.default.temporaryDirectory.appendingPathComponent("assembled-\(UUID().uuidString)")
            let child = try Integration.Child(
                URL(fileURLWithPath: Integration.python), Integration.pythonArgs("docker_context.py", ["assemble", out.path]),
                environment: ["MAIDIAN_CONTEXT_ROOT": tree.path], name: "docker-context")
            return (child.wait(timeout: 60), child.stderr, out)
        }

        let (failed, stderr, _) = try assemble("bench\n")
        XCTAssertEqual(failed, 1)
        XCTAssertTrue(stderr.contains("COPY bench/state-size: not in the build context"), stderr)

        let (ok, okStderr, out) = try assemble("bench/*\n!bench/state-size\n")
        defer { try? FileManager.default.removeItem(at: out) }
        XCTAssertEqual(ok, 0, okStderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: out.appendingPathComponent("src/bench/state-size/tool.c").path))
        XCTAssertTrue(FileManager.default.fileExists(atPath: out.appendingPathComponent("src/Package.swift").path))
        XCTAssertFalse(FileManager.default.fileExists(atPath: out.appendingPathComponent("context/bench/README.md").path))
    }
}
