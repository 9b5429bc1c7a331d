import MaidianEvents

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Recordings (wire format §6): NDJSON, one input record per line, in topic order, optionally
/// zstd-compressed as a whole (`.ndjson.zst`):
///
/// ```json
/// {"key":"a0000285-0bd0b8ab","headers":{"ip":"1.0.1.3","received_at":"1763700011951"},"timestamp":1763700011951,"value_b64":"KLUv/W..."}
/// ```
///
/// A dedicated parser for this line shape (no Foundation JSON): unknown keys are ignored, `key` and
/// `timestamp` may be null or missing, `headers` may be missing, `value_b64` is required.
public enum Recording {
    /// Reads every record of a recording file. Compression is detected by the zstd magic, so both
    /// `.ndjson` and `.ndjson.zst` work whatever their names.
    public static func read(path: String) throws -> [RecordingRecord] {
        var records: [RecordingRecord] = []
        try forEachRecord(path: path) { records.append($0) }
        return records
    }

    /// Streams the records of a recording file to `body`, in file order, holding only a few MiB of the
    /// file at a time. Compression is detected by the zstd magic.
    public static func forEachRecord(path: String, _ body: (RecordingRecord) throws -> Void) throws {
        let source = ChunkSource.open(path)
        let reader: ChunkSource
        switch source {
        case .success(let r): reader = r
        case .failure(let e): throw e
        }
        var buf: [UInt8] = []
        buf.reserveCapacity(9 << 20)
        var line = 1
        var parser = LineParser()
        while true {
            let got: Int
            do {
                got = try reader.read(into: &buf, maxBytes: 8 << 20)
            } catch let e as ZstdError {
                throw RecordingError(code: .compression, message: "\(path):\(line): \(e)", line: line, underlying: e)
            } catch let e as ZstdFileError {
                throw RecordingError(code: .io, message: "\(path): \(e.message)", underlying: e)
            }
            let atEnd = got == 0
            let used = try buf.withUnsafeBytes { raw in
                try parseLines(raw, final: atEnd, source: path, line: &line, parser: &parser, body)
            }
            if used > 0 { buf.removeFirst(used) }
            if atEnd { break }
        }
    }

    /// Parses a whole recording held in memory (plain NDJSON, or zstd-compressed NDJSON).
    public static func parse(_ bytes: [UInt8]) throws -> [RecordingRecord] {
        var records: [RecordingRecord] = []
        try parse(bytes, source: "<bytes>") { records.append($0) }
        return records
    }

    /// Parses a whole recording held in memory, streaming its records to `body`. `source` names it in
    /// error messages.
    public static func parse(_ bytes: [UInt8], source: String, _ body: (RecordingRecord) throws -> Void) throws {
        var text = bytes
        let compressed = bytes.withUnsafeBytes { ZstdDecompressor.hasMagic($0) }
        if compressed {
            do {
                text = try ZstdDecompressor().decompress(bytes)
            } catch {
                throw RecordingError(code: .compression, message: "\(source): \(error)", underlying: error)
            }
        }
        var line = 1
        var parser = LineParser()
        _ = try text.withUnsafeBytes { raw in
            try parseLines(raw, final: true, source: source, line: &line, parser: &parser, body)
        }
    }

    /// Parses one line (without its newline). Returns nil for a blank line.
    public static func parseLine(_ line: UnsafeRawBufferPointer) throws -> RecordingRecord? {
        var parser = LineParser()
        do throws(LineError) {
            return try parser.parse(line)
        } catch {
            throw RecordingError(code: .malformed, message: "line 1: \(error.message) (at byte \(error.offset))", line: 1)
        }
    }

    /// Parses complete lines of `raw`; the last, unterminated one only if `final`. Returns the number of
    /// bytes consumed and advances `line`.
    static func parseLines(
        _ raw: UnsafeRawBufferPointer, final: Bool, source: String, line: inout Int,
        parser: inout LineParser, _ body: (RecordingRecord) throws -> Void
    ) throws -> Int {
        let n = raw.count
        guard n > 0, let base = raw.baseAddress else { return 0 }
        var start = 0
        while start < n {
            let end: Int
            if let q = memchr(base + start, 0x0A, n - start) {
                end = base.distance(to: UnsafeRawPointer(q))
            } else if final {
                end = n
            } else {
                break
            }
            let slice = UnsafeRawBufferPointer(rebasing: raw[start..<end])
            let record: RecordingRecord?
            do throws(LineError) {
                record = try parser.parse(slice)
            } catch {
                throw RecordingError(
                    code: .malformed, message: "\(source):\(line): \(error.message) (at byte \(error.offset + 1))",
                    line: line)
            }
            if let record { try body(record) }
            line += 1
            start = end + 1
        }
        return Swift.min(start, n)
    }

