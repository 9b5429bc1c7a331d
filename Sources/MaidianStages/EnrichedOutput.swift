import MaidianEvents
import MaidianPipeline

/// Writes every valid event, with its fixes and added properties, to the enriched topic (key `distinct_id`).
public final class EnrichedOutput: Stage {
    /// The enriched topic's setting and default.
    public enum Topic: OutputTopicSetting {
        public static let topic = Setting("topic", default: "events.enriched", "the output topic", example: "events.enriched.v2")
    }
    /// The stage's settings: `topic`.
    public typealias Config = TopicOutputConfig<Topic>

    public static let kind = "enriched"
    public static let summary = "writes valid events to the enriched topic in the input format"

    private var output: OutputTopic
    /// The topic written to.
    public var topic: String { output.name }

    public init(config: Config, context: StageContext) throws {
        output = OutputTopic(config.topic)
    }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        let topicIndex = self.output.index(in: &output)
        OutputWriter.writeEnriched(batch, topic: topicIndex, into: &output)
    }
}
