import ArgumentParser
import Foundation
import Logging
import MaidianRuntime

/// `maidian record --brokers B --topic T --out FILE [--limit N]`: a topic's records into a recording.
struct RecordCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Write a topic's records (every partition, up to the end offsets at the start) into a recording (docs/wire-format.md §6).",
        discussion: """
            Keys, headers and timestamps are kept. Each partition stays in offset order; partitions are merged by \
            record timestamp, so the file reads like the traffic and --limit N keeps the first N records in time. \
            `maidian produce` writes such a file back with the same keys, headers and timestamps.
            """)

    @Option(help: "Bootstrap servers.") var brokers: String = ProcessInfo.processInfo.environment["MAIDIAN_BROKERS"] ?? "localhost:9092"
    @Option(help: "Topic to record.") var topic: String = "events.raw"
    @Option(help: "Output file; compressed with zstd when it ends in .zst.") var out: String
    @Option(help: "Stop after this many records.") var limit: Int?
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
    }

    func run() throws {
        let logger = global.makeLogger("maidian.record")
        let started = ContinuousClock.now
        let summary = try TopicRecorder.record(bootstrap: brokers, topic: topic, to: out, limit: limit, logger: logger)
        print("recorded \(summary.records) records from \(topic) (\(summary.partitions) partitions) -> \(out), "
              + "\(GenCommand.megabytes(summary.fileBytes)) MB in \(GenCommand.seconds((ContinuousClock.now - started).milliseconds)) s")
    }
}
