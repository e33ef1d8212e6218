import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Relay
import ServiceLifecycle
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The admin HTTP endpoint: `/metrics` (Prometheus text), `/healthz` (alive), `/readyz` (ready for work).
///
/// Plain HTTP/1.1 on its own port, for Kubernetes probes and Prometheus scrapes; it serves nothing else.
/// It is bound by ``bind(host:port:metrics:logger:)`` before anything else starts, so that a port in use
/// fails the start-up at once, before any Kafka client exists; it answers "starting" until ``serve(_:)``
/// hands it the relay's probes.
///
/// The port is reachable from the pod network (see `admin.host` in README.md), so a peer may hold it open:
/// ``Limits`` bound what one can take, and the endpoint runs on an event loop of its own. Nothing else in the
/// process runs on it, and it runs on nothing shared: the relay's work is on librdkafka's threads and the APNs
/// client's own loops, and NIO's process-wide `MultiThreadedEventLoopGroup.singleton` is where swift-otel's
/// OTLP exporter (AsyncHTTPClient) sends spans, so a flood here delays neither, and neither delays a probe.
struct AdminServer: Service {
    /// What one peer may take. Constants, not configuration keys: the endpoint's clients are the kubelet (a
    /// probe or three at a time), a Prometheus scraper or two and an operator's curl; they send about 200 bytes
    /// and are answered within milliseconds, far inside every limit, and a full endpoint makes room rather than
    /// refusing (``AdminConnectionGate``), so the cap's exact value does not decide whether probes get through.
    struct Limits: Sendable {
        /// Open connections at most (each a descriptor): at the cap a new one closes the oldest that has not
        /// sent its request.
        let maxConnections = 64
        /// From the accept to the answer: a connection that has not sent a complete request by then is closed
        /// (and one whose answer is still not taken). Prometheus' default scrape timeout.
        let requestTimeout = Duration.seconds(10)
        /// Request line and headers; over it the answer is 431.
        let maxRequestHeadBytes = 8192
    }

    struct Probes: Sendable {
        /// `/metrics` body.
        var metrics: @Sendable () -> [UInt8]
        /// `nil` when healthy, else why not.
        var liveness: @Sendable () -> String?
        /// `nil` when ready, else why not.
        var readiness: @Sendable () -> String?
    }

    /// The probes in force: "starting" ones from the bind until the relay exists, then the relay's.
    final class ProbeSlot: Sendable {
        private let probes: Mutex<Probes>
        init(_ probes: Probes) { self.probes = Mutex(probes) }
        var current: Probes { probes.withLock { $0 } }
        func replace(with probes: Probes) { self.probes.withLock { $0 = probes } }
    }

    let host: String
    /// The port bound (the configured one, or the one the system chose for port 0).
    let port: Int
    let limits: Limits
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let slot: ProbeSlot
    private let logger: Logger

    /// Binds the listener, on an event loop thread of its own that ``close()`` (or the end of ``run()``) stops.
    ///
    /// The thread starts here, not in `run()`: the port is bound before the Kafka clients exist, and a
    /// listener needs its loop.
    /// - Throws: `RelayError` naming the port and its configuration key (in use, not permitted, bad host).
    static func bind(host: String, port: Int, metrics: @escaping @Sendable () -> [UInt8], logger: Logger) async throws
        -> AdminServer
    {
        let limits = Limits()
        let slot = ProbeSlot(Probes(metrics: metrics, liveness: { nil }, readiness: { "starting" }))
        let connections = AdminConnections(capacity: limits.maxConnections, metrics: AdminMetrics())
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel: any Channel
        do {
            channel = try await ServerBootstrap(group: group)
                // Connections wait here only until the loop's next turn (it accepts all, making room at the cap).
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        try pipeline.addHandler(AdminConnectionHandler(connections: connections, limits: limits))
                        try pipeline.configureHTTPServerPipeline(
                            withPipeliningAssistance: false, withErrorHandling: false)
                        try pipeline.addHandler(AdminRequestHandler(slot: slot, metrics: connections.metrics))
                    }
                }
                .bind(host: host, port: port)
                .get()
        } catch {
            try? await group.shutdownGracefully()
            if let error = error as? IOError, error.errnoCode == EADDRINUSE {
                throw RelayError("admin port \(port) on \(host) is in use (admin.port)")
            } else if let error = error as? IOError, error.errnoCode == EACCES {
                throw RelayError("admin port \(port) on \(host) may not be bound by this user (admin.port): \(error)")
            }
            throw RelayError("cannot listen on \(host) port \(port) (admin.host, admin.port): \(error)")
        }
        return AdminServer(
            host: host, port: channel.localAddress?.port ?? port, limits: limits, group: group, channel: channel,
            slot: slot, logger: logger
        )
    }

    /// Answers with `probes` from now on.
    func serve(_ probes: Probes) { slot.replace(with: probes) }

    /// Closes the listener and every open connection, and stops the endpoint's thread (also when the start-up
    /// fails before the service group runs).
    func close() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }

    func run() async throws {
        logger.info(
            "admin endpoint listening",
            metadata: [
                "host": "\(host)", "port": "\(port)", "maxConnections": "\(limits.maxConnections)",
                "requestTimeout": "\(limits.requestTimeout)", "maxRequestHeadBytes": "\(limits.maxRequestHeadBytes)",
            ]
        )
        try? await gracefulShutdown()
        await close()
    }
}
