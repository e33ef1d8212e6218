import NIOCore

/// One admin connection below HTTP: counts it against the cap, gives it a deadline, and bounds what it may
/// send before it is answered.
///
/// First in the pipeline, so it sees raw bytes: everything that arrives before the answer is the request line
/// and headers (a request here carries no body; ``AdminRequestHandler`` refuses one that declares one). The
/// deadline runs from the accept, not from the last byte: a peer that trickles a byte a second (slow loris) is
/// closed as surely as one that sends nothing. One request per connection (every answer says `connection:
/// close`), so there is no idle time between requests to time out separately.
final class AdminConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private enum Phase {
        /// Not active yet.
        case connecting
        /// Counted against the cap; `bytes` received so far, none answered.
        case awaitingRequest(id: Int, bytes: Int)
        /// The answer (or a refusal) went out; what the peer still sends is dropped.
        case answered(id: Int)
        case closed
    }

    private let connections: AdminConnections
    private let limits: AdminServer.Limits
    private var phase = Phase.connecting
    private var deadline: Scheduled<Void>?

    init(connections: AdminConnections, limits: AdminServer.Limits) {
        self.connections = connections
        self.limits = limits
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard case .connecting = phase else { return }
        phase = .awaitingRequest(id: connections.admit(context.channel), bytes: 0)
        // On the loop (isolated): the task may hold the context; channelInactive cancels it.
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(limits.requestTimeout)) { [self] in
            if case .awaitingRequest = phase { connections.metrics.timedOut.increment() }
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .awaitingRequest(let id, let bytes) = phase else { return }  // one request per connection
        let total = bytes + unwrapInboundIn(data).readableBytes
        guard total <= limits.maxRequestHeadBytes else {
            refuseOversizedRequest(context: context, id: id)
            return
        }
        phase = .awaitingRequest(id: id, bytes: total)
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .awaitingRequest(let id, _) = phase { markAnswered(id) }
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { finish() }

    private func finish() {
        deadline?.cancel()
        deadline = nil
        switch phase {
        case .awaitingRequest(let id, _), .answered(let id): connections.closed(id)
        case .connecting, .closed: break
        }
        phase = .closed
    }

    private func markAnswered(_ id: Int) {
        phase = .answered(id: id)
        connections.answered(id)
    }

    /// 431 and a lingering close: the answer is followed by a FIN, and what the peer still sends is read and
    /// dropped until it closes (or the deadline), so that unread input does not turn the close into a reset
    /// that could destroy the answer before the peer reads it.
    private func refuseOversizedRequest(context: ChannelHandlerContext, id: Int) {
        markAnswered(id)
        connections.metrics.tooLarge.increment()
        let body = "request line and headers over \(limits.maxRequestHeadBytes) bytes\n"
        let head =
            "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\n"
            + "content-length: \(body.utf8.count)\r\nconnection: close\r\n\r\n"
        // From this handler, the write goes straight to the socket (past the HTTP encoder).
        context.write(wrapOutboundOut(.byteBuffer(context.channel.allocator.buffer(string: head + body))), promise: nil)
        context.flush()
        context.close(mode: .output, promise: nil)
    }
}
