import ArgumentParser
import Foundation
import Logging
import MaidianKafka
import MaidianRecording

/// `maidian produce RECORDING --brokers B [--topic T]`: writes a recording into a topic with its keys,
/// headers and timestamps.
struct ProduceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "produce", abstract: "Write a recording (SPEC section 6) into a topic.")

    @Argument(help: "Recording (.ndjson or .ndjson.zst).") var recording: String
    @Option(help: "Bootstrap servers.") var brokers: String = ProcessInfo.processInfo.environment["MAIDIAN_BROKERS"] ?? "localhost:9092"
    @Option(help: "Topic.") var topic: String = "events.raw"
    @OptionGroup var global: GlobalOptions

    func run() throws {
        let logger = global.makeLogger("maidian.produce")
        let records = try Recording.read(path: recording)
        let producer = try KafkaProducer(config: ["bootstrap.servers": brokers], logger: logger)
        var failed: KafkaError?
        var delivered = 0
        producer.onDelivery = { _, error in
            if let error { failed = failed ?? error } else { delivered += 1 }
        }
        for r in records {
            try producer.produce(topicName: topic, key: r.key ?? [], value: r.value, headers: r.headers, timestamp: r.timestamp, token: 1)
            producer.poll(timeout: .zero)
        }
        try producer.flush(timeout: .seconds(120))
        if let failed { throw failed }
        print("produced \(delivered) records to \(topic)")
    }
}
