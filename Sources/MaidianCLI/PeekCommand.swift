import ArgumentParser
import Foundation
import Logging
import MaidianEvents
import MaidianKafka

/// `maidian peek [--brokers B] [-X name=value] TOPIC...`: reads what is on topics now and prints a summary a person reads at a glance.
struct PeekCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "peek", abstract: "Summarize the records currently on some topics.")

    @Argument(help: "Topics to read.") var topics: [String] = ["events.enriched", "events.dlq"]
    @Option(help: "Bootstrap servers (default: bootstrap.servers of -X/--kafka-config, else MAIDIAN_BROKERS).") var brokers: String?
    @Option(help: "Example records to print per topic.") var examples: Int = 1
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var global: GlobalOptions

    func run() throws {
        let logger = global.makeLogger("maidian.peek")
        var config = try kafka.resolved()
        config["bootstrap.servers"] = try KafkaOptions.brokers(brokers, config)
        config["group.id"] = config["group.id"] ?? "maidian-peek"
        config["enable.auto.commit"] = "false"
        let consumer = try KafkaConsumer(config: config, logger: logger)
        for topic in topics {
            let n = try consumer.partitionCount(topic: topic, timeout: .seconds(10))
            var offsets: [TopicPartition: Int64] = [:]
            var ends: [Int32: Int64] = [:]
            for p in 0..<Int32(n) {
                let tp = TopicPartition(topic: topic, partition: p)
                let w = try consumer.watermarks(tp, timeout: .seconds(10))
                if w.high > w.low { offsets[tp] = KafkaConsumer.beginning; ends[p] = w.high }
            }
            var count = 0
            var bytes = 0
            var byName: [String: Int] = [:]
            var samples: [String] = []
            if !offsets.isEmpty {
                try consumer.assign(offsets)
                var done = Set<Int32>()
                let deadline = Date().addingTimeInterval(60)
                while done.count < ends.count && Date() < deadline {
                    _ = try consumer.poll(maxMessages: 1000, timeout: .milliseconds(200)) { m in
                        count += 1
                        bytes += m.value.count
                        let value = Array(m.value)
                        let name = JSONFields.string(value, "reason").map { "reason=\($0)" }
                            ?? JSONFields.string(value, "metric").map { "metric=\($0)" }
                            ?? JSONFields.string(value, "closed_by").map { "closed_by=\($0)" }
                            ?? (String(decoding: value.prefix(120), as: UTF8.self).contains("\"crash_time\"") ? "crash trail" : nil)
                            ?? JSONFields.string(value, "event") ?? JSONFields.string(value, "type") ?? "?"
                        byName[name, default: 0] += 1
                        if samples.count < examples { samples.append(String(decoding: value, as: UTF8.self)) }
                        if m.offset + 1 >= ends[m.partition] ?? 0 { done.insert(m.partition) }
                    }
                }
            }
            print("── \(topic): \(count) records, \(bytes / 1024) KiB")
            for (name, c) in byName.sorted(by: { $0.value > $1.value }).prefix(15) {
                print("   \(String(c).leftPad(7))  \(name)")
            }
            // Long events: the start and the end, where the added properties are.
            for s in samples { print("   e.g. \(s.count > 900 ? String(s.prefix(300)) + " … " + String(s.suffix(600)) : s)") }
        }
        try consumer.close()
    }
}

extension String {
    func leftPad(_ n: Int) -> String { count >= n ? self : String(repeating: " ", count: n - count) + self }
}
