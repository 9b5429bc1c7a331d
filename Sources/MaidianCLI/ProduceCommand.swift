import ArgumentParser
import Foundation
import Logging
import MaidianKafka
import MaidianRecording

/// `maidian produce RECORDING [--brokers B] [-X name=value] [--topic T] [--rate R]`: writes a recording into a topic with its keys,
/// headers and timestamps.
struct ProduceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "produce",
        abstract: "Write a recording (docs/wire-format.md §6) into a topic, with its keys, headers and timestamps.",
        discussion: "Records go to partitions by key (murmur2, as the Java client). The file is streamed, not loaded whole.")

    @Argument(help: "Recording (.ndjson or .ndjson.zst).") var recording: String
    @Option(help: "Bootstrap servers (default: bootstrap.servers of -X/--kafka-config, else MAIDIAN_BROKERS).") var brokers: String?
    @Option(help: "Topic.") var topic: String = "events.raw"
    @Option(help: "Most records per second (default: as fast as the brokers take them).") var rate: Double?
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let rate, !(rate > 0) { throw ValidationError("--rate must be positive") }
    }

    func run() throws {
        let logger = global.makeLogger("maidian.produce")
        var config = try kafka.resolved()
        config["bootstrap.servers"] = try KafkaOptions.brokers(brokers, config)
        let producer = try KafkaProducer(config: config, logger: logger)
        var failed: KafkaError?
        var delivered = 0
        producer.onDelivery = { _, error in
            if let error { failed = failed ?? error } else { delivered += 1 }
        }
        let clock = ContinuousClock()
        let started = clock.now
        let pacer = rate.map { Pacer(perSecond: $0, start: started) }
        var produced = 0
        try Recording.forEachRecord(path: recording) { r in
            if let wait = pacer?.wait(before: produced, now: clock.now) {
                // Serve delivery reports while waiting for the next slot.
                let until = clock.now + wait
                while clock.now < until { producer.poll(timeout: min(until - clock.now, .milliseconds(100))) }
            }
            try producer.produce(topicName: topic, key: r.key ?? [], value: r.value, headers: r.headers, timestamp: r.timestamp, token: 1)
            producer.poll(timeout: .zero)
            produced += 1
            if let failed { throw failed }
        }
        try producer.flush(timeout: .seconds(120))
        if let failed { throw failed }
        let ms = (clock.now - started).milliseconds
        let perSecond = ms > 0 ? delivered * 1000 / Int(ms) : delivered
        print("produced \(delivered) records to \(topic) in \(GenCommand.seconds(ms)) s (\(perSecond) records/s)")
    }
}

/// Spaces records evenly at a rate: record `i` goes out no earlier than `start + i / rate`.
struct Pacer {
    let perSecond: Double
    let start: ContinuousClock.Instant

    init(perSecond: Double, start: ContinuousClock.Instant) {
        self.perSecond = perSecond
        self.start = start
    }

    /// How long to wait before sending record `index` (0-based); nil when it is due.
    func wait(before index: Int, now: ContinuousClock.Instant) -> Duration? {
        let due = start + .seconds(Double(index) / perSecond)
        return due > now ? due - now : nil
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
