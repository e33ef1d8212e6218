import APNsCore
import NIOCore
import NIOHTTP2
import NIOSSL

/// Serves one APNs connection at the HTTP/2 frame level: it sits after `NIOHTTP2Handler` (no stream
/// multiplexer), sees every stream's HEADERS and DATA, and writes the response frames itself.
///
/// The same handler serves both listeners (`role`): on the push port device pushes (`/3/device/`) and
/// broadcast sends (`/4/broadcasts/apps/`), on the management port the channel API (`/1/apps/`). Each request's
/// headers are read once, routed by path prefix (`RequestRoute`), and checked by that API's rules
/// (`DeviceRequestRules`, `BroadcastRequestRules`, `ChannelManagementRules`); faults, authentication, stream
/// limits, answers and observations are common to all of them.
///
/// Answers are written as soon as a request is complete (so NIOHTTP2Handler closes the stream at once and
/// its stream map stays small) and flushed once per read batch (one TLS record per flush); with emulated
/// latency they are held and written one RTT later instead. The handler also returns connection- and
/// stream-level flow-control credit (WINDOW_UPDATE), which NIOHTTP2Handler does not do in frame mode.
final class APNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// Return connection credit once this much is consumed (a quarter of the 64 KiB window).
    private static let connectionWindowThreshold = 16_384
    private static let streamWindowThreshold = 32_768

    /// One request being answered: its stream, the API it addressed and the id its answer carries.
    struct Exchange {
        var streamID: HTTP2StreamID
        var kind: RequestKind
        var id: AnswerID
    }

    let connectionID: Int
    let role: ListenerRole
    let server: MockServerContext
    var authentication: ConnectionAuthentication
    var streams: [HTTP2StreamID: OpenStream] = [:]
    var messageIDs = MessageIDGenerator()
    /// Frames held for delayed delivery (emulated latency only).
    var outbox: [HTTP2Frame] = []
    /// Frames were written since the last flush.
    private var unflushed = false
    /// Outcomes of this read batch, recorded with one lock before the batch's answers are flushed.
    var records = ObservationStore.Batch()
    var closeAfterOutbox = false
    private var unreturnedConnectionWindow = 0
    var streamLimitRaised = false
    var processedStreams = 0
    var goAwayLastStreamID: HTTP2StreamID?
    private var peakOpenStreams = 0
    /// Streams answered since the last flush: the client still sees them open until the answers go out.
    var answeredSinceFlush = 0
    var highestStreamID = HTTP2StreamID.rootStream
    /// GOAWAY's last-stream-id may not be below a stream already processed (DATA can complete streams out of
    /// order), so this is what GOAWAY-after-N-streams names.
    var highestProcessedStreamID = HTTP2StreamID.rootStream
    private var lastDeliveryDeadline = NIODeadline.uptimeNanoseconds(0)
    private var random = Xorshift(seed: UInt64.random(in: 1...UInt64.max))
    var context: ChannelHandlerContext?
    var closed = false

    // Fault settings, read once per read batch.
    var batchLoaded = false
    private var latency: FaultInjector.Latency?
    /// Emulated latency is on: output waits in `outbox` for its delivery time.
    private var delaysOutput = false
    private var stallFlowControl = false
    var goAwayAfterStreams: Int?
    var dropLimitAfterRejection = false
    /// The limit was dropped to 1 after a rejection (dropStreamLimitAfterRejection).
    var streamLimitDropped = false
    /// MAX_CONCURRENT_STREAMS values sent in SETTINGS and not yet acknowledged, oldest first: the client
    /// acknowledges SETTINGS frames in the order they were sent, NIOHTTP2Handler's initial one first.
    var unacknowledgedStreamLimits: [Int]
    /// The limit the client acknowledged last and what it did under it (published to the observations).
    var acknowledgedLimit: AcknowledgedStreamLimit?
    var acknowledgedLimitChanged = false
    /// SETTINGS acknowledgements still to come before the client has acknowledged a drop to 1 after a
    /// rejection; then the highest stream it had opened by then (a success above it was sent under the drop).
    var acknowledgementsUntilDrop: Int?
    var streamLimitDropBoundary: HTTP2StreamID?

    /// Certificate connection whose peer certificate has not been read yet.
    private var certificatePending: Bool

    init(
        connectionID: Int,
        role: ListenerRole = .push,
        server: MockServerContext,
        authentication: ConnectionAuthentication,
        certificateMode: Bool,
        initialStreamLimit: Int
    ) {
        self.unacknowledgedStreamLimits = [initialStreamLimit]
        self.connectionID = connectionID
        self.role = role
        self.certificatePending = certificateMode
        self.server = server
        self.authentication = authentication
        self.streamLimitRaised = authentication.hasValidCredential
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        publishAcknowledgedLimit()
        closed = true
        server.connectionClosed(connectionID)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // NIOHTTP2Handler answers protocol errors itself (RST_STREAM for stream errors, GOAWAY and close for
        // connection errors), so those need nothing here; TLS and I/O errors end the connection.
        server.logger.debug("connection \(connectionID): \(error)")
        if let streamError = error as? NIOHTTP2Errors.StreamError, streamError.baseError is NIOHTTP2Errors.MaxStreamsViolation {
            acknowledgedLimit?.refused += 1
            acknowledgedLimitChanged = true
            return
        }
        if error is any NIOHTTP2Error { return }
        context.close(promise: nil)
    }

    /// NIOHTTP2Handler announces every stream's creation, closure and window change as a user event. This is
    /// the last handler and NIO's tail discards user events, so none travel on (and none is inspected: a
    /// dynamic cast per event costs more than the hop it would save).
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {}

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !batchLoaded { loadBatchSettings() }
        if certificatePending { readPeerCertificate(context: context) }
        let frame = unwrapInboundIn(data)
        let streamID = frame.streamID
        switch frame.payload {
        case .headers(let headers):
            if let last = goAwayLastStreamID, streamID > last { return }
            if streams.index(forKey: streamID) == nil {
                streams[streamID] = OpenStream(headers: headers.headers)
                if streamID > highestStreamID { highestStreamID = streamID }
                if streams.count + answeredSinceFlush > peakOpenStreams {
                    peakOpenStreams = streams.count + answeredSinceFlush
                    let (id, peak) = (connectionID, peakOpenStreams)
                    server.observations.update { $0.peakConcurrentStreamsByConnection[id] = peak }
                }
                if acknowledgedLimit != nil {
                    acknowledgedLimit!.opened += 1
                    acknowledgedLimit!.peak = max(acknowledgedLimit!.peak, streams.count + answeredSinceFlush)
                    acknowledgedLimitChanged = true
                }
            }
            if headers.endStream { complete(streamID) }
        case .data(let payload):
            var flowControlled = payload.data.readableBytes
            if let padding = payload.paddingBytes { flowControlled += padding + 1 }
            unreturnedConnectionWindow += flowControlled
            guard case .byteBuffer(var buffer) = payload.data else { return }
            if let last = goAwayLastStreamID, streamID > last { return }
            // One lookup per DATA frame; the stream is updated in place and moved out when complete.
            guard let index = streams.index(forKey: streamID) else { return }
            streams.values[index].append(&buffer)
            if payload.endStream {
                complete(streamID, streams.remove(at: index).value)
            } else {
                streams.values[index].unreturnedWindow += flowControlled
                let unreturned = streams.values[index].unreturnedWindow
                if unreturned >= Self.streamWindowThreshold, !stallFlowControl {
                    streams.values[index].unreturnedWindow = 0
                    emit(HTTP2Frame(streamID: streamID, payload: .windowUpdate(windowSizeIncrement: unreturned)))
                }
            }
        case .rstStream:
            streams.removeValue(forKey: streamID)
            closeIfDrained()
        case .settings(.ack):
            // A limit binds from its acknowledgement: start counting what the client does under it.
            guard !unacknowledgedStreamLimits.isEmpty else { return }
            publishAcknowledgedLimit()
            let limit = AcknowledgedStreamLimit(limit: unacknowledgedStreamLimits.removeFirst())
            acknowledgedLimit = limit
            let id = connectionID
            server.observations.update { $0.acknowledgedStreamLimitsByConnection[id, default: []].append(limit) }
            if let remaining = acknowledgementsUntilDrop {
                acknowledgementsUntilDrop = remaining > 1 ? remaining - 1 : nil
                if remaining <= 1 { streamLimitDropBoundary = highestStreamID }
            }
        default:
            // SETTINGS, PING, WINDOW_UPDATE and PRIORITY are handled by NIOHTTP2Handler; GOAWAY from a client
            // needs nothing from the mock.
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushOutput()
        batchLoaded = false
        context.fireChannelReadComplete()
    }

    /// The TLS handshake is over before the first HTTP/2 frame arrives, so the peer certificate is known here.
    private func readPeerCertificate(context: ChannelHandlerContext) {
        certificatePending = false
        let peer = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self).peerCertificate
        authentication.mode = .certificate(topics: ClientCertificateTopics.topics(of: peer))
    }

    func loadBatchSettings() {
        (latency, stallFlowControl, goAwayAfterStreams, dropLimitAfterRejection) = server.faults.batchSettings()
        delaysOutput = latency.map { $0.rtt > .zero || $0.jitter > .zero || $0.answersPerSecond != nil } ?? false
        batchLoaded = true
    }

    // MARK: Output

    /// Writes `frame` now (flushed at the end of the read batch) or, with emulated latency, holds it.
    func emit(_ frame: HTTP2Frame) {
        guard let context, !closed else { return }
        if !batchLoaded { loadBatchSettings() }
        if delaysOutput {
            outbox.append(frame)
        } else {
            context.write(wrapOutboundOut(frame), promise: nil)
            unflushed = true
        }
    }

    /// Records this batch's outcomes; runs before any flush (see `WriteCoalescingHandler.beforeFlush`).
    /// Publishes what the client did under the limit in force since it was last published.
    func publishAcknowledgedLimit() {
        guard acknowledgedLimitChanged, let current = acknowledgedLimit else { return }
        acknowledgedLimitChanged = false
        let id = connectionID
        server.observations.update { statistics in
            guard var limits = statistics.acknowledgedStreamLimitsByConnection[id], !limits.isEmpty else { return }
            limits[limits.count - 1] = current
            statistics.acknowledgedStreamLimitsByConnection[id] = limits
        }
    }

    func commitRecords() {
        publishAcknowledgedLimit()
        guard !records.isEmpty else { return }
        server.observations.record(records, connectionID: connectionID)
        records.removeAll()
    }

    func flushOutput(returnAllCredit: Bool = false) {
        commitRecords()
        guard let context, !closed else { return }
        if !stallFlowControl, unreturnedConnectionWindow >= (returnAllCredit ? 1 : Self.connectionWindowThreshold) {
            emit(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unreturnedConnectionWindow)))
            unreturnedConnectionWindow = 0
        }
        let answered = answeredSinceFlush
        answeredSinceFlush = 0
        let close = closeAfterOutbox
        closeAfterOutbox = false
        if close { closed = true }
        guard delaysOutput, let latency else {
            if unflushed {
                unflushed = false
                context.flush()
            }
            if close { context.close(promise: nil) }
            return
        }
        guard !outbox.isEmpty || close else { return }
        var delay = TimeAmount(latency.rtt)
        let jitter = TimeAmount(latency.jitter).nanoseconds
        if jitter > 0 {
            delay = delay + .nanoseconds(Int64(random.next() % UInt64(2 * jitter + 1)) - jitter)
        }
        var deadline = NIODeadline.now() + max(delay, .zero)
        if let rate = latency.answersPerSecond, answered > 0 {
            deadline = server.answerQueueDeadline(answers: answered, rate: rate) + max(delay, .zero)
        }
        // Keep replies in order even when jitter would reorder batches.
        if deadline < lastDeliveryDeadline { deadline = lastDeliveryDeadline }
        lastDeliveryDeadline = deadline
        let batch = outbox
        outbox.removeAll(keepingCapacity: true)
        context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            self.write(batch, thenClose: close, context: context)
        }
    }

    private func write(_ frames: [HTTP2Frame], thenClose close: Bool, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        for frame in frames { context.write(wrapOutboundOut(frame), promise: nil) }
        context.flush()
        if close { context.close(promise: nil) }
    }
}
