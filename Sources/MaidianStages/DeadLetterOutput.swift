import MaidianEvents
import MaidianPipeline

/// Writes rejected records and events to the dead-letter topic (key: the input record's key), wire format §5.
public final class DeadLetterOutput: Stage {
    /// The dead-letter topic's setting and default.
    public enum Topic: OutputTopicSetting {
        public static let topic = Setting("topic", default: "events.dlq", "the output topic", example: "events.dlq.v2")
    }
    /// The stage's settings: `topic`.
    public typealias Config = TopicOutputConfig<Topic>

    public static let kind = "dead_letter"
    public static let summary = "writes rejected records and events to the dead-letter topic with their reason"

    private var output: OutputTopic
    /// The topic written to.
    public var topic: String { output.name }

    public init(config: Config, context: StageContext) throws {
        output = OutputTopic(config.topic)
    }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        let topicIndex = self.output.index(in: &output)
        // Outputs too large to produce are dead-lettered here too (OutputWriter.divertOversized).
        output.deadLetterTopic = topicIndex
        OutputWriter.writeDeadLetters(batch, topic: topicIndex, into: &output)
    }
}
