import NIOCore

/// Joins the byte buffers NIOHTTP2Handler writes (one per frame) into one buffer per flush.
///
/// NIOSSL turns every write into its own TLS record (one `SSL_write`); a read batch of 100 requests answered
/// frame by frame would cost 100 records. Sits between NIOSSLHandler and NIOHTTP2Handler. Public for the
/// benchmark floor server, which must run on the same stack as the mock.
package final class WriteCoalescingHandler: ChannelOutboundHandler, RemovableChannelHandler {
    package typealias OutboundIn = IOData
    package typealias OutboundOut = IOData

    private var pending: ByteBuffer?
    private var promises: [EventLoopPromise<Void>] = []
    /// Runs before any byte of a flush can leave: the mock commits its observations of the answers being
    /// flushed here, so a client never sees an answer the mock has not counted (NIOHTTP2Handler flushes on
    /// its own `channelReadComplete`, before the mock's handler gets its own).
    var beforeFlush: (() -> Void)?

    /// `false`: every frame stays its own write, so NIOSSL sends it as its own TLS record, as servers that do
    /// not coalesce do (for tests of clients that must read every record that arrived).
    private let coalesces: Bool

    package init(coalesces: Bool = true) { self.coalesces = coalesces }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard coalesces else { return context.write(data, promise: promise) }
        switch unwrapOutboundIn(data) {
        case .byteBuffer(var buffer):
            if pending == nil {
                pending = context.channel.allocator.buffer(capacity: max(16_384, buffer.readableBytes))
            }
            pending!.writeBuffer(&buffer)
            if let promise { promises.append(promise) }
        case .fileRegion:
            // Not produced by HTTP/2; keep ordering by writing what is pending first.
            writePending(context: context)
            context.write(data, promise: promise)
        }
    }

    package func flush(context: ChannelHandlerContext) {
        beforeFlush?()
        writePending(context: context)
        context.flush()
    }

    package func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        beforeFlush?()
        writePending(context: context)
        context.flush()
        context.close(mode: mode, promise: promise)
    }

    private func writePending(context: ChannelHandlerContext) {
        guard let buffer = pending else { return }
        pending = nil
        let promise: EventLoopPromise<Void>?
        switch promises.count {
        case 0: promise = nil
        case 1: promise = promises[0]
        default:
            let combined = context.eventLoop.makePromise(of: Void.self)
            for each in promises { combined.futureResult.cascade(to: each) }
            promise = combined
        }
        promises.removeAll(keepingCapacity: true)
        context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
    }
}
