import MaidianPipeline
import XCTest

private struct Limits: Decodable {
    var window: ConfigDuration
    var timeout: ConfigDuration?
    var buffer: ByteSize?
}

final class DurationTests: XCTestCase {
    private func ms(_ text: String, line: UInt = #line) -> Int64? {
        do {
            return try ConfigDuration(parsing: text).milliseconds
        } catch {
            XCTFail("'\(text)' did not parse: \(error)", line: line)
            return nil
        }
    }

    private func bytes(_ text: String, line: UInt = #line) -> Int? {
        do {
            return try ByteSize(parsing: text).bytes
        } catch {
            XCTFail("'\(text)' did not parse: \(error)", line: line)
            return nil
        }
    }

    func testValidDurations() {
        XCTAssertEqual(ms("60s"), 60_000)
        XCTAssertEqual(ms("500ms"), 500)
        XCTAssertEqual(ms("10m"), 600_000)
        XCTAssertEqual(ms("1h"), 3_600_000)
        XCTAssertEqual(ms("1h30m"), 5_400_000)
        XCTAssertEqual(ms("1h 30m"), 5_400_000)
        XCTAssertEqual(ms("2d"), 172_800_000)
        XCTAssertEqual(ms("1.5s"), 1_500)
        XCTAssertEqual(ms("1m30s250ms"), 90_250)
        XCTAssertEqual(ms("250"), 250, "a bare integer is milliseconds")
        XCTAssertEqual(ms("0"), 0)
        XCTAssertEqual(ms("1_500"), 1_500)
    }

    func testInvalidDurations() {
        for text in ["", "ten minutes", "10x", "10 M", "-5s", "1.s", ".5s", "s", "10m-", "1y", "1.5", "99999999999999999d"] {
            XCTAssertThrowsError(try ConfigDuration(parsing: text), "'\(text)'") { error in
                let e = error as? PipelineError
                XCTAssertEqual(e?.code, .badValue)
                XCTAssertEqual(e?.hint, "use e.g. 60s, 10m, 500ms")
            }
        }
    }

    func testDurationDescriptionAndConversions() {
        XCTAssertEqual(ConfigDuration(milliseconds: 5_400_000).description, "1h30m")
        XCTAssertEqual(ConfigDuration(milliseconds: 500).description, "500ms")
        XCTAssertEqual(ConfigDuration(milliseconds: 90_061_001).description, "1d1h1m1s1ms")
        XCTAssertEqual(ConfigDuration.zero.description, "0s")
        XCTAssertEqual(ConfigDuration.seconds(90), .milliseconds(90_000))
        XCTAssertEqual(ConfigDuration.hours(1).seconds, 3600)
        XCTAssertEqual(ConfigDuration.seconds(2).duration, .seconds(2))
        XCTAssertLessThan(ConfigDuration.seconds(59), .minutes(1))
    }

    func testDurationDecoding() throws {
        let node = try ConfigDocument.parse(yaml: "window: 10m\ntimeout: 1500\n", file: "d.yaml", environment: [:])
        let limits = try node.decode(Limits.self)
        XCTAssertEqual(limits.window, .minutes(10))
        XCTAssertEqual(limits.timeout, .milliseconds(1500))

        let bad = try ConfigDocument.parse(yaml: "window: 10 minutes\n", file: "d.yaml", environment: [:])
        XCTAssertThrowsError(try bad.decode(Limits.self)) { error in
            XCTAssertEqual("\(error)", "d.yaml:1:9: expected a duration for 'window', got '10 minutes' (use e.g. 60s, 10m, 500ms)")
            XCTAssertEqual((error as? PipelineError)?.code, .badValue)
        }
        let list = try ConfigDocument.parse(yaml: "window: [1s]\n", file: "d.yaml", environment: [:])
        XCTAssertThrowsError(try list.decode(Limits.self)) { error in
            XCTAssertEqual("\(error)", "d.yaml:1:9: expected a duration for 'window', got a list (use e.g. 60s, 10m, 500ms)")
        }
    }

    func testValidSizes() {
        XCTAssertEqual(bytes("1MiB"), 1 << 20)
        XCTAssertEqual(bytes("16MiB"), 16 << 20)
        XCTAssertEqual(bytes("512KiB"), 512 << 10)
        XCTAssertEqual(bytes("1GiB"), 1 << 30)
        XCTAssertEqual(bytes("2TiB"), 2 << 40)
        XCTAssertEqual(bytes("1MB"), 1_000_000)
        XCTAssertEqual(bytes("1KB"), 1_000)
        XCTAssertEqual(bytes("3GB"), 3_000_000_000)
        XCTAssertEqual(bytes("100B"), 100)
        XCTAssertEqual(bytes("16 MiB"), 16 << 20)
        XCTAssertEqual(bytes("1mib"), 1 << 20)
        XCTAssertEqual(bytes("1.5KiB"), 1536)
        XCTAssertEqual(bytes("4096"), 4096, "a bare integer is bytes")
        XCTAssertEqual(bytes("1_048_576"), 1 << 20)
    }

    func testInvalidSizes() {
        for text in ["", "lots", "16M", "1.5", "-1KiB", "1 KiB extra", "KiB", "99999999999TiB"] {
            XCTAssertThrowsError(try ByteSize(parsing: text), "'\(text)'") { error in
                XCTAssertEqual((error as? PipelineError)?.code, .badValue)
                XCTAssertEqual((error as? PipelineError)?.hint, ByteSize.formatHint)
            }
        }
    }

    func testSizeDescriptionAndDecoding() throws {
        XCTAssertEqual(ByteSize.mebibytes(16).description, "16MiB")
        XCTAssertEqual(ByteSize(bytes: 1_000_000).description, "1MB")
        XCTAssertEqual(ByteSize(bytes: 1500).description, "1500B")
        XCTAssertEqual(ByteSize(bytes: 0).description, "0B")

        let node = try ConfigDocument.parse(yaml: "window: 1s\nbuffer: 16MiB\n", file: "s.yaml", environment: [:])
        XCTAssertEqual(try node.decode(Limits.self).buffer, .mebibytes(16))
        let bad = try ConfigDocument.parse(yaml: "window: 1s\nbuffer: 16M\n", file: "s.yaml", environment: [:])
        XCTAssertThrowsError(try bad.decode(Limits.self)) { error in
            XCTAssertEqual(
                "\(error)",
                "s.yaml:2:9: expected a size for 'buffer', got '16M' (\(ByteSize.formatHint))")
        }
    }
}
