import ArgumentParser
import Foundation
import Logging
import Synchronization

/// `--log-format`.
enum LogFormat: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// swift-log's standard lines: `time level label: [source] message`.
    case text
    /// One JSON object per line: `time`, `level`, `label`, `message`, `metadata`.
    case json
}

/// A log handler writing one JSON object per line to standard error:
/// `{"time":"2026-11-21T10:00:35.123Z","level":"info","label":"maidian","message":"...","metadata":{...}}`.
/// Lines are written whole (one `write` each, under a process-wide lock), so lines of different threads never mix.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.metadataProvider = metadataProvider
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let explicit = event.metadata { all.merge(explicit) { _, new in new } }
        if let error = event.error { all["error"] = "\(error)" }
        var out = "{\"time\":\"\(Self.timestamp())\",\"level\":\"\(event.level.rawValue)\",\"label\":"
        JSONText.quote(label, into: &out)
        out += ",\"message\":"
        JSONText.quote(event.message.description, into: &out)
        out += ",\"metadata\":"
        JSONText.object(all, into: &out)
        out += "}\n"
        StandardErrorLines.write(out)
    }

    /// Now, UTC, milliseconds: `2026-11-21T10:00:35.123Z`.
    static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = tm()
        var seconds = ts.tv_sec
        gmtime_r(&seconds, &t)
        func pad(_ v: Int32, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(t.tm_year + 1900, 4))-\(pad(t.tm_mon + 1, 2))-\(pad(t.tm_mday, 2))T"
            + "\(pad(t.tm_hour, 2)):\(pad(t.tm_min, 2)):\(pad(t.tm_sec, 2)).\(pad(Int32(ts.tv_nsec / 1_000_000), 3))Z"
    }
}

/// Whole lines to standard error, one `write(2)` each, serialized.
enum StandardErrorLines {
    private static let lock = Mutex(())

    static func write(_ line: String) {
        var bytes = Array(line.utf8)
        lock.withLock { _ in
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeMutableBytes { Foundation.write(2, $0.baseAddress! + offset, $0.count - offset) }
                if n < 0 { if errno == EINTR { continue } else { return } }
                offset += n
            }
        }
        bytes.removeAll()
    }
}

/// JSON text for log lines.
enum JSONText {
    static func quote(_ s: String, into out: inout String) {
        out.append("\"")
        for u in s.unicodeScalars {
            switch u {
            case "\"": out.append("\\\"")
            case "\\": out.append("\\\\")
            case "\n": out.append("\\n")
            case "\r": out.append("\\r")
            case "\t": out.append("\\t")
            case _ where u.value < 0x20:
                let hex = String(u.value, radix: 16)
                out.append("\\u" + String(repeating: "0", count: 4 - hex.count) + hex)
            default: out.unicodeScalars.append(u)
            }
        }
        out.append("\"")
    }

    static func object(_ metadata: Logger.Metadata, into out: inout String) {
        out.append("{")
        for (i, key) in metadata.keys.sorted().enumerated() {
            if i > 0 { out.append(",") }
            quote(key, into: &out)
            out.append(":")
            value(metadata[key]!, into: &out)
        }
        out.append("}")
    }

    static func value(_ v: Logger.MetadataValue, into out: inout String) {
        switch v {
        case .string(let s): quote(s, into: &out)
        case .stringConvertible(let c): quote(c.description, into: &out)
        case .dictionary(let d): object(d, into: &out)
        case .array(let a):
            out.append("[")
            for (i, e) in a.enumerated() {
                if i > 0 { out.append(",") }
                value(e, into: &out)
            }
            out.append("]")
        }
    }
}