    /// Appends one record as a recording line (with its newline), keys in the order `key`, `headers`,
    /// `timestamp`, `value_b64`. Strings are JSON-escaped; bytes that are not valid UTF-8 (in the key
    /// or header values) are written as U+FFFD.
    public static func appendLine(_ r: RecordingRecord, to out: inout [UInt8]) {
        out.append(static: "{\"key\":")
        if let key = r.key {
            JSONText.appendQuoted(key, to: &out)
        } else {
            out.append(static: "null")
        }
        out.append(static: ",\"headers\":{")
        for (i, h) in r.headers.enumerated() {
            if i > 0 { out.append(0x2C) }
            JSONText.appendQuoted(h.0, to: &out)
            out.append(0x3A)
            JSONText.appendQuoted(h.1, to: &out)
        }
        out.append(static: "},\"timestamp\":")
        if let ts = r.timestamp {
            out.append(decimal: ts)
        } else {
            out.append(static: "null")
        }
        out.append(static: ",\"value_b64\":\"")
        r.value.withUnsafeBytes { Base64.encode($0, into: &out) }
        out.append(static: "\"}\n")
    }

    /// Writes records to a recording file. `compress` nil means: compress when the path ends in `.zst`.
    public static func write(_ records: [RecordingRecord], to path: String, compress: Bool? = nil) throws {
        let w = try RecordingWriter(path: path, compress: compress)
        for r in records { try w.append(r) }
        try w.close()
    }
}

/// Where a line parse failed.
struct LineError: Error {
    var message: String
    var offset: Int
}

/// The parser for one recording line. Holds a reusable scratch buffer for escaped strings.
struct LineParser {
    private var p: UnsafePointer<UInt8> = UnsafePointer(bitPattern: 1)!
    private var i = 0
    private var n = 0
    private var scratch: [UInt8] = []

    init() {}

    @inline(__always)
    private func fail(_ message: String) -> LineError { LineError(message: message, offset: i) }

    @inline(__always)
    private mutating func ws() {
        while i < n {
            let c = p[i]
            if c == 0x20 || c == 0x09 || c == 0x0D || c == 0x0A { i += 1 } else { break }
        }
    }

    @inline(__always)
    private mutating func expect(_ c: UInt8, _ what: StaticString) throws(LineError) {
        ws()
        guard i < n, p[i] == c else {
            throw fail(i < n ? "expected \(what), found '\(printable(p[i]))'" : "expected \(what), found end of line")
        }
        i += 1
    }

    private func printable(_ c: UInt8) -> String {
        c >= 0x20 && c < 0x7F ? String(UnicodeScalar(c)) : "\\x" + String(c, radix: 16)
    }

    mutating func parse(_ line: UnsafeRawBufferPointer) throws(LineError) -> RecordingRecord? {
        guard let b = line.baseAddress else { return nil }
        p = b.assumingMemoryBound(to: UInt8.self)
        i = 0
        n = line.count
        ws()
        if i == n { return nil }  // blank line
        try expect(0x7B, "'{' at the start of a record")
        var key: [UInt8]? = nil
        var headers: [(String, [UInt8])] = []
        var timestamp: Int64? = nil
        var value: [UInt8]? = nil
        ws()
        if i < n && p[i] == 0x7D {
            i += 1
        } else {
            while true {
                ws()
                let name = try string()
                try expect(0x3A, "':'")
                ws()
                switch fieldID(name) {
                case 1:  // key
                    if literal("null") { key = nil } else { key = try stringBytes() }
                case 2:  // headers
                    headers = try headerObject()
                case 3:  // timestamp
                    timestamp = try optionalInteger()
                case 4:  // value_b64
                    value = try base64String()
                default:
                    try skipValue(depth: 0)
                }
                ws()
                guard i < n else { throw fail("unterminated record object") }
                if p[i] == 0x2C { i += 1; continue }
                if p[i] == 0x7D { i += 1; break }
                throw fail("expected ',' or '}', found '\(printable(p[i]))'")
            }
        }
        ws()
        if i != n { throw fail("unexpected characters after the record object") }
        guard let value else { throw LineError(message: "missing \"value_b64\"", offset: 0) }
        return RecordingRecord(key: key, headers: headers, timestamp: timestamp, value: value)
    }

