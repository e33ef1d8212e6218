import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// The admin HTTP endpoint: `/metrics` (Prometheus text), `/healthz` (alive), `/readyz` (ready for work).
///
/// Plain HTTP/1.1 on its own port, for Kubernetes probes and Prometheus scrapes; it serves nothing else.
struct AdminServer: Service {
    struct Probes: Sendable {
        /// `/metrics` body.
        var metrics: @Sendable () -> [UInt8]
        /// `nil` when healthy, else why not.
        var liveness: @Sendable () -> String?
        /// `nil` when ready, else why not.
        var readiness: @Sendable () -> String?
    }

    let host: String
    let port: Int
    let probes: Probes
    let logger: Logger
    /// Called with the bound port (useful with port 0).
    var onBound: @Sendable (Int) -> Void = { _ in }

    func run() async throws {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [probes] channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(AdminHandler(probes: probes))
                }
            }
            .bind(host: host, port: port)
            .get()
        let bound = channel.localAddress?.port ?? port
        logger.info("admin endpoint listening", metadata: ["host": "\(host)", "port": "\(bound)"])
        onBound(bound)
        try? await gracefulShutdown()
        try? await channel.close()
    }
}

private final class AdminHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let probes: AdminServer.Probes

    init(probes: AdminServer.Probes) {
        self.probes = probes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data) else { return }
        let path = head.uri.split(separator: "?").first.map(String.init) ?? head.uri
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
