import Foundation
import MaidianPipeline
import MaidianStages
import XCTest

/// A config read through its declaration, as the built-in stages read theirs.
private struct Probe: Decodable, DeclaredSettings {
    enum Settings {
        static let window = Setting("window", default: ConfigDuration.minutes(10), "how long (more than 0)", example: "5m")
        static let topic = Setting<String>.required("topic", "where to write", example: "out")
        static let label = Setting<String>.optional("label", "a name", example: "x", documented: "none")
        static let reloadCheck = Setting("reload_check", default: ConfigDuration.seconds(1), "how often", example: "5s")
    }
    static let settings = ConfigSpec(Settings.window, Settings.topic, Settings.label, Settings.reloadCheck)
    var window = Settings.window.default
    var topic: String
    var label: String?
    var reloadCheck = Settings.reloadCheck.default

    init(from decoder: any Decoder) throws {
        let s = try decoder.settings(Self.settings)
        window = try s(Settings.window)
        if window.milliseconds <= 0 { throw decoder.fail("window must be positive", forKey: Settings.window.codingKey, code: .badValue) }
        topic = try s(Settings.topic)
        label = try s.optional(Settings.label)
        reloadCheck = try s(Settings.reloadCheck)
    }
}

private func decodeProbe(_ yaml: String) throws -> Probe {
    try ConfigDecoder().decode(Probe.self, from: ConfigDocument.parse(yaml: yaml, file: "p.yaml", environment: [:]))
}

private func messages(_ body: () throws -> Void) -> [String] {
    do {
        try body()
        return []
    } catch {
        return PipelineErrors.flatten(error).map(\.description)
    }
}

private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

final class ConfigSpecTests: XCTestCase {
    func testDefaultsComeFromTheDeclarationAndGivenValuesWin() throws {
        let d = try decodeProbe("topic: t")
        XCTAssertEqual(d.window, .minutes(10))
        XCTAssertEqual(d.reloadCheck, .seconds(1))
        XCTAssertNil(d.label)
        let g = try decodeProbe("topic: t\nwindow: 90s\nlabel: a\nreload_check: 0s")
        XCTAssertEqual(g.window, .seconds(90))
        XCTAssertEqual(g.label, "a")
        XCTAssertEqual(g.reloadCheck, .zero)
    }

    func testRequiredTypedAndUnknownKeysAreLocated() {
        let missing = messages { _ = try decodeProbe("window: 1m") }
        XCTAssertEqual(missing.count, 1)
        XCTAssertTrue(missing[0].contains("missing key 'topic'"), "\(missing)")
        let typed = messages { _ = try decodeProbe("topic: t\nwindow: soon") }
        XCTAssertTrue(typed.first?.hasPrefix("p.yaml:2:9:") == true, "\(typed)")
        let unknown = messages { _ = try decodeProbe("topic: t\nwindw: 1m") }
        XCTAssertEqual(unknown.count, 1)
        XCTAssertTrue(unknown[0].hasPrefix("p.yaml:2:1: unknown key 'windw'"), "\(unknown)")
        XCTAssertTrue(unknown[0].contains("did you mean 'window'?"), "\(unknown)")
    }

    /// Every declared key is known from the start: a typo of a key the decoder never reached (it stopped at
    /// an earlier bad value) is still reported, with its suggestion, beside that error.
    func testATypoOfAKeyNotYetReadIsReportedFromTheDeclaration() {
        let errors = messages { _ = try decodeProbe("window: 0s\ntopic: t\nreload_chek: 5s") }
        XCTAssertTrue(errors.contains { $0.contains("window must be positive") }, "\(errors)")
        XCTAssertTrue(errors.contains { $0.hasPrefix("p.yaml:3:1: unknown key 'reload_chek'") && $0.contains("did you mean 'reload_check'?") }, "\(errors)")
    }

    func testReferenceRows() throws {
        let rows = Probe.settings.entries
        XCTAssertEqual(rows.map(\.key), ["window", "topic", "label", "reload_check"])
        XCTAssertEqual(rows.map(\.type), ["duration", "string", "string", "duration"])
        XCTAssertEqual(rows.map(\.defaultText), ["`10m`", "*required*", "none", "`1s`"])
    }

