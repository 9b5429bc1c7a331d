import ArgumentParser
import Foundation
import Logging
import MaidianKafka
import ServiceLifecycle

/// `maidian broker --topics name:partitions,... [--brokers N]`: librdkafka's mock cluster as a process.
struct BrokerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broker",
        abstract: "Start an embedded Kafka-protocol broker (librdkafka's mock cluster) and serve until stopped.")

    @Option(help: "Topics to create, as name:partitions,name:partitions.") var topics: String = "events.raw:8,events.enriched:8,events.dlq:8"
    @Option(help: "Number of brokers.") var brokers: Int = 1
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let logger = global.makeLogger("maidian.broker")
        let broker = try EmbeddedBroker(brokers: brokers, logger: logger)
        for item in topics.split(separator: ",") where !item.isEmpty {
            let parts = item.split(separator: ":")
            guard let name = parts.first, parts.count <= 2, let n = parts.count == 2 ? Int(parts[1]) : 1, n > 0 else {
                throw ValidationError("--topics: '\(item)' is not name:partitions")
            }
            try broker.createTopic(String(name), partitions: n)
        }
        // The address goes to stdout alone on its line so scripts can read it.
        print(broker.bootstrapServers)
        fflush(nil)
        logger.info("embedded broker serving at \(broker.bootstrapServers); stop with SIGTERM or Ctrl-C")
        let group = ServiceGroup(configuration: .init(
            services: [.init(service: HoldService())], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        withExtendedLifetime(broker) {}
    }
}

/// Waits for graceful shutdown.
struct HoldService: Service {
    func run() async throws {
        try? await gracefulShutdown()
    }
}
