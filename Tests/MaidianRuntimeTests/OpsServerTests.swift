import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import MaidianRuntime
import Prometheus
import ServiceLifecycle
import Synchronization
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Issue 13, class 8: idle connections to the metrics endpoint are closed, and their number is capped, so
/// that probes are answered while hundreds of idle connections are open.
final class OpsServerTests: XCTestCase {
    /// Starts an ops server (no worker: `/health/live` answers 503 "not started", which is an answer);
    /// returns its port and the task serving it.
    func start(idleTimeout: Duration = OpsServer.defaultIdleTimeout, maxConnections: Int = OpsServer.defaultMaxConnections) async throws -> (Int, Task<Void, any Error>) {
        var logger = Logger(label: "ops-server-tests")
        logger.logLevel = .critical  // Hummingbird logs the cancellation that ends each test as an error
        let status = WorkerStatus()
        let registry = PrometheusCollectorRegistry()
        let metrics = WorkerMetrics(status: status, registry: registry, logger: logger)
        let bound = Mutex(0)
        let server = OpsServer(
            host: "127.0.0.1", port: 0, status: status, metrics: metrics, registry: registry, logger: logger,
            idleTimeout: idleTimeout, maxConnections: maxConnections
        ) { port in bound.withLock { $0 = port } }
        let group = ServiceGroup(services: [server], logger: logger)
        let serving = Task { try await group.run() }
        let deadline = ContinuousClock.now + .seconds(30)
        while bound.withLock({ $0 }) == 0 {
            guard ContinuousClock.now < deadline else { serving.cancel(); throw XCTSkip("the server did not start") }
            try await Task.sleep(for: .milliseconds(20))
        }
        return (bound.withLock { $0 }, serving)
    }

    /// A TCP connection to 127.0.0.1:port that sends nothing.
    func idleConnection(_ port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { close(fd); throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        return fd
    }

    /// Whether the server closed `fd` within `limit` (a read returns end of file).
    func closedByServer(_ fd: Int32, within limit: Duration) -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ms = Int32(limit.components.seconds * 1000 + limit.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&pfd, 1, ms) == 1 else { return false }
        var byte: UInt8 = 0
        return read(fd, &byte, 1) <= 0
    }

    /// `GET /health/live` on a new connection; the time it took to answer.
    func probe(_ port: Int) async throws -> (Int, Duration) {
        let started = ContinuousClock.now
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/health/live")!)
        request.timeoutInterval = 60
        let (_, response) = try await URLSession(configuration: .ephemeral).data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? -1, ContinuousClock.now - started)
    }

    func testIdleConnectionsAreClosed() async throws {
        let (port, serving) = try await start(idleTimeout: .seconds(1))
        defer { serving.cancel() }
        let fd = try idleConnection(port)
        defer { close(fd) }
        // Before: kept open forever.
        XCTAssertTrue(closedByServer(fd, within: .seconds(10)), "an idle connection was not closed")
    }

    func testProbeAnswersWhile400IdleConnectionsAreOpen() async throws {
        // The shipped defaults: 5 s idle timeout, at most 256 connections.
        let (port, serving) = try await start()
        defer { serving.cancel() }
        var idle: [Int32] = []
        defer { for fd in idle { close(fd) } }
        for _ in 0..<400 { idle.append(try idleConnection(port)) }
        let (code, took) = try await probe(port)
        XCTAssertEqual(code, 503, "an answer (the worker has not started)")
        // The 256 accepted idle connections are closed after 5 s; the probe waits in the backlog behind the rest.
        XCTAssertLessThan(took, .seconds(15), "probe took \(took)")
        XCTAssertTrue(closedByServer(idle[0], within: .seconds(10)))
    }

    func testConnectionsAreCapped() async throws {
        let (port, serving) = try await start(idleTimeout: .seconds(2), maxConnections: 4)
        defer { serving.cancel() }
        var idle: [Int32] = []
        defer { for fd in idle { close(fd) } }
        for _ in 0..<4 { idle.append(try idleConnection(port)) }
        try await Task.sleep(for: .milliseconds(300))
        // The fifth connection is not accepted until the idle ones are closed.
        let (code, took) = try await probe(port)
        XCTAssertEqual(code, 503)
        XCTAssertGreaterThan(took, .seconds(1), "answered at once: connections are not capped")
        XCTAssertLessThan(took, .seconds(10))
    }
}