    /// What every built-in kind declares is what its decoder reads: each example decodes, all together, and
    /// an unknown key's "valid keys" hint lists exactly the declared keys.
    func testBuiltinDeclarationsMatchTheirDecoders() throws {
        let registry = BuiltinStages.registry
        for kind in registry.order {
            let factory = try XCTUnwrap(registry.factory(for: kind))
            let spec = try XCTUnwrap(factory.settings, "\(kind) declares no settings")
            let examples = spec.entries.map { "\($0.key): \($0.example)" }.joined(separator: "\n")
            XCTAssertNoThrow(try factory.checkSettings(ConfigDocument.parse(yaml: "kind: \(kind)\n" + examples, file: "\(kind).yaml", environment: [:])), kind)
            for e in spec.flattened {
                XCTAssertFalse(e.meaning.isEmpty, "\(kind).\(e.key)")
                XCTAssertFalse(e.example.isEmpty, "\(kind).\(e.key)")
            }
            let required = spec.entries.filter { $0.defaultText == "*required*" }.map { "\($0.key): \($0.example)\n" }.joined()
            let errors = messages { try factory.checkSettings(ConfigDocument.parse(yaml: "kind: \(kind)\n\(required)qqqqqqqq: 1", file: "\(kind).yaml", environment: [:])) }
            XCTAssertEqual(errors.count, 1, "\(kind): \(errors)")
            XCTAssertTrue(errors.first?.hasSuffix("(valid keys: kind, " + spec.keys.joined(separator: ", ") + ")") == true, "\(kind): \(errors)")
        }
    }

    func testDescribe() throws {
        let dedup = try XCTUnwrap(BuiltinStages.registry.factory(for: "dedup")).describe()
        XCTAssertTrue(dedup.hasPrefix("dedup: drops retried copies"), dedup)
        XCTAssertTrue(dedup.contains("  window (duration, default 10m)\n"), dedup)
        XCTAssertTrue(dedup.contains("      example: window: 5m\n"), dedup)
        let noise = try XCTUnwrap(BuiltinStages.registry.factory(for: "noise_filter")).describe()
        XCTAssertTrue(noise.contains("  rules[].within (duration, default 1s)\n"), noise)
        XCTAssertTrue(noise.contains("      example: within: 500ms\n"), noise)
        // Code spans are reduced to their text for a terminal.
        let windows = try XCTUnwrap(BuiltinStages.registry.factory(for: "windows")).describe()
        XCTAssertTrue(windows.contains("  partials_topic (string, default <group>.partials)\n"), windows)
    }

    /// The tables of pipelines/README.md are what the declarations generate (run
    /// `maidian stages --write-reference pipelines/README.md` after changing a stage's settings).
    func testCheckedInReferenceIsCurrent() throws {
        let path = repositoryRoot + "/pipelines/README.md"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let updated = try BuiltinStages.registry.updatingReference(in: text, file: path)
        XCTAssertTrue(text == updated, "pipelines/README.md's settings tables are stale: run `maidian stages --write-reference pipelines/README.md`")
    }

    func testStaleMissingAndUnknownReferencesAreFound() throws {
        let registry = BuiltinStages.registry
        let current = try registry.updatingReference(in: String(contentsOfFile: repositoryRoot + "/pipelines/README.md", encoding: .utf8), file: "R.md")
        let stale = current.replacingOccurrences(of: "| `window` | duration | `10m` |", with: "| `window` | duration | `5m` |")
        XCTAssertNotEqual(stale, current)
        XCTAssertEqual(try registry.updatingReference(in: stale, file: "R.md"), current)
        let (begin, end) = StageRegistry.referenceMarkers("dedup")
        let withoutDedup = current.replacingOccurrences(of: begin, with: "").replacingOccurrences(of: end, with: "")
        XCTAssertThrowsError(try registry.updatingReference(in: withoutDedup, file: "R.md")) {
            XCTAssertTrue("\($0)".contains("no settings reference for 'dedup'"), "\($0)")
        }
        XCTAssertThrowsError(try registry.updatingReference(in: current + "\n" + StageRegistry.referenceMarkers("nope").begin + "\n", file: "R.md"))
    }
}
