// A stage's settings declared once, as data (after Redpanda Connect's `ConfigSpec`): each setting's key,
// type, default, meaning and an example. The stage's decoder reads its keys through the declaration (so a
// default is written once and every declared key is known to the unknown-key check), and the reference
// (`maidian stages --describe KIND`, the generated tables of pipelines/README.md) is printed from it.

import Foundation

/// A type a stage setting can hold: its name in the reference and how a value of it is written in YAML.
public protocol SettingValue: Decodable, Sendable {
    /// The type's name in the reference (`duration`, `integer`, `list of string`).
    static var settingType: String { get }
    /// The value as written in a pipeline file (`10m`, `[app_version]`).
    var settingText: String { get }
    /// The settings of one element, for a mapping (or a list of mappings) declared setting by setting.
    static var nestedSettings: ConfigSpec? { get }
}

extension SettingValue {
    public static var nestedSettings: ConfigSpec? { nil }
}

extension String: SettingValue {
    public static var settingType: String { "string" }
    public var settingText: String { self }
}

extension Int: SettingValue {
    public static var settingType: String { "integer" }
    public var settingText: String { String(self) }
}

extension Double: SettingValue {
    public static var settingType: String { "number" }
    public var settingText: String { String(self) }
}

extension Bool: SettingValue {
    public static var settingType: String { "bool" }
    public var settingText: String { self ? "true" : "false" }
}

extension ConfigDuration: SettingValue {
    public static var settingType: String { "duration" }
    public var settingText: String { description }
}

extension Array: SettingValue where Element: SettingValue {
    public static var settingType: String { "list of \(Element.settingType)" }
    public var settingText: String { "[" + map(\.settingText).joined(separator: ", ") + "]" }
    public static var nestedSettings: ConfigSpec? { Element.nestedSettings }
}

/// One setting: its YAML key, default, meaning and an example value. `Value` is its type.
public struct Setting<Value: SettingValue>: Sendable {
    /// The YAML key.
    public let key: String
    /// The value when the key is absent; nil for a required setting or an optional one without a default.
    public let defaultValue: Value?
    /// Absent is an error.
    public let isRequired: Bool
    /// What it does, with its constraints (one sentence or two, Markdown).
    public let meaning: String
    /// A valid value as written in YAML (decoded by a test).
    public let example: String
    /// How the reference states the default when the value alone would not say it (Markdown).
    public let documentedDefault: String?

    /// A setting with a default.
    public init(_ key: String, default value: Value, _ meaning: String, example: String, documented: String? = nil) {
        self.init(key: key, defaultValue: value, isRequired: false, meaning: meaning, example: example, documented: documented)
    }

    private init(key: String, defaultValue: Value?, isRequired: Bool, meaning: String, example: String, documented: String?) {
        self.key = key
        self.defaultValue = defaultValue
        self.isRequired = isRequired
        self.meaning = meaning
        self.example = example
        self.documentedDefault = documented
    }

    /// A setting that must be given.
    public static func required(_ key: String, _ meaning: String, example: String) -> Setting {
        Setting(key: key, defaultValue: nil, isRequired: true, meaning: meaning, example: example, documented: nil)
    }

    /// A setting without a default: absent is nil. `documented` says what absent means.
    public static func optional(_ key: String, _ meaning: String, example: String, documented: String) -> Setting {
        Setting(key: key, defaultValue: nil, isRequired: false, meaning: meaning, example: example, documented: documented)
    }

    /// The default (only for settings declared with one).
    public var `default`: Value {
        guard let defaultValue else { preconditionFailure("setting '\(key)' has no default") }
        return defaultValue
    }

    /// The key, for ``Swift/Decoder/fail(_:forKey:hint:code:)``.
    public var codingKey: SettingKey { SettingKey(key) }
}

/// A setting of any type, as the reference shows it.
public protocol AnySetting: Sendable {
    /// The setting's row in the reference.
    var entry: ConfigSpec.Entry { get }
}

