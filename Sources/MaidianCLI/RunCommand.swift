import ArgumentParser
import Foundation
import Logging
import MaidianKafka
import MaidianPipeline
import MaidianRuntime
import ServiceLifecycle

/// `maidian run PIPELINE.yaml [--until-end] [--metrics-port N]`: a consumer-group worker.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Run a pipeline as a Kafka consumer-group worker.",
        discussion: """
            The brokers are the pipeline's source.brokers (in pipelines/app-analytics.yaml: MAIDIAN_BROKERS), or \
            bootstrap.servers from -X/--kafka-config. WITHOUT BROKERS (source.brokers: embedded, the default) THE \
            WORKER RUNS ON AN EMBEDDED IN-MEMORY BROKER: librdkafka's mock cluster inside this process, for demos \
            and tests; its records are lost when the process exits, and it says so in a warning at start.
            """)

    @Argument(help: "The pipeline YAML file.") var pipeline: String
    @Flag(help: "Stop once every held partition reached the end offsets that existed at start; write out all state, commit, exit 0.")
    var untilEnd = false
    @Option(help: "Serve Prometheus /metrics and /health/live, /health/ready on this port (wins over the pipeline's metrics.port; 0: any free port).")
    var metricsPort: Int?
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let logger = global.makeLogger("maidian")
        var (spec, engine) = try loadPipeline(pipeline, logger: logger)
        let properties = try kafka.resolved()
        spec.source.kafka.merge(properties) { _, commandLine in commandLine }
        spec.producerKafka.merge(properties) { _, commandLine in commandLine }
        var broker: EmbeddedBroker?
        var bootstrap = properties["bootstrap.servers"] ?? spec.source.brokers
        if bootstrap == "embedded" {
            logger.warning("""
                no brokers configured (source.brokers is 'embedded'; set it, MAIDIAN_BROKERS or -X bootstrap.servers): \
                running on an EMBEDDED IN-MEMORY BROKER, whose records are lost when this process exits
                """)
            let b = try EmbeddedBroker(brokers: 1, logger: logger)
            try b.createTopic(spec.source.topic, partitions: spec.source.partitions)
            for t in Set(spec.outputTopics + engine.stages.flatMap(\.outputTopics)) { try b.createTopic(t, partitions: spec.source.partitions) }
            if let r = engine.repartitioning {
                try b.createTopic(r.partialsTopic ?? PipelineSpec.defaultPartialsTopic(group: spec.source.group), partitions: spec.source.partitions)
            }
            bootstrap = b.bootstrapServers
            broker = b
            logger.notice("embedded broker at \(bootstrap): produce into '\(spec.source.topic)' to feed this worker")
        }
        var options = WorkerOptions()
        options.untilEnd = untilEnd
        options.maxBatch = spec.source.maxBatch
        options.livenessTimeout = .milliseconds(spec.source.livenessTimeout.milliseconds)
        // A stuck loop cannot be unwound: exit at once (status 3) and let the orchestrator restart the worker;
        // nothing is committed past what was delivered, so its records are read again.
        options.onStall = { _ in
            fflush(nil)
            _exit(3)
        }
        if let faults = ProcessInfo.processInfo.environment["MAIDIAN_TEST_FAULTS"], !faults.isEmpty {
            // Test-only fault injection (docs/recovery.md); loud so that it never goes unnoticed.
            options.hook = try TestFaults(parsing: faults)
            logger.warning("MAIDIAN_TEST_FAULTS=\(faults): injecting test faults into this worker")
        }
        try await WorkerLauncher(spec: spec, bootstrap: bootstrap, options: options, metricsPort: metricsPort, logger: logger).run()
        withExtendedLifetime(broker) {}
    }

    /// The exit status of a failed worker: 3 for liveness failures, which an orchestrator should simply
    /// restart, 1 for input newer than a finished bounded run of the group (a setting to change: the group),
    /// 2 for the rest (see docs/recovery.md).
    static func exitStatus(_ error: any Error) -> Int32 {
        switch (error as? RuntimeError)?.code {
        case .liveness: 3
        case .finishedGroup: 1
        default: 2
        }
    }
}
