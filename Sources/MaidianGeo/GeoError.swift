/// The one error type of MaidianGeo: why a geo database could not be opened.
///
/// Renders as `geo database '/data/GeoLite2-City.mmdb' is not a city database (type GeoLite2-ASN)`; when a
/// lower-level cause is known it follows after a colon (`: No such file or directory`).
public struct GeoError: Error, CustomStringConvertible {
    /// What kind of problem this is (for tests and tools; people read `description`).
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// The file does not exist.
        case fileNotFound
        /// The file exists but cannot be read (permissions, a directory, an I/O error).
        case unreadable
        /// The file is not a MaxMind DB (`.mmdb`) file, or it is corrupt or truncated.
        case invalidDatabase
        /// A valid MaxMind DB, but not a city database (for example GeoLite2-Country or GeoLite2-ASN).
        case notCityDatabase
        /// The file changed while it was being read (a copy in progress); try again later.
        case fileChanging
    }

    /// A failure reported by the C side: an `errno` value or a libmaxminddb status.
    public struct CError: Error, CustomStringConvertible {
        /// `errno` or `libmaxminddb`.
        public var source: String
        /// The numeric code.
        public var code: Int32
        /// The library's text for it.
        public var text: String
        /// The library's text.
        public var description: String { text }
    }

    /// What kind of problem this is.
    public var code: Code
    /// The problem, in words, naming the file.
    public var message: String
    /// The path of the database file.
    public var path: String
    /// The lower-level cause, if any (a ``CError``).
    public var underlying: (any Error)?

    /// Creates an error.
    public init(code: Code, message: String, path: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.underlying = underlying
    }

    /// The message, then the cause.
    public var description: String {
        guard let underlying else { return message }
        return "\(message): \(underlying)"
    }
}