extension Setting: AnySetting {
    public var entry: ConfigSpec.Entry {
        let shown: String
        if let documentedDefault { shown = documentedDefault }
        else if isRequired { shown = "*required*" }
        else if let defaultValue { shown = "`" + (defaultValue.settingText.isEmpty ? "\"\"" : defaultValue.settingText) + "`" }
        else { shown = "none" }
        return ConfigSpec.Entry(
            key: key, type: Value.settingType, defaultText: shown, meaning: meaning, example: example,
            nested: Value.nestedSettings)
    }
}

/// The settings of a stage (or of a mapping inside one), in the order the reference lists them.
public struct ConfigSpec: Sendable {
    /// One setting as the reference shows it.
    public struct Entry: Sendable {
        /// The YAML key; in `ConfigSpec.flattened`, prefixed by its parent's (`rules[].name`).
        public var key: String
        /// The type's name in the reference (`duration`, `list of string`).
        public var type: String
        /// Markdown: `` `10m` ``, `*required*`, or words.
        public var defaultText: String
        /// What the setting does, with its constraints (Markdown).
        public var meaning: String
        /// A valid value as written in YAML.
        public var example: String
        /// The settings of the mapping(s) it holds, if declared.
        public var nested: ConfigSpec?
    }

    /// The settings.
    public var entries: [Entry]

    /// A declaration of `settings`.
    public init(_ settings: any AnySetting...) {
        entries = settings.map(\.entry)
    }

    /// The YAML keys, in order.
    public var keys: [String] { entries.map(\.key) }

    /// Every row, nested mappings' keys prefixed by their parent's (`rules[].name`).
    public var flattened: [Entry] {
        entries.flatMap { e -> [Entry] in
            guard let nested = e.nested else { return [e] }
            let prefix = e.key + (e.type.hasPrefix("list of") ? "[]." : ".")
            return [e] + nested.flattened.map { var n = $0; n.key = prefix + n.key; return n }
        }
    }
}

/// A config type whose settings are declared as a ``ConfigSpec`` (the reference of its stage).
public protocol DeclaredSettings {
    /// The settings, in reference order.
    static var settings: ConfigSpec { get }
}

/// A YAML key as a `CodingKey`.
public struct SettingKey: CodingKey, Sendable {
    public var stringValue: String
    public var intValue: Int? { nil }
    /// The coding key for YAML key `key`.
    public init(_ key: String) { stringValue = key }
    public init?(stringValue: String) { self.stringValue = stringValue }
    public init?(intValue: Int) { nil }
}

/// Reads a mapping's settings through their declarations (``Swift/Decoder/settings(_:)``).
public struct SettingsReader {
    let container: KeyedDecodingContainer<SettingKey>

    /// The setting's value: its default when the key is absent (or null); a required setting's absence is a
    /// located `missing key` error.
    public func callAsFunction<V>(_ setting: Setting<V>) throws -> V {
        if setting.isRequired || setting.defaultValue == nil {
            guard setting.isRequired else { preconditionFailure("use optional(_:) for '\(setting.key)'") }
            return try container.decode(V.self, forKey: setting.codingKey)
        }
        return try container.decodeIfPresent(V.self, forKey: setting.codingKey) ?? setting.default
    }

    /// An optional setting's value; nil when absent.
    public func optional<V>(_ setting: Setting<V>) throws -> V? {
        try container.decodeIfPresent(V.self, forKey: setting.codingKey)
    }
}

extension Decoder {
    /// The mapping being decoded, read through `spec`: every declared key counts as known at once (so the
    /// unknown-key check and its `did you mean` hints come from the declaration even when a later check fails).
    public func settings(_ spec: ConfigSpec) throws -> SettingsReader {
        let c = try container(keyedBy: SettingKey.self)
        for key in spec.keys { _ = c.contains(SettingKey(key)) }
        return SettingsReader(container: c)
    }
}
