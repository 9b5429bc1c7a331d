import ArgumentParser
import CoreMetrics
import Logging
import MaidianPipeline
import MaidianRuntime
import Metrics
import Prometheus
import ServiceLifecycle

/// Runs a worker in a `ServiceGroup` (graceful shutdown on SIGTERM/SIGINT), with the metrics and health
/// endpoint next to it when the pipeline's `metrics:` section or `--metrics-port` asks for one.
/// Shared by `run` and `replay`.
struct WorkerLauncher {
    var spec: PipelineSpec
    var bootstrap: String
    var options: WorkerOptions
    /// `--metrics-port`: wins over `metrics.port`.
    var metricsPort: Int?
    var logger: Logger

    /// Runs until the worker ends; `extra` services (e.g. a progress display) run beside it and get the
    /// worker's status, which is returned. Throws `ExitCode(2)` when the worker fails.
    @discardableResult
    func run(extra: (WorkerStatus) -> [any Service] = { _ in [] }) async throws -> WorkerStatus {
        var spec = spec
        var options = options
        let status = WorkerStatus()
        options.status = status
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let metrics = metricsSpec {
            // Consumer lag comes from librdkafka's statistics; the pipeline's own setting wins.
            if spec.source.kafka["statistics.interval.ms"] == nil {
                spec.source.kafka["statistics.interval.ms"] = String(metrics.statisticsInterval.milliseconds)
            }
            let registry = MetricsBootstrap.registry()
            let exporter = WorkerMetrics(status: status, registry: registry, logger: logger)
            var serverLogger = logger
            serverLogger.logLevel = max(logger.logLevel, .notice)  // the server's own chatter
            let server = OpsServer(
                host: metrics.host, port: metrics.port, status: status, metrics: exporter, registry: registry,
                logger: serverLogger, onListening: { [logger] port in
                    logger.notice("metrics on port \(port): /metrics, /health/live, /health/ready", metadata: ["port": "\(port)"])
                })
            // First in the list: the group stops services in reverse order, so the endpoint outlives the worker.
            services.append(.init(service: server, successTerminationBehavior: .gracefullyShutdownGroup,
                                  failureTerminationBehavior: .gracefullyShutdownGroup))
        }
        let worker = Worker(spec: spec, registry: stageRegistry, bootstrap: bootstrap, options: options, logger: logger)
        services.append(.init(service: WorkerService(worker: worker), successTerminationBehavior: .gracefullyShutdownGroup,
                              failureTerminationBehavior: .gracefullyShutdownGroup))
        for s in extra(status) { services.append(.init(service: s)) }
        let group = ServiceGroup(configuration: .init(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch {
            logger.critical("worker failed: \(error)")
            // 3: liveness (frozen past the session timeout); 2: anything else (delivery, fatal, setup).
            throw ExitCode(RunCommand.exitStatus(error))
        }
        return status
    }

    private var metricsSpec: MetricsSpec? {
        if let metricsPort {
            var m = spec.metrics ?? MetricsSpec(port: metricsPort)
            m.port = metricsPort
            return m
        }
        return spec.metrics
    }
}

/// swift-metrics → Prometheus, set up once per process by the executable (never by the libraries).
enum MetricsBootstrap {
    // Touched from the main task only, before the service group starts.
    nonisolated(unsafe) private static var shared: PrometheusCollectorRegistry?

    /// The process's registry; the first call bootstraps `MetricsSystem` with it (when this process started
    /// through `MaidianCLI.main`).
    static func registry() -> PrometheusCollectorRegistry {
        if let shared { return shared }
        let registry = PrometheusCollectorRegistry()
        if CLISettings.bootstrapsLogging { MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry)) }
        shared = registry
        return registry
    }
}
