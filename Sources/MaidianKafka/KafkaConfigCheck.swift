import CRdKafka
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Checks librdkafka property names and values offline, by asking librdkafka itself: each property is set
/// on a scratch configuration that no client ever uses, so the answer is exactly what a client would say
/// at start, with librdkafka's own message (`Invalid value "maybe" for configuration property
/// "request.required.acks"`).
///
/// A few properties librdkafka accepts as free text and only rejects when a client is created are checked
/// here against their documented values (`sasl.mechanism`).
public enum KafkaConfigCheck {
    /// What is wrong with setting `name` to `value`, or `nil` when librdkafka takes it.
    public static func problem(name: String, value: String) -> Problem? {
        // Setting it loads the named libraries into this process: not something a check should do.
        if name == "plugin.library.paths" { return nil }
        let conf = rd_kafka_conf_new()!
        defer { rd_kafka_conf_destroy(conf) }
        var errstr = [CChar](repeating: 0, count: 512)
        switch rd_kafka_conf_set(conf, name, value, &errstr, errstr.count) {
        case RD_KAFKA_CONF_OK:
            break
        case RD_KAFKA_CONF_UNKNOWN:
            return Problem(kind: .unknownName, message: "unknown librdkafka property '\(name)'")
        default:
            return Problem(kind: .badValue, message: message(errstr), allowed: valueHints[name] ?? rangeHint(name))
        }
        // A certificate or key file that is not there fails only when a client starts, far from the setting.
        if name.hasPrefix("ssl."), name.hasSuffix(".location"), value != "probe", !value.isEmpty, access(value, R_OK) != 0 {
            return Problem(kind: .badValue, message: "cannot read '\(value)' for librdkafka property '\(name)'")
        }
        if let allowed = textEnums[name], !allowed.contains(value) {
            return Problem(
                kind: .badValue, message: "invalid value '\(value)' for librdkafka property '\(name)'",
                allowed: allowed)
        }
        return nil
    }

    /// A property librdkafka would not take.
    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        /// An unknown name, or a value the property does not take.
        public enum Kind: Sendable, Equatable { case unknownName, badValue }
        /// What is wrong.
        public var kind: Kind
        /// The problem in words.
        public var message: String
        /// The values that would be accepted, when the check knows them.
        public var allowed: [String] = []

        /// The message with the accepted values.
        public var description: String {
            allowed.isEmpty ? message : message + " (expected one of: " + allowed.joined(separator: ", ") + ")"
        }
    }

    /// Free-text properties with a fixed set of values (librdkafka 2.0.2's CONFIGURATION.md); both names of
    /// an alias are listed.
    static let textEnums: [String: [String]] = {
        let mechanisms = ["GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
        return ["sasl.mechanism": mechanisms, "sasl.mechanisms": mechanisms]
    }()

    /// The values of common enumerated properties (librdkafka 2.0.2's CONFIGURATION.md), for hints:
    /// librdkafka's own message names the property by its canonical name and does not list them.
    static let valueHints: [String: [String]] = {
        let acks = ["all", "-1", "0", "1"]
        let compression = ["none", "gzip", "snappy", "lz4", "zstd"]
        return [
            "acks": acks, "request.required.acks": acks,
            "compression.type": compression, "compression.codec": compression,
            "security.protocol": ["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"],
            "auto.offset.reset": ["smallest", "earliest", "beginning", "largest", "latest", "end", "error"],
            "partition.assignment.strategy": ["range", "roundrobin", "cooperative-sticky"],
            "isolation.level": ["read_uncommitted", "read_committed"],
            "ssl.endpoint.identification.algorithm": ["none", "https"],
        ]
    }()

    /// Which clients use a property.
    public enum Scope: Sendable, Equatable { case consumer, producer, both }

    /// One row of librdkafka's property table.
    public struct Property: Sendable, Equatable {
        /// The property name.
        public var name: String
        /// Consumer (`C`), producer (`P`) or both (`*`).
        public var scope: Scope
        /// As librdkafka writes it: `-1 .. 1000`, `true, false`, `none, gzip, snappy, lz4, zstd`, or empty.
        public var range: String
    }

    /// Every property of the librdkafka this process runs (2.0.2 in the image), global and topic level, from
    /// `rd_kafka_conf_properties_show`: the table CONFIGURATION.md is generated from, so it cannot drift
    /// from the library that validates the values.
    public static let properties: [String: Property] = {
        var buffer: UnsafeMutablePointer<CChar>?
        var size = 0
        guard let stream = open_memstream(&buffer, &size) else { return [:] }
        rd_kafka_conf_properties_show(stream)
        fclose(stream)
        defer { free(buffer) }
        guard let buffer else { return [:] }
        var table: [String: Property] = [:]
        for line in String(cString: buffer).split(separator: "\n") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map(trimmed)
            guard cells.count >= 6, let first = cells[0].first, first.isLetter, cells[0] != "Property" else { continue }
            let scope: Scope = cells[1] == "C" ? .consumer : cells[1] == "P" ? .producer : .both
            table[cells[0]] = Property(name: cells[0], scope: scope, range: cells[2])
        }
        return table
    }()

    /// librdkafka's names of every property, for "did you mean" hints.
    public static var propertyNames: [String] { properties.keys.sorted() }

    /// Whether a client of `scope` ignores `name` (librdkafka only warns about it when the client starts).
    public static func ignored(name: String, by client: Scope) -> Bool {
        guard let p = properties[name], p.scope != .both, client != .both else { return false }
        return p.scope != client
    }

    /// The range librdkafka's table gives a property: its values, or `an integer in a .. b`.
    static func rangeHint(_ name: String) -> [String] {
        guard let range = properties[name]?.range, !range.isEmpty else { return [] }
        if range.contains("..") { return ["an integer in " + range] }
        return range.split(separator: ",").map(trimmed)
    }

    private static func trimmed(_ s: Substring) -> String {
        String(s.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }

    private static func message(_ errstr: [CChar]) -> String {
        let bytes = errstr.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
