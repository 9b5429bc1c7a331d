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
        func write(_ path: String, _ text: String) throws { try Self.write(text, to: path, in: tree) }
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

    /// `verify`, which `make build-context-check` runs instead of compiling the copy: a file the product builds
    /// from that .dockerignore leaves out fails it, naming the file; a target directory the manifest declares
    /// but the COPY lines leave out fails it too (the manifest does not load); with both there, it passes, until the
    /// manifest uses a setting (`resources:`) that could read files outside the target directories.
    func testVerifyNamesAFileTheProductNeedsButTheBuildStageLacks() throws {
        let tree = FileManager.default.temporaryDirectory.appendingPathComponent("context-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: tree) }
        func write(_ path: String, _ text: String) throws { try Self.write(text, to: path, in: tree) }
        try write("Package.swift", """
            // swift-tools-version:5.9
            import PackageDescription
            let package = Package(name: "toy", products: [.executable(name: "maidian", targets: ["maidian"])], targets: [
                .executableTarget(name: "maidian", dependencies: ["Lib"]), .target(name: "Lib"),
                .executableTarget(name: "tool", path: "tools/tool"),
            ])
            """)
        try write("Sources/maidian/main.swift", "print(Lib.answer)")
        try write("Sources/Lib/Lib.swift", "public enum Lib { public static let answer = helper }")
        try write("Sources/Lib/Helper.swift", "let helper = 42")
        try write("tools/tool/main.swift", "print(1)")
        func verify(dockerignore: String, copies: [String]) throws -> (Int32, String) {
            try write(".dockerignore", dockerignore)
            try write("Dockerfile", (["FROM swift AS build", "WORKDIR /src"] + copies + ["FROM debian"]).joined(separator: "\n"))
            let out = FileManager.default.temporaryDirectory.appendingPathComponent("assembled-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: out) }
            for args in [["assemble", out.path], ["verify", out.path, "maidian"]] {
                let child = try Integration.Child(
                    URL(fileURLWithPath: Integration.python), Integration.pythonArgs("docker_context.py", args),
                    environment: ["MAIDIAN_CONTEXT_ROOT": tree.path], name: "docker-context")
                let status = child.wait(timeout: 120)
                if status != 0 || args[0] == "verify" { return (status, child.stderr + child.stdout) }
            }
            return (-1, "")
        }
        let copies = ["COPY Package.* ./", "COPY Sources ./Sources", "COPY tools ./tools"]

        let (lacking, lackingOutput) = try verify(dockerignore: "Sources/Lib/Helper.swift\n", copies: copies)
        XCTAssertEqual(lacking, 1, lackingOutput)
        XCTAssertTrue(lackingOutput.contains("Sources/Lib/Helper.swift: maidian builds from it, but the build stage does not have it"), lackingOutput)

        let (noTool, noToolOutput) = try verify(dockerignore: "", copies: Array(copies.dropLast()))
        XCTAssertEqual(noTool, 1, noToolOutput)
        XCTAssertTrue(noToolOutput.contains("the manifest does not load in the build stage"), noToolOutput)

        let (ok, okOutput) = try verify(dockerignore: "tools/*.md\n", copies: copies)
        XCTAssertEqual(ok, 0, okOutput)
        XCTAssertTrue(okOutput.contains("4 files of the 2 targets maidian builds from are there, byte for byte"), okOutput)

        // A setting that can make the build read files outside the target directories is named, not vouched for.
        let manifest = try String(contentsOf: tree.appendingPathComponent("Package.swift"), encoding: .utf8)
        try write("Package.swift", manifest.replacingOccurrences(of: ".target(name: \"Lib\")", with: ".target(name: \"Lib\", resources: [])"))
        let (resources, resourcesOutput) = try verify(dockerignore: "", copies: copies)
        XCTAssertEqual(resources, 1, resourcesOutput)
        XCTAssertTrue(resourcesOutput.contains("Package.swift uses resources:"), resourcesOutput)
    }

    /// Writes `text` to `path` under `tree`, creating the directories on the way.
    private static func write(_ text: String, to path: String, in tree: URL) throws {
        let url = tree.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try text.write(to: url, atomically: true, encoding: .utf8)
    }
}
