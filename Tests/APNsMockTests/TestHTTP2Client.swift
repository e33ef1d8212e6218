import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// One request as the test client sends it.
struct TestRequest: Sendable {
    var method = "POST"
    var path: String
    var headers: [(String, String)] = []
    var body: [UInt8] = Array(#"{"aps":{"alert":"hi"}}"#.utf8)

    init(path: String, headers: [(String, String)] = [], body: [UInt8] = Array(#"{"aps":{"alert":"hi"}}"#.utf8), method: String = "POST") {
        self.path = path
        self.headers = headers
        self.body = body
        self.method = method
    }
}

/// What came back for one stream.
struct TestResponse: Sendable {
    var streamID: Int
    var status: Int?
    var headers: [String: String] = [:]
    var body: String = ""
    /// RST_STREAM code, when the server reset the stream.
    var resetCode: HTTP2ErrorCode?
    /// GOAWAY's last-stream-id was below this stream.
    var notProcessed = false
    /// The connection closed first.
    var connectionClosed = false

    var reason: String? {
        guard let range = body.range(of: #""reason":""#) else { return nil }
        let rest = body[range.upperBound...]
        return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
    }

    var timestamp: Int64? {
        guard let range = body.range(of: #""timestamp":"#) else { return nil }
        return Int64(body[range.upperBound...].prefix { $0.isNumber })
    }
}

/// A small frame-level HTTP/2 client over TLS for tests: NIOHTTP2Handler (which obeys the server's
/// MAX_CONCURRENT_STREAMS by buffering new streams) plus a handler that matches frames to requests.
final class TestHTTP2Client: Sendable {
    let channel: any Channel
    private let handler: NIOLoopBound<ClientFrameHandler>

    private init(channel: any Channel, handler: NIOLoopBound<ClientFrameHandler>) {
        self.channel = channel
        self.handler = handler
    }

    /// Connects over TLS trusting `caPEM`; `alpn: false` sends no ALPN (HTTP/2 with prior knowledge).
    static func connect(port: Int, caPEM: String, alpn: Bool = true) async throws -> TestHTTP2Client {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(caPEM.utf8)))
        tls.applicationProtocols = alpn ? ["h2"] : []
        let sslContext = try NIOSSLContext(configuration: tls)
        let group = MultiThreadedEventLoopGroup.singleton
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: "localhost"))
                    try sync.addHandler(NIOHTTP2Handler(mode: .client))
                    try sync.addHandler(ClientFrameHandler())
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        let handler = try await channel.eventLoop.submit {
            NIOLoopBound(try channel.pipeline.syncOperations.handler(type: ClientFrameHandler.self), eventLoop: channel.eventLoop)
        }.get()
        return TestHTTP2Client(channel: channel, handler: handler)
    }

    /// Sends one request and waits for its response (or reset, GOAWAY, close).
    func send(_ request: TestRequest) async throws -> TestResponse {
        try await start(request).get()
    }

    /// Sends one request; when it is not answered within `timeout`, closes the connection, so the response
    /// comes back with `connectionClosed` instead of never (a pending answer cannot be cancelled).
    func send(_ request: TestRequest, closingAfter timeout: Duration) async throws -> TestResponse {
        let answer = start(request)
        let channel = self.channel
        let close = channel.eventLoop.scheduleTask(in: .milliseconds(Int64(timeout / .milliseconds(1)))) {
            channel.close(promise: nil)
        }
        defer { close.cancel() }
        return try await answer.get()
    }

    /// Starts all requests at once, then waits for every answer. By default they are written with one flush, and
    /// NIO then sends every HEADERS before the DATA frames (in no particular stream order); `flushEach` flushes
    /// per request so streams complete in stream-id order.
    func sendConcurrently(_ requests: [TestRequest], flushEach: Bool = false) async throws -> [TestResponse] {
        let handler = self.handler
        let futures = try await channel.eventLoop.submit {
            let futures = requests.map { request in
                let future = handler.value.start(request)
                if flushEach { handler.value.flush() }
                return future
            }
            handler.value.flush()
            return futures
        }.get()
        var responses: [TestResponse] = []
        for future in futures { responses.append(try await future.get()) }
        return responses
    }

    /// Starts a request; the future completes when it is answered.
    func start(_ request: TestRequest) -> EventLoopFuture<TestResponse> {
        let handler = self.handler
        return channel.eventLoop.flatSubmit {
            let future = handler.value.start(request)
            handler.value.flush()
            return future
        }
    }

    /// Every MAX_CONCURRENT_STREAMS value the server advertised, in order.
    func advertisedMaxConcurrentStreams() async throws -> [Int] {
        let handler = self.handler
        return try await channel.eventLoop.submit { handler.value.maxConcurrentStreamsSeen }.get()
    }

