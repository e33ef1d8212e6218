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
struct AdminServer: Service {
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
    private let channel: any Channel
    private let slot: ProbeSlot
    private let logger: Logger

    /// Binds the listener.
    /// - Throws: `RelayError` naming the port and its configuration key (in use, not permitted, bad host).
    static func bind(host: String, port: Int, metrics: @escaping @Sendable () -> [UInt8], logger: Logger) async throws -> AdminServer {
        let slot = ProbeSlot(Probes(metrics: metrics, liveness: { nil }, readiness: { "starting" }))
        let channel: any Channel
        do {
            channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 64)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.pipeline.configureHTTPServerPipeline().flatMap {
                        channel.pipeline.addHandler(AdminHandler(slot: slot))
                    }
                }
                .bind(host: host, port: port)
                .get()
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            throw RelayError("admin port \(port) on \(host) is in use (admin.port)")
        } catch let error as IOError where error.errnoCode == EACCES {
            throw RelayError("admin port \(port) on \(host) may not be bound by this user (admin.port): \(error)")
        } catch {
            throw RelayError("cannot listen on \(host) port \(port) (admin.host, admin.port): \(error)")
        }
        return AdminServer(host: host, port: channel.localAddress?.port ?? port, channel: channel, slot: slot, logger: logger)
    }

    /// Answers with `probes` from now on.
    func serve(_ probes: Probes) { slot.replace(with: probes) }

    /// Closes the listener when the start-up fails before the service group runs.
    func close() async { try? await channel.close() }

    func run() async throws {
        logger.info("admin endpoint listening", metadata: ["host": "\(host)", "port": "\(port)"])
        try? await gracefulShutdown()
        await close()
    }
}

private final class AdminHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let slot: AdminServer.ProbeSlot

    init(slot: AdminServer.ProbeSlot) {
        self.slot = slot
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data) else { return }
        let path = head.uri.split(separator: "?").first.map(String.init) ?? head.uri
        let probes = slot.current
        let (status, contentType, body): (HTTPResponseStatus, String, [UInt8])
        switch (head.method, path) {
        case (.GET, "/metrics"):
            (status, contentType, body) = (.ok, "text/plain; version=0.0.4; charset=utf-8", probes.metrics())
        case (.GET, "/healthz"):
            if let problem = probes.liveness() {
                (status, contentType, body) = (.serviceUnavailable, "text/plain", Array("unhealthy: \(problem)\n".utf8))
            } else {
                (status, contentType, body) = (.ok, "text/plain", Array("ok\n".utf8))
            }
        case (.GET, "/readyz"):
            if let problem = probes.readiness() {
                (status, contentType, body) = (.serviceUnavailable, "text/plain", Array("not ready: \(problem)\n".utf8))
            } else {
                (status, contentType, body) = (.ok, "text/plain", Array("ready\n".utf8))
            }
        default:
            (status, contentType, body) = (.notFound, "text/plain", Array("not found; try /metrics, /healthz, /readyz\n".utf8))
        }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: contentType)
        headers.add(name: "content-length", value: String(body.count))
        headers.add(name: "connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        // Close once the response is out; the callback runs on the channel's event loop.
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in loopBound.value.close(promise: nil) }
    }
}
