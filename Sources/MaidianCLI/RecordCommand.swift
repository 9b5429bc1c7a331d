import ArgumentParser
import Foundation
import Logging
import MaidianRuntime

/// `maidian record [--brokers B] [-X name=value] --topic T --out FILE [--limit N]`: a topic's records into a recording.
struct RecordCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Write a topic's records (every partition, up to the end offsets at the start) into a recording (docs/wire-format.md §6).",
        discussion: """
            Keys, headers and timestamps are kept. Each partition stays in offset order; partitions are merged by \
            record timestamp, so the file reads like the traffic and --limit N keeps the first N records in time. \
            `maidian produce` writes such a file back with the same keys, headers and timestamps.
            """)

    @Option(help: "Bootstrap servers (default: bootstrap.servers of -X/--kafka-config, else MAIDIAN_BROKERS).") var brokers: String?
    @Option(help: "Topic to record.") var topic: String = "events.raw"
    @Option(help: "Output file; compressed with zstd when it ends in .zst.") var out: String
    @Option(help: "Stop after this many records.") var limit: Int?
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
    }

    func run() throws {
        let logger = global.makeLogger("maidian.record")
        let started = ContinuousClock.now
        let properties = try kafka.resolved()
        let bootstrap = try KafkaOptions.brokers(brokers, properties)
        let summary = try TopicRecorder.record(bootstrap: bootstrap, topic: topic, to: out, limit: limit, kafka: properties, logger: logger)
        print("recorded \(summary.records) records from \(topic) (\(summary.partitions) partitions) -> \(out), "
              + "\(GenCommand.megabytes(summary.fileBytes)) MB in \(GenCommand.seconds((ContinuousClock.now - started).milliseconds)) s")
    }
}
