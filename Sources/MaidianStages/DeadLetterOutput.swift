import MaidianEvents
import MaidianPipeline

/// Writes rejected records and events to the dead-letter topic (key: the input record's key), wire format §5.
public final class DeadLetterOutput: Stage {
    public struct Config: Decodable, Sendable, DeclaredSettings {
        enum Settings {
            static let topic = Setting("topic", default: "events.dlq", "the output topic", example: "events.dlq.v2")
        }
        public static let settings = ConfigSpec(Settings.topic)
        public var topic = Settings.topic.default
        public init() {}
        public init(from decoder: any Decoder) throws {
            topic = try decoder.settings(Self.settings)(Settings.topic)
        }
    }

    public static let kind = "dead_letter"
    public static let summary = "writes rejected records and events to the dead-letter topic with their reason"

    public let topic: String
    private var topicIndex: Int32 = -1

    public init(config: Config, context: StageContext) throws {
        self.topic = config.topic
    }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        if topicIndex < 0 { topicIndex = output.topicIndex(topic) }
        // Outputs too large to produce are dead-lettered here too (OutputWriter.divertOversized).
        output.deadLetterTopic = topicIndex
        OutputWriter.writeDeadLetters(batch, topic: topicIndex, into: &output)
    }
}
