import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

/// A worker's HTTP endpoint, as a `Service` next to `WorkerService` in the same `ServiceGroup`:
///
/// - `GET /metrics`: every series in Prometheus text format (`WorkerMetrics` brings them up to date first);
/// - `GET /health/live`: 200 while the worker thread runs and its poll loop turns, else 503;
/// - `GET /health/ready`: 200 once partitions were assigned, 503 before and from the start of shutdown.
///
/// Put it before the worker in the group's service list: the group shuts services down in reverse order,
/// so the endpoint keeps answering (ready: 503) while the worker finishes, and stops after it.
///
/// Connections that send nothing for `idleTimeout` are closed, and at most `maxConnections` are open at
/// once (more wait in the listen backlog without a descriptor): idle or half-sent connections cannot use
/// up the process's descriptors and keep probes from being answered (issue 13, class 8).
public struct OpsServer: Service {
    /// How long a connection may stay without a request before it is closed. Prometheus and Kubernetes
    /// probes send their request at once; a scraper that keeps connections alive between scrapes reconnects.
    public static let defaultIdleTimeout: Duration = .seconds(5)
    /// Most connections open at once: far more than scrapers and probes need, far fewer than the descriptors
    /// a worker may use (librdkafka holds a few per broker).
    public static let defaultMaxConnections = 256

    /// Address to listen on (`0.0.0.0`: every interface).
    public let host: String
    /// TCP port; 0 picks a free one, passed to `onListening`.
    public let port: Int
    /// How long a connection may stay without a request before it is closed.
    public let idleTimeout: Duration
    /// Most connections open at once.
    public let maxConnections: Int
    let status: WorkerStatus
    let metrics: WorkerMetrics
    let registry: PrometheusCollectorRegistry
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void

    /// - Parameters:
    ///   - port: TCP port; 0 picks a free one (passed to `onListening`).
    ///   - logger: Hummingbird's logger (it logs the start at info).
    ///   - registry: The registry `WorkerMetrics`' factory writes to (the executable bootstraps swift-metrics with it).
    ///   - idleTimeout, maxConnections: see ``defaultIdleTimeout`` and ``defaultMaxConnections``.
    public init(
        host: String, port: Int, status: WorkerStatus, metrics: WorkerMetrics, registry: PrometheusCollectorRegistry,
        logger: Logger, idleTimeout: Duration = OpsServer.defaultIdleTimeout,
        maxConnections: Int = OpsServer.defaultMaxConnections,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        self.host = host
        self.port = port
        self.idleTimeout = idleTimeout
        self.maxConnections = maxConnections
        self.status = status
        self.metrics = metrics
        self.registry = registry
        self.logger = logger
        self.onListening = onListening
    }

    public func run() async throws {
        let router = Router()
        let (metrics, registry, status) = (self.metrics, self.registry, self.status)
        router.get("/metrics") { _, _ -> Response in
            metrics.update()
            var bytes: [UInt8] = []
            registry.emit(into: &bytes)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
        }
        router.get("/health/live") { _, _ -> Response in
            let (live, reason) = status.liveness(stallLimit: metrics.liveStallLimit)
            return Self.text(live ? .ok : .serviceUnavailable, (live ? "live: " : "not live: ") + reason)
        }
        router.get("/health/ready") { _, _ -> Response in
            let (ready, reason) = status.readiness
            return Self.text(ready ? .ok : .serviceUnavailable, (ready ? "ready: " : "not ready: ") + reason)
        }
        let onListening = self.onListening
        let (seconds, attoseconds) = idleTimeout.components
        let app = Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000))),
            configuration: .init(
                address: .hostname(host, port: port), serverName: "maidian",
                availableConnectionsDelegate: MaximumAvailableConnections(maxConnections, logger: logger)),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) },
            logger: logger)
        try await app.run()
    }

    private static func text(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(
            status: status, headers: [.contentType: "text/plain; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body + "\n")))
    }
}
