/// One input record of a recording (wire format §6): what a Kafka record of the raw topic holds.
public struct RecordingRecord: Sendable, Equatable {
    /// The record key (the install's anonymous id), or nil for a null key.
    public var key: [UInt8]?
    /// The headers, in order (names may repeat).
    public var headers: [(String, [UInt8])]
    /// The record timestamp, ms since the epoch (the collector's receive time in recorded traffic).
    public var timestamp: Int64?
    /// The record value (zstd frames or JSON, as produced by the collector).
    public var value: [UInt8]

    /// Creates a record.
    public init(key: [UInt8]?, headers: [(String, [UInt8])] = [], timestamp: Int64? = nil, value: [UInt8]) {
        self.key = key
        self.headers = headers
        self.timestamp = timestamp
        self.value = value
    }

    /// Creates a record with a text key and text headers.
    public init(key: String, headers: [(String, String)], timestamp: Int64?, value: [UInt8]) {
        self.key = Array(key.utf8)
        self.headers = headers.map { ($0.0, Array($0.1.utf8)) }
        self.timestamp = timestamp
        self.value = value
    }

    /// The value of the first header with this name.
    public func header(_ name: String) -> [UInt8]? {
        for (n, v) in headers where n == name { return v }
        return nil
    }

    /// The value of the first header with this name, as text (invalid UTF-8 repaired).
    public func headerString(_ name: String) -> String? {
        header(name).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The key as text (invalid UTF-8 repaired).
    public var keyString: String? { key.map { String(decoding: $0, as: UTF8.self) } }

    /// Records are equal when key, headers (in order), timestamp and value are.
    public static func == (a: RecordingRecord, b: RecordingRecord) -> Bool {
        guard a.key == b.key, a.timestamp == b.timestamp, a.value == b.value,
              a.headers.count == b.headers.count else { return false }
        for (x, y) in zip(a.headers, b.headers) where x.0 != y.0 || x.1 != y.1 { return false }
        return true
    }
}

/// A failure reading or writing a recording.
public struct RecordingError: Error, CustomStringConvertible {
    /// The kind of failure.
    public enum Code: Sendable, Equatable {
        /// The file could not be opened, read or written.
        case io
        /// A line is not a valid recording line (bad JSON, missing `value_b64`, bad base64, ...).
        case malformed
        /// The file's zstd compression is corrupt or truncated.
        case compression
    }

    /// The kind of failure.
    public let code: Code
    /// What went wrong, prefixed with `file:line` where known (for example `rec.ndjson:17: ...`).
    public let message: String
    /// The 1-based line number of a malformed line, if any.
    public let line: Int?
    /// The error that caused this one, if any (an I/O or zstd error).
    public let underlying: (any Error)?

    /// Creates an error.
    public init(code: Code, message: String, line: Int? = nil, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.line = line
        self.underlying = underlying
    }

    /// The message.
    public var description: String { message }
}
