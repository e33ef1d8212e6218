// The floor for the mock APNs benchmark: an HTTP/2 server on exactly the mock's stack (NIOSSL, the mock's
// write coalescing, NIOHTTP2Handler at the frame level, one event-loop thread, answers written as requests
// complete and flushed once per read batch) that checks nothing and records nothing: every request gets
// `200` and a fixed `apns-id`. `Benchmarks/mock-apns.sh` runs it beside the mock, so the difference between
// the two is what the mock's own work (validation, provider tokens, observations) costs.
//
// Usage: nio-h2-floor CERT.pem KEY.pem   (prints "listening port=N", serves until killed)
import APNsMock
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

final class FloorHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private var unreturnedConnectionWindow = 0
    private var unflushed = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers) where headers.endStream:
            answer(frame.streamID, context: context)
        case .data(let payload):
            unreturnedConnectionWindow += payload.data.readableBytes + (payload.paddingBytes.map { $0 + 1 } ?? 0)
            if payload.endStream { answer(frame.streamID, context: context) }
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if unreturnedConnectionWindow >= 16_384 {
            let credit = unreturnedConnectionWindow
            unreturnedConnectionWindow = 0
            context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: credit))), promise: nil)
            unflushed = true
        }
        if unflushed {
            unflushed = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {}

    private func answer(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(2)
        headers.add(name: ":status", value: "200")
        headers.add(name: "apns-id", value: "8FE46B29-D2C2-4A0B-9C5C-F7FF16B2F2A8", indexing: .nonIndexable)
        let frame = HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))
        context.write(wrapOutboundOut(frame), promise: nil)
        unflushed = true
    }
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    print("usage: nio-h2-floor CERT.pem KEY.pem")
    exit(64)
}
var tls = TLSConfiguration.makeServerConfiguration(
    certificateChain: try NIOSSLCertificate.fromPEMFile(arguments[1]).map { .certificate($0) },
    privateKey: .privateKey(try NIOSSLPrivateKey(file: arguments[2], format: .pem))
)
tls.applicationProtocols = ["h2"]
let sslContext = try NIOSSLContext(configuration: tls)
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let channel = try await ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 256)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
    .childChannelOption(.maxMessagesPerRead, value: 16)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(NIOSSLServerHandler(context: sslContext))
            try sync.addHandler(WriteCoalescingHandler())
            var connection = NIOHTTP2Handler.ConnectionConfiguration()
            connection.initialSettings = [
                HTTP2Setting(parameter: .maxConcurrentStreams, value: 1000),
                HTTP2Setting(parameter: .initialWindowSize, value: 65535),
                HTTP2Setting(parameter: .maxHeaderListSize, value: 8000),
            ]
            connection.headerBlockValidation = .disabled
            connection.contentLengthValidation = .disabled
            try sync.addHandler(NIOHTTP2Handler(mode: .server, connectionConfiguration: connection))
            try sync.addHandler(FloorHandler())
        }
    }
    .bind(host: "127.0.0.1", port: 0)
    .get()
print("listening port=\(channel.localAddress?.port ?? 0)")
fflush(nil)  // all streams: the line must reach a pipe or file at once
try await channel.closeFuture.get()
