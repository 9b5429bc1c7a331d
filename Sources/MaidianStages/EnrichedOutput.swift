import MaidianEvents
import MaidianPipeline

/// Writes every valid event, with its fixes and added properties, to the enriched topic (key `distinct_id`).
public final class EnrichedOutput: Stage {
    public struct Config: Decodable, Sendable, DeclaredSettings {
        enum Settings {
            static let topic = Setting("topic", default: "events.enriched", "the output topic", example: "events.enriched.v2")
        }
        public static let settings = ConfigSpec(Settings.topic)
        public var topic = Settings.topic.default
        public init() {}
        public init(from decoder: any Decoder) throws {
            topic = try decoder.settings(Self.settings)(Settings.topic)
        }
    }

    public static let kind = "enriched"
    public static let summary = "writes valid events to the enriched topic in the input format"

    public let topic: String
    private var topicIndex: Int32 = -1

    public init(config: Config, context: StageContext) throws {
        self.topic = config.topic
    }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        if topicIndex < 0 { topicIndex = output.topicIndex(topic) }
        OutputWriter.writeEnriched(batch, topic: topicIndex, into: &output)
    }
}