    /// GOAWAY received: last-stream-id, error code, debug data.
    func goAway() async throws -> (lastStreamID: Int, code: HTTP2ErrorCode, debug: String)? {
        let handler = self.handler
        return try await channel.eventLoop.submit { handler.value.goAway }.get()
    }

    /// Completes when the connection is closed.
    var closeFuture: EventLoopFuture<Void> { channel.closeFuture }

    func close() async {
        try? await channel.close()
    }
}

final class ClientFrameHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private var nextStreamID = 1
    private var pending: [Int: (promise: EventLoopPromise<TestResponse>, response: TestResponse)] = [:]
    private var context: ChannelHandlerContext?
    private var unreturnedWindow = 0
    /// Credit to return per stream still receiving DATA (answers larger than the 64 KiB stream window).
    private var unreturnedStreamWindow: [Int: Int] = [:]
    var maxConcurrentStreamsSeen: [Int] = []
    var goAway: (lastStreamID: Int, code: HTTP2ErrorCode, debug: String)?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func start(_ request: TestRequest) -> EventLoopFuture<TestResponse> {
        guard let context else { fatalError("test client handler not in a pipeline") }
        let streamID = nextStreamID
        nextStreamID += 2
        let promise = context.eventLoop.makePromise(of: TestResponse.self)
        if let goAway, streamID > goAway.lastStreamID {
            promise.succeed(TestResponse(streamID: streamID, notProcessed: true))
            return promise.futureResult
        }
        pending[streamID] = (promise, TestResponse(streamID: streamID))
        var headers = HPACKHeaders()
        headers.add(name: ":method", value: request.method)
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: "localhost")
        headers.add(name: ":path", value: request.path)
        for (name, value) in request.headers { headers.add(name: name, value: value) }
        let id = HTTP2StreamID(streamID)
        let hasBody = !request.body.isEmpty
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: !hasBody)))), promise: nil)
        if hasBody {
            // Split into 16 KiB frames (MAX_FRAME_SIZE).
            var remaining = request.body[...]
            while !remaining.isEmpty {
                let chunk = remaining.prefix(16_384)
                remaining = remaining.dropFirst(chunk.count)
                let buffer = context.channel.allocator.buffer(bytes: chunk)
                context.write(
                    wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(buffer), endStream: remaining.isEmpty)))),
                    promise: nil
                )
            }
        }
        return promise.futureResult
    }

    func flush() { context?.flush() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let streamID = Int(frame.streamID)
        switch frame.payload {
        case .headers(let headers):
            for (name, value, _) in headers.headers {
                if name == ":status" { pending[streamID]?.response.status = Int(value) } else {
                    pending[streamID]?.response.headers[name] = value
                }
            }
            if headers.endStream { finish(streamID) }
        case .data(let payload):
            unreturnedWindow += payload.data.readableBytes
            if case .byteBuffer(let buffer) = payload.data {
                pending[streamID]?.response.body += String(buffer: buffer)
            }
            if payload.endStream {
                unreturnedStreamWindow[streamID] = nil
                finish(streamID)
            } else {
                unreturnedStreamWindow[streamID, default: 0] += payload.data.readableBytes
            }
        case .rstStream(let code):
            pending[streamID]?.response.resetCode = code
            finish(streamID)
        case .settings(.settings(let settings)):
            for setting in settings where setting.parameter == .maxConcurrentStreams {
                maxConcurrentStreamsSeen.append(setting.value)
            }
        case .goAway(let last, let code, let opaque):
            goAway = (Int(last), code, opaque.map { String(buffer: $0) } ?? "")
            for id in pending.keys where id > Int(last) {
                pending[id]?.response.notProcessed = true
                finish(id)
            }
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if unreturnedWindow > 0 {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unreturnedWindow))), promise: nil)
            unreturnedWindow = 0
        }
        for (streamID, credit) in unreturnedStreamWindow where credit > 0 {
            let frame = HTTP2Frame(streamID: HTTP2StreamID(streamID), payload: .windowUpdate(windowSizeIncrement: credit))
            context.write(wrapOutboundOut(frame), promise: nil)
            unreturnedStreamWindow[streamID] = 0
        }
        context.flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        for id in pending.keys {
            pending[id]?.response.connectionClosed = true
            finish(id)
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Stream errors (e.g. a server reset) surface here too; the connection keeps going.
    }

    private func finish(_ streamID: Int) {
        guard let entry = pending.removeValue(forKey: streamID) else { return }
        entry.promise.succeed(entry.response)
    }
}
