import Foundation
import MaidianEvents
import XCTest

@testable import MaidianRecording

/// The sample recording the repository carries.
let samplePath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("testdata/traffic/sample.ndjson").path

func tempDir(_ name: String) throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-rec-\(name)-\(getpid())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

final class RecordingTests: XCTestCase {
    private func sampleBytes() throws -> [UInt8] {
        guard FileManager.default.fileExists(atPath: samplePath) else { throw XCTSkip("no sample traffic at \(samplePath)") }
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: samplePath)))
    }

    func testParsesFirstHundredSampleLines() throws {
        let all = try sampleBytes()
        var lines = 0
        var end = 0
        while lines < 100, let nl = all[end...].firstIndex(of: 0x0A) {
            end = nl + 1
            lines += 1
        }
        let records = try Recording.parse(Array(all[0..<end]))
        XCTAssertEqual(records.count, 100)
        let first = records[0]
        XCTAssertEqual(first.keyString, "a0000285-0bd0b8ab")
        XCTAssertEqual(first.headers.map(\.0), ["ip", "received_at", "project"])
        XCTAssertEqual(first.headerString("ip"), "1.0.1.3")
        XCTAssertEqual(first.headerString("received_at"), "1763700011951")
        XCTAssertEqual(first.headerString("project"), "shop")
        XCTAssertEqual(first.timestamp, 1_763_700_011_951)
        XCTAssertEqual(Array(first.value.prefix(4)), [0x28, 0xB5, 0x2F, 0xFD])
        // The value decompresses to the JSON array of the upload.
        let json = try ZstdDecompressor().decompress(first.value, limit: 16 << 20)
        XCTAssertTrue(String(decoding: json, as: UTF8.self).hasPrefix("[{\"_track_id\":1534247786,\"type\":\"track\",\"event\":\"$AppStart\""))
        for r in records {
            XCTAssertNotNil(r.key)
            XCTAssertGreaterThanOrEqual(r.headers.count, 3)
            XCTAssertEqual(r.timestamp.map(String.init), r.headerString("received_at"))
            XCTAssertFalse(r.value.isEmpty)
        }
        XCTAssertGreaterThan(records.filter { $0.value.starts(with: [0x28, 0xB5, 0x2F, 0xFD]) }.count, 95)
    }

    func testReadsWholeSampleAndRewritesItByteForByte() throws {
        let original = try sampleBytes()
        let records = try Recording.read(path: samplePath)
        XCTAssertEqual(records.count, 9568)
        XCTAssertEqual(records.filter { $0.header("ua") != nil }.count, 970)
        var out: [UInt8] = []
        for r in records { Recording.appendLine(r, to: &out) }
        XCTAssertEqual(out, original, "the writer reproduces the sample file exactly")
    }

    private func oddRecords() -> [RecordingRecord] {
        var rs: [RecordingRecord] = []
        // Every byte value, and lengths that exercise base64 padding.
        rs.append(RecordingRecord(key: Array("k".utf8), headers: [], timestamp: 1, value: (0...255).map { UInt8($0) }))
        for n in 0..<7 {
            rs.append(RecordingRecord(key: nil, headers: [], timestamp: nil, value: (0..<n).map { UInt8(200 + $0) }))
        }
        rs.append(RecordingRecord(
            key: Array("a\"b\\c/d\n\t\u{1}é😀".utf8),
            headers: [("ip", Array("2001:da8::1:2".utf8)), ("ua", Array("Mozilla \"quoted\" \\ back\r\n".utf8)),
                      ("ua", Array("dup name 数据".utf8)), ("x-ctl", [0x00, 0x1F, 0x7F])],
            timestamp: -5, value: Array("[{\"a\":1}]".utf8)))
        rs.append(RecordingRecord(key: [], headers: [("empty", [])], timestamp: Int64.max, value: [0x28, 0xB5, 0x2F, 0xFD]))
        return rs
    }

    func testWriteReadRoundTripPlainAndCompressed() throws {
        let dir = try tempDir("rt")
        defer { try? FileManager.default.removeItem(at: dir) }
        let records = oddRecords() + (try Recording.read(path: samplePath).prefix(500))
        for name in ["r.ndjson", "r.ndjson.zst"] {
            let path = dir.appendingPathComponent(name).path
            try Recording.write(records, to: path)
            let head = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)).prefix(4))
            XCTAssertEqual(head == [0x28, 0xB5, 0x2F, 0xFD], name.hasSuffix(".zst"))
            let back = try Recording.read(path: path)
            XCTAssertEqual(back.count, records.count)
            for (a, b) in zip(records, back) { XCTAssertEqual(a, b) }
            var streamed = 0
            try Recording.forEachRecord(path: path) { r in
                XCTAssertEqual(r, records[streamed])
                streamed += 1
            }
            XCTAssertEqual(streamed, records.count)
        }
        // Compression chosen explicitly, whatever the name.
        let forced = dir.appendingPathComponent("forced.ndjson").path
        try Recording.write(records, to: forced, compress: true)
        XCTAssertEqual(try Recording.read(path: forced), records)
        XCTAssertEqual(try Recording.parse([UInt8](try Data(contentsOf: URL(fileURLWithPath: forced)))), records)
    }

    func testWriterStreamsManyRecords() throws {
        let dir = try tempDir("many")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("many.ndjson.zst").path
        let w = try RecordingWriter(path: path)
        for i in 0..<20_000 {
            try w.append(RecordingRecord(key: "k\(i % 37)", headers: [("received_at", "\(i)")], timestamp: Int64(i),
                                         value: Array("[{\"i\":\(i)}]".utf8)))
        }
        try w.close()
        try w.close()
        XCTAssertEqual(w.recordCount, 20_000)
        XCTAssertLessThan(w.fileBytes, w.textBytes / 4)
        var n: Int64 = 0
        try Recording.forEachRecord(path: path) { r in
            XCTAssertEqual(r.timestamp, n)
            n += 1
        }
        XCTAssertEqual(n, 20_000)
        XCTAssertThrowsError(try w.append(RecordingRecord(key: nil, value: [])))
    }

    func testEscapesAndLenientShapes() throws {
        let text = #"""
        {"key":"a\"b\\c\/d\u00e9\ud83d\ude00\n","headers":{"h1":"x\u0041\t","h2":"\udc00lone","n":42,"skip":null},"timestamp":1763700011951,"value_b64":"W3t9XQ=="}

          { "extra" : {"nested":[1,{"a":[true,false,null]},"s\"}"]}, "value_b64" : "W3t9XQ" , "key" : null, "timestamp" : null }
        {"value_b64":"W3t9\/XQ==","timestamp":1.7637e12,"headers":{}}
        {"value_b64":"W3t9XQ==","key":"crlf"}
        """#.replacingOccurrences(of: "\"key\":\"crlf\"}", with: "\"key\":\"crlf\"}\r")
        let records = try Recording.parse(Array(text.utf8))
        XCTAssertEqual(records.count, 4)
        XCTAssertEqual(records[0].key, Array("a\"b\\c/dé😀\n".utf8))
        XCTAssertEqual(records[0].headers.map(\.0), ["h1", "h2", "n"])
        XCTAssertEqual(records[0].headerString("h1"), "xA\t")
        XCTAssertEqual(records[0].headerString("h2"), "\u{FFFD}lone")
        XCTAssertEqual(records[0].headerString("n"), "42")
        XCTAssertEqual(records[0].value, Array("[{}]".utf8))
        XCTAssertNil(records[1].key)
        XCTAssertNil(records[1].timestamp)
        XCTAssertEqual(records[1].value, Array("[{}]".utf8))
        XCTAssertEqual(records[2].timestamp, 1_763_700_000_000)
        XCTAssertEqual(records[2].value.count, 5)
        XCTAssertEqual(records[3].keyString, "crlf")

        // Writing escapes what must be escaped and repairs invalid UTF-8.
        var line: [UInt8] = []
        Recording.appendLine(RecordingRecord(key: [0x61, 0xFF, 0x62], headers: [("q\"", [0x0A, 0xC3])], timestamp: 7, value: [1]), to: &line)
        XCTAssertEqual(String(decoding: line, as: UTF8.self),
                       "{\"key\":\"a\u{FFFD}b\",\"headers\":{\"q\\\"\":\"\\n\u{FFFD}\"},\"timestamp\":7,\"value_b64\":\"AQ==\"}\n")
        let back = try XCTUnwrap(try line.dropLast().withUnsafeBytes { try Recording.parseLine($0) })
        XCTAssertEqual(back.key, Array("a\u{FFFD}b".utf8))
        XCTAssertEqual(back.headers[0].0, "q\"")
    }

    func testMalformedLineReportsItsLineNumber() throws {
        let good = #"{"key":"k","headers":{},"timestamp":1,"value_b64":"W10="}"#
        let cases: [(String, String)] = [
            ("{\"key\":\"k\",\"value_b64\":\"W10=\"", "unterminated"),
            ("{\"key\":\"k\"}", "missing \"value_b64\""),
            ("{\"key\":\"k\",\"value_b64\":\"W10*\"}", "base64"),
            ("[1,2]", "'{'"),
            ("{\"key\":\"k\",\"value_b64\":\"W10=\"} trailing", "after the record"),
            ("{\"key\":\"bad \\q escape\",\"value_b64\":\"W10=\"}", "bad escape"),
            ("{\"timestamp\":\"soon\",\"value_b64\":\"W10=\"}", "timestamp"),
        ]
        for (bad, fragment) in cases {
            let text = [good, "", good, bad, good].joined(separator: "\n")
            XCTAssertThrowsError(try Recording.parse(Array(text.utf8)), bad) { error in
                let e = error as? RecordingError
                XCTAssertEqual(e?.code, .malformed)
                XCTAssertEqual(e?.line, 4, bad)
                XCTAssertTrue(e?.message.hasPrefix("<bytes>:4: ") ?? false, e?.message ?? "")
                XCTAssertTrue(e?.message.contains(fragment) ?? false, "\(e?.message ?? "") should mention \(fragment)")
            }
        }
        // From a file, the message names the file.
        let dir = try tempDir("bad")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("bad.ndjson.zst").path
        let text = Array([good, good, "{oops}"].joined(separator: "\n").utf8)
        try Data(ZstdCompressor().compress(text)).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try Recording.read(path: path)) { error in
            XCTAssertEqual((error as? RecordingError)?.message.hasPrefix("\(path):3: "), true, "\(error)")
        }
        XCTAssertThrowsError(try Recording.read(path: dir.appendingPathComponent("missing.ndjson").path)) { error in
            XCTAssertEqual((error as? RecordingError)?.code, .io)
        }
        // A truncated compressed file is a compression error.
        let cut = dir.appendingPathComponent("cut.ndjson.zst").path
        let z = ZstdCompressor().compress(Array(String(repeating: good + "\n", count: 200).utf8))
        try Data(z.prefix(z.count - 5)).write(to: URL(fileURLWithPath: cut))
        XCTAssertThrowsError(try Recording.read(path: cut)) { error in
            XCTAssertEqual((error as? RecordingError)?.code, .compression, "\(error)")
        }
    }

    func testBase64AgainstFoundation() {
        var seed: UInt64 = 1
        for n in 0..<300 {
            var bytes: [UInt8] = []
            for _ in 0..<n {
                seed = seed &* 6364136223846793005 &+ 1
                bytes.append(UInt8(truncatingIfNeeded: seed >> 40))
            }
            var enc: [UInt8] = []
            bytes.withUnsafeBytes { Base64.encode($0, into: &enc) }
            XCTAssertEqual(String(decoding: enc, as: UTF8.self), Data(bytes).base64EncodedString())
            XCTAssertEqual(enc.withUnsafeBytes { Base64.decode($0) }, bytes)
        }
        XCTAssertNil(Array("abc$".utf8).withUnsafeBytes { Base64.decode($0) })
        XCTAssertNil(Array("a".utf8).withUnsafeBytes { Base64.decode($0) })
        XCTAssertEqual(Array("AQ".utf8).withUnsafeBytes { Base64.decode($0) }, [1])
    }
}
