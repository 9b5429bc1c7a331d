import Logging
import ServiceLifecycle

/// A worker as a `Service`: graceful shutdown (SIGTERM/SIGINT through the `ServiceGroup`) stops intake,
/// delivers what is in flight, commits and leaves the group.
public struct WorkerService: Service {
    /// The worker the service runs on its own thread.
    public let worker: Worker

    /// A service that runs `worker`.
    public init(worker: Worker) { self.worker = worker }

    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await worker.runOnThread()
        } onGracefulShutdown: {
            worker.requestStop()
        }
    }
}
