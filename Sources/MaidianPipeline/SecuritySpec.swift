import Foundation

/// `security:` of `source:` or `producer:`: how to reach a secured cluster, as typed settings that become
/// librdkafka properties (`security.protocol`, `sasl.*`, `ssl.*`). Properties written in `kafka:` win.
///
/// ```yaml
/// security:
///   protocol: SASL_SSL
///   sasl:
///     mechanism: SCRAM-SHA-512
///     username: maidian
///     password_env: KAFKA_PASSWORD     # the password is read from this environment variable
///   tls:
///     ca: /etc/kafka/ca.pem
/// ```
public struct SecuritySpec: Decodable, Sendable, Equatable {
    /// `protocol:`: librdkafka's `security.protocol`.
    public enum SecurityProtocol: String, Decodable, Sendable, CaseIterable {
        case plaintext = "PLAINTEXT", ssl = "SSL", saslPlaintext = "SASL_PLAINTEXT", saslSSL = "SASL_SSL"

        var usesSASL: Bool { self == .saslPlaintext || self == .saslSSL }
        var usesTLS: Bool { self == .ssl || self == .saslSSL }
    }

    /// `sasl.mechanism:`: the mechanisms that work with a user name and a password.
    public enum Mechanism: String, Decodable, Sendable, CaseIterable {
        case plain = "PLAIN", scramSHA256 = "SCRAM-SHA-256", scramSHA512 = "SCRAM-SHA-512"
    }

    /// `sasl:`.
    public struct SASL: Decodable, Sendable, Equatable {
        /// `mechanism:`.
        public var mechanism: Mechanism
        /// `username:`.
        public var username: String
        /// Read from the environment variable `password_env` names, never written in the file.
        public var password: String

        enum CodingKeys: String, CodingKey { case mechanism, username, passwordEnv = "password_env" }

