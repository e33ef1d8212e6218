import NIOCore
import NIOHTTP1

/// Answers the one request of an admin connection: `/metrics`, `/healthz`, `/readyz`, else 404; then closes.
///
/// A request that declares a body is refused (413): nothing here takes one, and reading it would only give a
/// peer a way to hold the connection. One that is not HTTP/1 gets 400. Both close lingering (see
/// ``AdminConnectionHandler``); an answered one closes once the answer is out.
final class AdminRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let slot: AdminServer.ProbeSlot
    private let metrics: AdminMetrics
    private var answered = false

    init(slot: AdminServer.ProbeSlot, metrics: AdminMetrics) {
        self.slot = slot
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered, case .head(let head) = unwrapInboundIn(data) else { return }
        answered = true
        let declaresBody =
            !head.headers["transfer-encoding"].isEmpty || head.headers["content-length"].contains { $0 != "0" }
        if declaresBody {
            metrics.tooLarge.increment()
            let body = "requests to the admin endpoint carry no body\n"
            respond(
                context: context, version: head.version, status: .payloadTooLarge, body: Array(body.utf8),
                lingering: true)
            return
        }
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
            (status, contentType, body) = (
                .notFound, "text/plain", Array("not found; try /metrics, /healthz, /readyz\n".utf8)
            )
        }
        respond(
            context: context, version: head.version, status: status, contentType: contentType, body: body,
            lingering: false)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A head cut short by the close (a timeout, an eviction, a refusal below HTTP, the peer leaving) fails to
        // parse once the channel is inactive: that is no malformed request, and there is no one to answer.
        guard error is HTTPParserError, !answered, context.channel.isActive else {
            context.close(promise: nil)
            return
        }
        answered = true
        metrics.malformed.increment()
        respond(
            context: context, version: .http1_1, status: .badRequest, body: Array("not an HTTP/1 request\n".utf8),
            lingering: true)
    }

    private func respond(
        context: ChannelHandlerContext, version: HTTPVersion, status: HTTPResponseStatus,
        contentType: String = "text/plain", body: [UInt8], lingering: Bool
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: contentType)
        headers.add(name: "content-length", value: String(body.count))
        headers.add(name: "connection", value: "close")
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        if lingering {
            // The peer may still be sending: half-close, and let the connection handler drop the rest.
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            context.close(mode: .output, promise: nil)
        } else {
            // Close once the answer is out; the callback runs on the channel's event loop.
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in loopBound.value.close(promise: nil) }
        }
    }
}
