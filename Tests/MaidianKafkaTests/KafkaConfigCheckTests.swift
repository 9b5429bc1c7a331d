import MaidianKafka
import XCTest

/// librdkafka property names and values, checked offline against librdkafka itself.
final class KafkaConfigCheckTests: XCTestCase {
    func testAcceptedProperties() {
        for (name, value) in [
            ("acks", "all"), ("acks", "-1"), ("security.protocol", "SASL_SSL"), ("sasl.mechanism", "SCRAM-SHA-512"),
            ("compression.type", "zstd"), ("auto.offset.reset", "earliest"), ("enable.auto.commit", "false"),
            ("session.timeout.ms", "45000"), ("sasl.username", "maidian"), ("ssl.ca.location", "probe"), ("ssl.ca.location", "/dev/null"),
        ] {
            XCTAssertNil(KafkaConfigCheck.problem(name: name, value: value), "\(name)=\(value)")
        }
    }

    func testUnknownNames() {
        let p = KafkaConfigCheck.problem(name: "sasl.passwrd", value: "x")
        XCTAssertEqual(p?.kind, .unknownName)
        XCTAssertEqual(p?.message, "unknown librdkafka property 'sasl.passwrd'")
        XCTAssertTrue(KafkaConfigCheck.propertyNames.contains("sasl.password"))
        XCTAssertTrue(KafkaConfigCheck.propertyNames.contains("enable.auto.commit"))
    }

    func testBadValuesCarryLibrdkafkasMessage() {
        let acks = KafkaConfigCheck.problem(name: "acks", value: "maybe")
        XCTAssertEqual(acks?.kind, .badValue)
        XCTAssertEqual(acks?.message, "Invalid value for configuration property \"request.required.acks\"")
        XCTAssertEqual(acks?.allowed, ["all", "-1", "0", "1"])
        XCTAssertEqual(KafkaConfigCheck.problem(name: "compression.type", value: "brotli")?.kind, .badValue)
        XCTAssertEqual(KafkaConfigCheck.problem(name: "security.protocol", value: "TLS")?.kind, .badValue)
        XCTAssertEqual(KafkaConfigCheck.problem(name: "session.timeout.ms", value: "0")?.kind, .badValue, "below the range")
        XCTAssertEqual(KafkaConfigCheck.problem(name: "enable.auto.commit", value: "maybe")?.kind, .badValue)
        // Free text for librdkafka until a client starts; checked against the documented values.
        let mechanism = KafkaConfigCheck.problem(name: "sasl.mechanism", value: "SCRAM")
        XCTAssertEqual(mechanism?.kind, .badValue)
        XCTAssertEqual(mechanism?.description,
                       "invalid value 'SCRAM' for librdkafka property 'sasl.mechanism' (expected one of: GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)")
    }

    func testUnreadableFilesAreBadValues() {
        XCTAssertEqual(KafkaConfigCheck.problem(name: "ssl.ca.location", value: "/nonexistent/ca.pem")?.message,
                       "cannot read '/nonexistent/ca.pem' for librdkafka property 'ssl.ca.location'")
        XCTAssertEqual(KafkaConfigCheck.problem(name: "ssl.key.location", value: "/nonexistent/key.pem")?.kind, .badValue)
    }

    func testPropertyTableComesFromLibrdkafka() {
        XCTAssertGreaterThan(KafkaConfigCheck.properties.count, 150)
        XCTAssertEqual(KafkaConfigCheck.properties["acks"]?.scope, .producer)
        XCTAssertEqual(KafkaConfigCheck.properties["group.id"]?.scope, .consumer)
        XCTAssertEqual(KafkaConfigCheck.properties["bootstrap.servers"]?.scope, .both)
        XCTAssertTrue(KafkaConfigCheck.properties["compression.codec"]?.range.hasPrefix("none, gzip, snappy, lz4, zstd") ?? false)
        XCTAssertTrue(KafkaConfigCheck.ignored(name: "acks", by: .consumer))
        XCTAssertFalse(KafkaConfigCheck.ignored(name: "acks", by: .producer))
        XCTAssertFalse(KafkaConfigCheck.ignored(name: "security.protocol", by: .consumer))
        // Hints from the table where no better list is known.
        XCTAssertEqual(KafkaConfigCheck.problem(name: "session.timeout.ms", value: "0")?.allowed, ["an integer in 1 .. 3600000"])
        XCTAssertEqual(KafkaConfigCheck.problem(name: "enable.auto.commit", value: "maybe")?.allowed, ["true", "false"])
    }

    func testErrorTextHasNoSwiftTypeName() {
        let e = KafkaError(.config, "consumer property 'x': bad")
        XCTAssertFalse(e.description.contains("KafkaError"), e.description)
    }
}
