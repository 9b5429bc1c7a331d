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
        output.deadLetterTopic = topicIndex
        OutputWriter.writeDeadLetters(batch, topic: topicIndex, into: &output)
        // Outputs of the stages before (enriched events, counts, visits, trails) that the producer would
        // refuse as too large become dead letters here, so that `bench` writes what a worker produces; the
        // worker diverts what is written later (end-of-run state, merged partials) before producing.
        OutputWriter.divertOversized(&output) { OutputWriter.source(record: $0, in: batch) }
    }
}
