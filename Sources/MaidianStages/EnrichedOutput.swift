import MaidianEvents
import MaidianPipeline

/// Writes every valid event, with its fixes and added properties, to the enriched topic (key `distinct_id`).
public final class EnrichedOutput: Stage {
    public struct Config: Decodable, Sendable {
        public var topic: String = "events.enriched"
        enum CodingKeys: String, CodingKey { case topic }
        public init() {}
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            topic = try c.decodeIfPresent(String.self, forKey: .topic) ?? "events.enriched"
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
