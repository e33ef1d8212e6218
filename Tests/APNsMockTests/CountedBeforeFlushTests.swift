import APNsCore
import Logging
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import APNsMock

/// The mock's statistics must include an answer before any byte of it can reach the client: tests compare
/// what clients saw with `statistics` right after the last answer (exact equality). NIOHTTP2Handler flushes
/// on its own `channelReadComplete`, before the mock's handler gets its own; the mock used to commit its
/// batch's records only there, so an answer could be on the wire, uncounted (901 of 903 counted, in CI).
@Suite struct CountedBeforeFlushTests {
    /// Sits at the head of the server's pipeline, where bytes leave: notes what the statistics say at each
    /// flush that carries bytes.
    final class FlushProbe: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        let requestsCounted: () -> Int
        var pendingBytes = 0
        var countsAtFlush: [Int] = []
        init(requestsCounted: @escaping () -> Int) { self.requestsCounted = requestsCounted }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            pendingBytes += unwrapOutboundIn(data).readableBytes
            context.write(data, promise: promise)
        }

        func flush(context: ChannelHandlerContext) {
            if pendingBytes > 0 { countsAtFlush.append(requestsCounted()) }
            pendingBytes = 0
            context.flush()
        }
    }

    @Test func everyAnswerIsCountedBeforeItsBytesLeave() throws {
        var configuration = APNsMockConfiguration()
        configuration.providerKeys = []
        let mock = MockServerContext(configuration: configuration, logger: Logger(label: "test"))
        let server = EmbeddedChannel()
        let probe = FlushProbe { mock.observations.statistics.requests }
        try server.pipeline.syncOperations.addHandler(probe)
        try APNsMockServer.configureHTTP2(channel: server, context: mock, certificateMode: false, maxStreams: 100)
        let client = EmbeddedChannel()
        try client.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .client))
        try server.connect(to: .init(ipAddress: "127.0.0.1", port: 443)).wait()
        try client.connect(to: .init(ipAddress: "127.0.0.1", port: 443)).wait()

        try shuttle(client, server)  // prefaces and SETTINGS
        probe.countsAtFlush = []
        for stream in 0..<20 {
            // No provider token: the mock answers 403 MissingProviderToken, a counted request like any other.
            let headers = HPACKHeaders([
                (":method", "POST"), (":scheme", "https"), (":authority", "api.sandbox.push.apple.com"),
                (":path", "/3/device/\(String(repeating: "ab", count: 32))"), ("apns-topic", "com.example.app"),
            ])
            let id = HTTP2StreamID(2 * stream + 1)
            client.write(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers))), promise: nil)
            var body = client.allocator.buffer(capacity: 16)
            body.writeString(#"{"aps":{}}"#)
            client.writeAndFlush(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true))), promise: nil)
            try shuttle(client, server)
            #expect(probe.countsAtFlush.last == stream + 1,
                    "answer \(stream + 1) left the mock while it had counted \(probe.countsAtFlush.last ?? 0) requests")
        }
        #expect(mock.observations.statistics.count(.missingProviderToken) == 20)
        _ = try? client.finish()
        _ = try? server.finish()
    }

    /// Moves bytes both ways until neither side has anything more to send.
    private func shuttle(_ client: EmbeddedChannel, _ server: EmbeddedChannel) throws {
        for _ in 0..<20 {
            var moved = false
            while let bytes = try client.readOutbound(as: ByteBuffer.self) {
                try server.writeInbound(bytes)
                moved = true
            }
            while let bytes = try server.readOutbound(as: ByteBuffer.self) {
                try client.writeInbound(bytes)
                moved = true
            }
            if !moved { return }
        }
    }
}

@Suite struct ObservationWaitTests {
    /// A deadline that passes before the wait is registered still ends it (the timer used to be armed before
    /// the waiter existed).
    /// (The limit is a hang's, not a speed: the parallel suite on two busy cores once took over a minute.)
    @Test(.timeLimit(.minutes(5))) func aZeroDeadlineEndsAnUnsatisfiableWait() async throws {
        let store = ObservationStore(historyLimit: 1)
        for _ in 0..<100 {
            await #expect(throws: APNsMockTimeout.self) {
                try await store.wait(for: "a request that never comes", timeout: .zero) { $0.requests > 0 }
            }
        }
        try await store.wait(for: "nothing", timeout: .zero) { _ in true }
    }

    @Test(.timeLimit(.minutes(1))) func aWaitEndsWhenItsConditionHolds() async throws {
        let store = ObservationStore(historyLimit: 1)
        async let waited: Void = store.wait(for: "a GOAWAY", timeout: .seconds(30)) { $0.goAwaysSent == 1 }
        store.update { $0.goAwaysSent += 1 }
        try await waited
    }
}
