import CRdKafka

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
            return Problem(kind: .badValue, message: message(errstr), allowed: valueHints[name] ?? [])
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
        public enum Kind: Sendable, Equatable { case unknownName, badValue }
        public var kind: Kind
        /// The problem in words.
        public var message: String
        /// The values that would be accepted, when the check knows them.
        public var allowed: [String] = []

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

    /// librdkafka's names of every property (global and topic level), for "did you mean" hints.
    public static let propertyNames: [String] = {
        // rd_kafka_conf_dump lists the properties a configuration has a value for; a fresh one has
        // defaults for most, which is the list a misspelling is compared against.
        let conf = rd_kafka_conf_new()!
        defer { rd_kafka_conf_destroy(conf) }
        var names: [String] = []
        var count = 0
        if let dump = rd_kafka_conf_dump(conf, &count) {
            for i in stride(from: 0, to: count, by: 2) { names.append(String(cString: dump[i]!)) }
            rd_kafka_conf_dump_free(dump, count)
        }
        if let topicConf = rd_kafka_topic_conf_new() {
            if let dump = rd_kafka_topic_conf_dump(topicConf, &count) {
                for i in stride(from: 0, to: count, by: 2) { names.append(String(cString: dump[i]!)) }
                rd_kafka_conf_dump_free(dump, count)
            }
            rd_kafka_topic_conf_destroy(topicConf)
        }
        // Properties without a default are not in the dump: the usual ones of a secured cluster.
        names += ["sasl.username", "sasl.password", "ssl.ca.location", "ssl.certificate.location",
                  "ssl.key.location", "ssl.key.password", "sasl.mechanism", "security.protocol", "acks", "group.id",
                  "bootstrap.servers", "client.id", "compression.type", "auto.offset.reset"]
        return Array(Set(names)).sorted()
    }()

    private static func message(_ errstr: [CChar]) -> String {
        let bytes = errstr.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
