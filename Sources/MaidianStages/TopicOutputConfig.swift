import MaidianEvents
import MaidianPipeline

/// The `topic` setting of an output stage that writes to one topic, with that stage's default and example.
public protocol OutputTopicSetting: Sendable {
    /// The setting: key `topic`, the stage's default topic, its description and example.
    static var topic: Setting<String> { get }
}

/// The settings of an output stage that writes to one topic. One type for every such stage, so each declares
/// only its own default (through `Topic`) and none repeats the decoding.
public struct TopicOutputConfig<Topic: OutputTopicSetting>: Decodable, Sendable, DeclaredSettings {
    /// The settings, in reference order: `topic` only.
    public static var settings: ConfigSpec { ConfigSpec(Topic.topic) }
    /// The output topic.
    public var topic = Topic.topic.default
    /// The defaults.
    public init() {}
    /// Decodes the YAML key `topic`.
    public init(from decoder: any Decoder) throws {
        topic = try decoder.settings(Self.settings)(Topic.topic)
    }
}

/// An output stage's topic and, from its first batch on, the topic's index in the output buffer.
public struct OutputTopic: Sendable {
    /// The topic's name.
    public let name: String
    private var index: Int32 = -1

    /// The topic named `name`; its index is looked up on the first `index(in:)`.
    public init(_ name: String) { self.name = name }

    /// The topic's index in `output` (the buffer keeps its topics for the worker's life, so once is enough).
    public mutating func index(in output: inout OutputBuffer) -> Int32 {
        if index < 0 { index = output.topicIndex(name) }
        return index
    }
}