        /// Decodes `mechanism`, `username`, `password_env` (reading the variable it names).
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            // Optional reads so that every problem of the section is reported, the missing keys after.
            let mechanism = try c.decodeIfPresent(Mechanism.self, forKey: .mechanism)
            let username = try c.decodeIfPresent(String.self, forKey: .username)
            password = try SecuritySpec.secret(c, .passwordEnv, decoder) ?? ""
            self.mechanism = mechanism ?? .plain
            self.username = username ?? ""
            for key in [CodingKeys.mechanism, .username] where !c.contains(key) {
                try decoder.report(decoder.fail("missing key '\(key.stringValue)'", code: .missingKey))
            }
            if !c.contains(.passwordEnv) {
                throw decoder.fail(
                    "missing key 'password_env'",
                    hint: "the password is read from the environment: password_env: KAFKA_PASSWORD", code: .missingKey)
            }
        }
    }

    /// `tls:`: files in PEM format, relative to the pipeline file.
    public struct TLS: Decodable, Sendable, Equatable {
        /// CA certificate(s) to verify the brokers with (default: the system's).
        public var ca: LocatedPath?
        /// Client certificate (mutual TLS).
        public var cert: LocatedPath?
        /// Client private key (mutual TLS).
        public var key: LocatedPath?
        /// The private key's password, from the environment variable `key_password_env` names.
        public var keyPassword: String?
        /// Whether the broker's host name must match its certificate (default true).
        public var verifyHostname: Bool = true

        enum CodingKeys: String, CodingKey {
            case ca, cert, key, keyPasswordEnv = "key_password_env", verifyHostname = "verify_hostname"
        }

        /// Decodes `ca`, `cert`, `key`, `key_password_env`, `verify_hostname`.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            ca = try c.decodeIfPresent(LocatedPath.self, forKey: .ca)
            cert = try c.decodeIfPresent(LocatedPath.self, forKey: .cert)
            key = try c.decodeIfPresent(LocatedPath.self, forKey: .key)
            keyPassword = try SecuritySpec.secret(c, .keyPasswordEnv, decoder)
            verifyHostname = try c.decodeIfPresent(Bool.self, forKey: .verifyHostname) ?? true
            if (cert == nil) != (key == nil) {
                try decoder.report(decoder.fail(
                    "'cert' and 'key' go together", forKey: cert == nil ? CodingKeys.key : CodingKeys.cert,
                    hint: "mutual TLS needs the client certificate and its private key"))
            }
        }
    }

    /// `protocol:`.
    public var `protocol`: SecurityProtocol
    /// `sasl:`; required with the `SASL_*` protocols.
    public var sasl: SASL?
    /// `tls:`; with `SSL` and `SASL_SSL` only.
    public var tls: TLS?

    enum CodingKeys: String, CodingKey { case `protocol`, sasl, tls }

    /// `Decoder.userInfo` key of the environment that `*_env` keys read.
    public static let environmentKey = CodingUserInfoKey(rawValue: "maidian.environment")!

    /// Decodes `protocol`, `sasl`, `tls` and checks that they fit together.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        `protocol` = try c.decode(SecurityProtocol.self, forKey: .protocol)
        sasl = try c.decodeIfPresent(SASL.self, forKey: .sasl)
        tls = try c.decodeIfPresent(TLS.self, forKey: .tls)
        if `protocol`.usesSASL && sasl == nil && !c.contains(.sasl) {
            try decoder.report(decoder.fail(
                "protocol \(`protocol`.rawValue) needs 'sasl:'", forKey: CodingKeys.protocol,
                hint: "mechanism, username, password_env", code: .missingKey))
        }
        if !`protocol`.usesSASL && c.contains(.sasl) {
            try decoder.report(decoder.fail(
                "'sasl:' is not used with protocol \(`protocol`.rawValue)", forKey: CodingKeys.sasl,
                hint: "use SASL_SSL (or SASL_PLAINTEXT)"))
        }
        if !`protocol`.usesTLS && c.contains(.tls) {
            try decoder.report(decoder.fail(
                "'tls:' is not used with protocol \(`protocol`.rawValue)", forKey: CodingKeys.tls,
                hint: "use SSL or SASL_SSL"))
        }
    }

    /// The value of the environment variable a `*_env` key names; an unset variable is reported at the key.
    static func secret<K: CodingKey>(_ c: KeyedDecodingContainer<K>, _ key: K, _ decoder: any Decoder) throws -> String? {
        guard let name = try c.decodeIfPresent(String.self, forKey: key) else { return nil }
        let environment = decoder.userInfo[environmentKey] as? [String: String] ?? ProcessInfo.processInfo.environment
        guard let value = environment[name] else {
            try decoder.report(decoder.fail(
                "environment variable '\(name)' is not set", forKey: key,
                hint: "\(key.stringValue) names the variable that holds the secret", code: .environment))
            return nil
        }
        return value
    }

    /// The librdkafka properties these settings stand for; relative file paths resolved against
    /// `baseDirectory`.
    public func properties(baseDirectory: String) -> [String: String] {
        var p = ["security.protocol": `protocol`.rawValue]
        if let sasl {
            p["sasl.mechanism"] = sasl.mechanism.rawValue
            p["sasl.username"] = sasl.username
            p["sasl.password"] = sasl.password
        }
        if let tls {
            if let ca = tls.ca { p["ssl.ca.location"] = ca.resolved(baseDirectory) }
            if let cert = tls.cert { p["ssl.certificate.location"] = cert.resolved(baseDirectory) }
            if let key = tls.key { p["ssl.key.location"] = key.resolved(baseDirectory) }
            if let password = tls.keyPassword { p["ssl.key.password"] = password }
            p["ssl.endpoint.identification.algorithm"] = tls.verifyHostname ? "https" : "none"
        }
        return p
    }

    /// The TLS files that do not exist, located at their values.
    func checkFiles(baseDirectory: String) -> [PipelineError] {
        [tls?.ca, tls?.cert, tls?.key].compactMap { $0 }.compactMap { file in
            FileManager.default.fileExists(atPath: file.resolved(baseDirectory)) ? nil : PipelineError(
                code: .io, message: "no such file: '\(file.path)'", location: file.location,
                hint: "relative paths start at the pipeline file's directory")
        }
    }
}

/// A file path written in a pipeline file, with where it is written.
public struct LocatedPath: Decodable, Sendable, Equatable {
    /// As written.
    public var path: String
    /// Where it is written (`nil` outside ``ConfigDecoder``).
    public var location: SourceLocation?

    /// Decodes a string scalar.
    public init(from decoder: any Decoder) throws {
        path = try decoder.singleValueContainer().decode(String.self)
        location = decoder.configLocation
    }

    /// The path, relative ones taken from `baseDirectory`.
    public func resolved(_ baseDirectory: String) -> String {
        path.hasPrefix("/") || baseDirectory.isEmpty ? path : baseDirectory + "/" + path
    }
}
