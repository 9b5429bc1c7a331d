import MaidianPipeline
import XCTest

private struct Source: Decodable {
    var brokers: String
    var port: Int
    var group: String?
}

final class EnvSubstitutionTests: XCTestCase {
    private func apply(_ text: String, _ env: [String: String] = [:]) throws -> String {
        try EnvironmentSubstitution.apply(to: text, environment: env)
    }

    private func failure(_ text: String, _ env: [String: String] = [:], line: UInt = #line) -> PipelineError? {
        do {
            let out = try apply(text, env)
            XCTFail("expected an error, got '\(out)'", line: line)
            return nil
        } catch {
            return error as? PipelineError
        }
    }

    func testSetVariable() throws {
        XCTAssertEqual(try apply("${HOST}", ["HOST": "kafka-1"]), "kafka-1")
        XCTAssertEqual(try apply("${HOST}:${PORT}", ["HOST": "k", "PORT": "9092"]), "k:9092")
        XCTAssertEqual(try apply("pre-${A}-post", ["A": "x"]), "pre-x-post")
        XCTAssertEqual(try apply("no references here $HOME $ {X}"), "no references here $HOME $ {X}")
    }

    func testDefaults() throws {
        XCTAssertEqual(try apply("${PORT:-9090}"), "9090")
        XCTAssertEqual(try apply("${PORT:-9090}", ["PORT": "1"]), "1")
        XCTAssertEqual(try apply("${A:-}"), "")
        XCTAssertEqual(try apply("${A:-a b, c}"), "a b, c")
        XCTAssertEqual(try apply("${A:-${B:-inner}}"), "inner")
        XCTAssertEqual(try apply("${A:-${B}}", ["B": "b"]), "b")
        // The default is only resolved when it is used.
        XCTAssertEqual(try apply("${A:-${UNSET}}", ["A": "a"]), "a")
    }

    func testEmptyVariable() throws {
        // `:-` uses the default for an empty variable, as in the shell ...
        XCTAssertEqual(try apply("${E:-fallback}", ["E": ""]), "fallback")
        // ... `-` only for an unset one ...
        XCTAssertEqual(try apply("${E-fallback}", ["E": ""]), "")
        XCTAssertEqual(try apply("${E-fallback}"), "fallback")
        // ... and a plain reference to an empty variable is the empty string, not an error.
        XCTAssertEqual(try apply("[${E}]", ["E": ""]), "[]")
    }

    func testUnsetVariableIsAnError() {
        let e = failure("${KAFKA_BROKERS}")
        XCTAssertEqual(e?.code, .environment)
        XCTAssertEqual(e?.message, "environment variable 'KAFKA_BROKERS' is not set")
        XCTAssertEqual(e?.hint, "use ${KAFKA_BROKERS:-default}")
    }

    func testEscape() throws {
        XCTAssertEqual(try apply("$${HOME}"), "${HOME}")
        XCTAssertEqual(try apply("a$${X}b${Y}", ["Y": "y"]), "a${X}by")
        XCTAssertEqual(try apply("$$ and $"), "$$ and $")
        XCTAssertEqual(try apply("${A:-$${lit}}"), "${lit}")
    }

    func testMalformedReferences() {
        XCTAssertEqual(failure("${A")?.message, "unterminated environment variable reference '${A'")
        XCTAssertEqual(failure("${A:-abc")?.message, "unterminated environment variable reference '${A:-abc'")
        XCTAssertEqual(failure("${}")?.message, "invalid environment variable reference '${}'")
        XCTAssertEqual(failure("${1A}")?.code, .environment)
        XCTAssertEqual(failure("${A.B}")?.message, "invalid environment variable reference '${A.B}'")
    }

    func testSubstitutionInDocumentIsTypedByParsing() throws {
        let yaml = """
            brokers: ${BROKERS:-localhost:9092}
            port: ${PORT:-9090}
            group: "${GROUP:-}"
            """
        let node = try ConfigDocument.parse(yaml: yaml, file: "p.yaml", environment: [:])
        let s = try node.decode(Source.self)
        XCTAssertEqual(s.brokers, "localhost:9092")
        XCTAssertEqual(s.port, 9090)
        XCTAssertEqual(s.group, "", "a quoted empty value stays an empty string")

        let env = ["BROKERS": "k1:9092,k2:9092", "PORT": "19092", "GROUP": "g"]
        let s2 = try ConfigDocument.parse(yaml: yaml, file: "p.yaml", environment: env).decode(Source.self)
        XCTAssertEqual(s2.brokers, "k1:9092,k2:9092")
        XCTAssertEqual(s2.port, 19092)
        XCTAssertEqual(s2.group, "g")

        // An unquoted value that becomes empty is null, as YAML would read it.
        let s3 = try ConfigDocument.parse(yaml: "brokers: b\nport: 1\ngroup: ${G:-}\n", file: "p.yaml", environment: [:])
            .decode(Source.self)
        XCTAssertNil(s3.group)

        // A substituted value that is not a number fails where it is written.
        XCTAssertThrowsError(
            try ConfigDocument.parse(yaml: "brokers: b\nport: ${PORT}\n", file: "p.yaml", environment: ["PORT": "http"])
                .decode(Source.self)
        ) { error in
            XCTAssertEqual("\(error)", "p.yaml:2:7: expected an integer for 'port', got 'http'")
        }
    }

    // Note: inside flow collections (`[...]`, `{...}`) YAML reads `{` and `}` as structure, so references
    // there must be quoted; in block style they need no quotes.
    func testUnsetVariablesInDocumentAreAllReportedWithLocations() {
        let yaml = """
            brokers: ${BROKERS}
            port: 1
            group: "g-${TEAM}"
            keys: [a, "pre ${X} post"]
            """
        XCTAssertThrowsError(try ConfigDocument.parse(yaml: yaml, file: "p.yaml", environment: [:])) { error in
            XCTAssertEqual(PipelineErrors.flatten(error).map(\.description), [
                "p.yaml:1:10: environment variable 'BROKERS' is not set (use ${BROKERS:-default})",
                "p.yaml:3:11: environment variable 'TEAM' is not set (use ${TEAM:-default})",
                "p.yaml:4:16: environment variable 'X' is not set (use ${X:-default})",
            ])
        }
    }

    func testKeysAndEscapesInDocument() throws {
        let node = try ConfigDocument.parse(
            yaml: "${K}: 1\ntemplate: 'Hello $${name}'\n", file: "p.yaml", environment: [:])
        XCTAssertEqual(node.keys, ["${K}", "template"], "keys are not substituted")
        XCTAssertEqual(node["template"]?.string, "Hello ${name}")
    }
}
