import MaidianEvents
import MaidianPipeline

/// Writes rejected records and events to the dead-letter topic (key: the input record's key), SPEC section 5.
public final class DeadLetterOutput: Stage {
    public struct Config: Decodable, Sendable {
        public var topic: String = "events.dlq"
        enum CodingKeys: String, CodingKey { case topic }
        public init() {}
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            topic = try c.decodeIfPresent(String.self, forKey: .topic) ?? "events.dlq"
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