    /// A string token: its raw content span, and whether it holds escapes.
    private struct StringToken {
        var start: Int
        var end: Int
        var escaped: Bool
    }

    /// Scans a string token starting at the opening quote.
    @inline(__always)
    private mutating func string() throws(LineError) -> StringToken {
        guard i < n, p[i] == 0x22 else {
            throw fail(i < n ? "expected a string, found '\(printable(p[i]))'" : "expected a string, found end of line")
        }
        let start = i + 1
        guard let q = memchr(p + start, 0x22, n - start) else { throw fail("unterminated string") }
        let qi = p.distance(to: q.assumingMemoryBound(to: UInt8.self))
        if memchr(p + start, 0x5C, qi - start) == nil {
            i = qi + 1
            return StringToken(start: start, end: qi, escaped: false)
        }
        // Escapes present: the first quote may be escaped; walk byte by byte.
        var j = start
        while j < n {
            let c = p[j]
            if c == 0x5C {
                j += 2
                continue
            }
            if c == 0x22 {
                i = j + 1
                return StringToken(start: start, end: j, escaped: true)
            }
            j += 1
        }
        throw fail("unterminated string")
    }

    /// 1 key, 2 headers, 3 timestamp, 4 value_b64, 0 anything else.
    @inline(__always)
    private func fieldID(_ t: StringToken) -> Int {
        if t.escaped { return 0 }
        let len = t.end - t.start
        let s = p + t.start
        switch len {
        case 3: return s[0] == 0x6B && s[1] == 0x65 && s[2] == 0x79 ? 1 : 0
        case 7: return memcmp(s, "headers", 7) == 0 ? 2 : 0
        case 9:
            if memcmp(s, "timestamp", 9) == 0 { return 3 }
            if memcmp(s, "value_b64", 9) == 0 { return 4 }
            return 0
        default: return 0
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let len = word.utf8CodeUnitCount
        if i + len <= n && memcmp(p + i, word.utf8Start, len) == 0 {
            i += len
            return true
        }
        return false
    }

    /// The decoded bytes of a string value.
    private mutating func stringBytes() throws(LineError) -> [UInt8] {
        let t = try string()
        if !t.escaped { return Array(UnsafeBufferPointer(start: p + t.start, count: t.end - t.start)) }
        scratch.removeAll(keepingCapacity: true)
        try unescape(t, into: &scratch)
        return scratch
    }

    private mutating func headerObject() throws(LineError) -> [(String, [UInt8])] {
        if literal("null") { return [] }
        try expect(0x7B, "'{' for headers")
        var out: [(String, [UInt8])] = []
        ws()
        if i < n && p[i] == 0x7D { i += 1; return out }
        while true {
            ws()
            let nameBytes = try stringBytes()
            let name = String(decoding: nameBytes, as: UTF8.self)
            try expect(0x3A, "':'")
            ws()
            guard i < n else { throw fail("missing header value") }
            let c = p[i]
            if c == 0x22 {
                out.append((name, try stringBytes()))
            } else if literal("null") {
                // A null header value: the header is absent.
            } else {
                // Numbers and booleans are kept as their text.
                let s = i
                try skipValue(depth: 1)
                out.append((name, Array(UnsafeBufferPointer(start: p + s, count: i - s))))
            }
            ws()
            guard i < n else { throw fail("unterminated headers object") }
            if p[i] == 0x2C { i += 1; continue }
            if p[i] == 0x7D { i += 1; return out }
            throw fail("expected ',' or '}' in headers, found '\(printable(p[i]))'")
        }
    }

    /// An integer, a numeric string, or null.
    private mutating func optionalInteger() throws(LineError) -> Int64? {
        if literal("null") { return nil }
        guard i < n else { throw fail("missing timestamp") }
        if p[i] == 0x22 {
            let t = try string()
            guard !t.escaped, let v = Int64(String(decoding: UnsafeBufferPointer(start: p + t.start, count: t.end - t.start), as: UTF8.self))
            else { throw LineError(message: "timestamp is not an integer", offset: t.start) }
            return v
        }
        let s = i
        var neg = false
        if p[i] == 0x2D { neg = true; i += 1 }
        var v: Int64 = 0
        var digits = 0
        var overflow = false
        while i < n, p[i] >= 0x30, p[i] <= 0x39 {
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(Int64(p[i] - 0x30))
            overflow = overflow || o1 || o2
            v = a
            digits += 1
            i += 1
        }
        if digits == 0 { i = s; throw fail("timestamp is not a number") }
        if i < n, p[i] == 0x2E || p[i] == 0x65 || p[i] == 0x45 {
            // A fraction or exponent: accept only an integral value.
            while i < n, (p[i] >= 0x30 && p[i] <= 0x39) || p[i] == 0x2E || p[i] == 0x65 || p[i] == 0x45 || p[i] == 0x2B || p[i] == 0x2D {
                i += 1
            }
            let text = String(decoding: UnsafeBufferPointer(start: p + s, count: i - s), as: UTF8.self)
            guard let d = Double(text), d == d.rounded(), let iv = Int64(exactly: d) else {
                throw LineError(message: "timestamp is not an integer", offset: s)
            }
            return iv
        }
        if overflow { throw LineError(message: "timestamp out of range", offset: s) }
        return neg ? -v : v
    }

    private mutating func base64String() throws(LineError) -> [UInt8] {
        guard i < n, p[i] == 0x22 else { throw fail("value_b64 is not a string") }
        let t = try string()
        let decoded: [UInt8]?
        if !t.escaped {
            decoded = Base64.decode(UnsafeRawBufferPointer(start: p + t.start, count: t.end - t.start))
        } else {
            scratch.removeAll(keepingCapacity: true)
            try unescape(t, into: &scratch)
            decoded = scratch.withUnsafeBytes { Base64.decode($0) }
        }
        guard let decoded else { throw LineError(message: "value_b64 is not valid base64", offset: t.start) }
        return decoded
    }

    @inline(__always)
    private func hexValue(_ c: UInt8) -> UInt32? {
        switch c {
        case 0x30...0x39: return UInt32(c - 0x30)
        case 0x41...0x46: return UInt32(c - 0x41 + 10)
        case 0x61...0x66: return UInt32(c - 0x61 + 10)
        default: return nil
        }
    }

    private func hex4(_ at: Int, _ end: Int) -> UInt32? {
        guard at + 4 <= end else { return nil }
        var v: UInt32 = 0
        for k in 0..<4 {
            guard let h = hexValue(p[at + k]) else { return nil }
            v = v << 4 | h
        }
        return v
    }

    private func appendScalar(_ v: UInt32, _ out: inout [UInt8]) {
        switch v {
        case 0..<0x80:
            out.append(UInt8(v))
        case 0x80..<0x800:
            out.append(UInt8(0xC0 | (v >> 6)))
            out.append(UInt8(0x80 | (v & 0x3F)))
        case 0x800..<0x10000:
            out.append(UInt8(0xE0 | (v >> 12)))
            out.append(UInt8(0x80 | ((v >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (v & 0x3F)))
        default:
            out.append(UInt8(0xF0 | (v >> 18)))
            out.append(UInt8(0x80 | ((v >> 12) & 0x3F)))
            out.append(UInt8(0x80 | ((v >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (v & 0x3F)))
        }
    }

    /// Decodes the escapes of a string token. `\uXXXX` pairs become one scalar; a lone surrogate
    /// becomes U+FFFD.
    private func unescape(_ t: StringToken, into out: inout [UInt8]) throws(LineError) {
        var j = t.start
        let end = t.end
        while j < end {
            let c = p[j]
            if c != 0x5C {
                out.append(c)
                j += 1
                continue
            }
            guard j + 1 < end else { throw LineError(message: "bad escape at the end of a string", offset: j) }
            let e = p[j + 1]
            j += 2
            switch e {
            case 0x22: out.append(0x22)
            case 0x5C: out.append(0x5C)
            case 0x2F: out.append(0x2F)
            case 0x62: out.append(0x08)
            case 0x66: out.append(0x0C)
            case 0x6E: out.append(0x0A)
            case 0x72: out.append(0x0D)
            case 0x74: out.append(0x09)
            case 0x75:
                guard let u = hex4(j, end) else { throw LineError(message: "bad \\u escape", offset: j - 2) }
                j += 4
                if u >= 0xD800 && u < 0xDC00 {
                    // High surrogate: needs a following \uDC00-\uDFFF.
                    if j + 6 <= end, p[j] == 0x5C, p[j + 1] == 0x75, let lo = hex4(j + 2, end), lo >= 0xDC00, lo < 0xE000 {
                        j += 6
                        appendScalar(0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00), &out)
                    } else {
                        appendScalar(0xFFFD, &out)
                    }
                } else if u >= 0xDC00 && u < 0xE000 {
                    appendScalar(0xFFFD, &out)
                } else {
                    appendScalar(u, &out)
                }
            default:
                throw LineError(message: "bad escape '\\\(printable(e))'", offset: j - 2)
            }
        }
    }

    /// Skips any JSON value.
    private mutating func skipValue(depth: Int) throws(LineError) {
        if depth > 64 { throw fail("nesting too deep") }
        ws()
        guard i < n else { throw fail("missing value") }
        switch p[i] {
        case 0x22:
            _ = try string()
        case 0x7B, 0x5B:
            let close: UInt8 = p[i] == 0x7B ? 0x7D : 0x5D
            let isObject = close == 0x7D
            i += 1
            ws()
            if i < n && p[i] == close { i += 1; return }
            while true {
                ws()
                if isObject {
                    _ = try string()
                    try expect(0x3A, "':'")
                }
                try skipValue(depth: depth + 1)
                ws()
                guard i < n else { throw fail("unterminated container") }
                if p[i] == 0x2C { i += 1; continue }
                if p[i] == close { i += 1; return }
                throw fail("expected ',' or a closing bracket, found '\(printable(p[i]))'")
            }
        case 0x74:
            if !literal("true") { throw fail("bad literal") }
        case 0x66:
            if !literal("false") { throw fail("bad literal") }
        case 0x6E:
            if !literal("null") { throw fail("bad literal") }
        case 0x2D, 0x30...0x39:
            let s = i
            while i < n, (p[i] >= 0x30 && p[i] <= 0x39) || p[i] == 0x2E || p[i] == 0x65 || p[i] == 0x45 || p[i] == 0x2B || p[i] == 0x2D {
                i += 1
            }
            if i == s { throw fail("bad number") }
        default:
            throw fail("unexpected '\(printable(p[i]))'")
        }
    }
}

/// A source of (decompressed) recording bytes.
final class ChunkSource {
    private let zstd: ZstdFileReader?
    private let fd: Int32
    private let path: String

    private init(path: String, zstd: ZstdFileReader?, fd: Int32) {
        self.path = path
        self.zstd = zstd
        self.fd = fd
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    static func open(_ path: String) -> Result<ChunkSource, RecordingError> {
        let fd = sysOpen(path, O_RDONLY)
        if fd < 0 {
            return .failure(RecordingError(code: .io, message: "\(path): cannot open: \(String(cString: strerror(errno)))"))
        }
        var magic: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
        let got = withUnsafeMutableBytes(of: &magic) { pread(fd, $0.baseAddress!, 4, 0) }
        if got == 4 && magic == (0x28, 0xB5, 0x2F, 0xFD) {
            close(fd)
            do {
                return .success(ChunkSource(path: path, zstd: try ZstdFileReader(path: path), fd: -1))
            } catch {
                return .failure(RecordingError(code: .io, message: "\(path): \(error)", underlying: error))
            }
        }
        return .success(ChunkSource(path: path, zstd: nil, fd: fd))
    }

    /// Appends up to `maxBytes` bytes; returns 0 at the end.
    func read(into out: inout [UInt8], maxBytes: Int) throws -> Int {
        if let zstd { return try zstd.read(into: &out, maxBytes: maxBytes) }
        var failed = false
        var total = 0
        appendRegion(&out, maxBytes) { ptr in
            while total < maxBytes {
                let r = sysRead(fd, ptr + total, maxBytes - total)
                if r < 0 {
                    if errno == EINTR { continue }
                    failed = true
                    break
                }
                if r == 0 { break }
                total += r
            }
            return total
        }
        if failed {
            throw ZstdFileError(path: path, message: "read failed: \(String(cString: strerror(errno)))")
        }
        return total
    }
}

@inline(__always)
func sysOpen(_ path: String, _ flags: Int32, _ mode: mode_t = 0o644) -> Int32 {
    open(path, flags, mode)
}

@inline(__always)
func sysRead(_ fd: Int32, _ p: UnsafeMutableRawPointer, _ n: Int) -> Int {
    read(fd, p, n)
}

@inline(__always)
func sysWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int {
    write(fd, p, n)
}
