import Hummingbird
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
public struct OpsServer: Service {
    public let host: String
    public let port: Int
    let status: WorkerStatus
    let metrics: WorkerMetrics
    let registry: PrometheusCollectorRegistry
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void

    /// - Parameters:
    ///   - port: TCP port; 0 picks a free one (passed to `onListening`).
    ///   - logger: Hummingbird's logger (it logs the start at info).
    ///   - registry: The registry `WorkerMetrics`' factory writes to (the executable bootstraps swift-metrics with it).
    public init(
        host: String, port: Int, status: WorkerStatus, metrics: WorkerMetrics, registry: PrometheusCollectorRegistry,
        logger: Logger, onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        self.host = host
        self.port = port
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
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "maidian"),
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
