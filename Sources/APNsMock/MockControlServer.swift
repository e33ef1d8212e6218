import APNsCore
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The HTTP/1.1 JSON control interface of a running mock (plain TCP, for scripts and other processes).
///
/// - `GET /stats` → counters; `GET /accepted` → accepted notifications (payload as UTF-8 text);
///   `GET /accepted-broadcasts` → accepted broadcast sends (payload as UTF-8 text)
/// - `POST /faults` with any of: `{"rttMs":40,"jitterMs":5,"failNext":{"count":3,"reason":"TooManyRequests"},
///   "failureRate":{"reason":"ServiceUnavailable","rate":0.1},"refuseNext":2,"withholdNext":1,"withholdAll":false,
///   "withholdRate":0.1,
///   "dropNext":1,"goAwayAfterStreams":100,"stallFlowControl":true,"dropStreamLimitAfterRejection":true,
///   "reset":true}`
/// - `POST /goaway` `{"reason":"Shutdown"}`; `POST /max-streams` `{"value":1}`; `POST /close-connections`
/// - `POST /registry` `{"token":"…","state":"unregistered","sinceMs":…}` (`expired`, `active` with
///   `bundleId`/`environment`, `remove`)
/// - `POST /reset-observations`
final class MockControlServer: Sendable {
    private let mock: APNsMockServer
    private let group: any EventLoopGroup
    private let channel = Mutex<(any Channel)?>(nil)

    init(mock: APNsMockServer, group: any EventLoopGroup) {
        self.mock = mock
        self.group = group
    }

    func start(host: String, port: Int) async throws -> Int {
        let mock = self.mock
        let bound = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(ControlHandler(mock: mock))
                }
            }
            .bind(host: host, port: port).get()
        channel.withLock { $0 = bound }
        return bound.localAddress?.port ?? 0
    }

    func stop() async {
        let bound = channel.withLock { $0 }
        try? await bound?.close()
    }
}

private final class ControlHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let mock: APNsMockServer
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()

    init(mock: APNsMockServer) { self.mock = mock }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var chunk):
            body.writeBuffer(&chunk)
        case .end:
            guard let head else { return }
            let bytes = Data(body.readableBytesView)
            let mock = self.mock
            let channel = context.channel
            let keepAlive = head.isKeepAlive
            let method = head.method, uri = head.uri
            // Answered here on the event loop: a Task would wait for the process's cooperative pool, which a
            // test process with many tests blocking its threads can leave without a free thread for seconds (a
            // CI run saw /faults time out after 10 s). Only the commands that act on every connection suspend.
            if let answer = ControlCommands.handleAtOnce(mock: mock, method: method, uri: uri, body: bytes) {
                ControlCommands.respond(channel: channel, status: answer.0, json: answer.1, keepAlive: keepAlive)
                return
            }
            Task {
                let answer = await ControlCommands.handle(mock: mock, method: method, uri: uri, body: bytes)
                ControlCommands.respond(channel: channel, status: answer.0, json: answer.1, keepAlive: keepAlive)
            }
        }
    }
}

enum ControlCommands {
    static func respond(channel: any Channel, status: HTTPResponseStatus, json: Data, keepAlive: Bool) {
        var buffer = channel.allocator.buffer(capacity: json.count)
        buffer.writeBytes(json)
        var headers = HTTPHeaders([("content-type", "application/json"), ("content-length", "\(json.count)")])
        if !keepAlive { headers.add(name: "connection", value: "close") }
        channel.write(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers)), promise: nil)
        channel.write(HTTPServerResponsePart.body(.byteBuffer(buffer)), promise: nil)
        channel.writeAndFlush(HTTPServerResponsePart.end(nil)).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }

    /// The answer to a command that does not act on the open connections, at once; `nil` for the others
    /// (`/goaway`, `/max-streams`, `/close-connections`), which `handle` carries out.
    static func handleAtOnce(mock: APNsMockServer, method: HTTPMethod, uri: String, body: Data) -> (HTTPResponseStatus, Data)? {
        switch (method, uri) {
        case (.POST, "/goaway"), (.POST, "/max-streams"), (.POST, "/close-connections"): nil
        default: handleSynchronously(mock: mock, method: method, uri: uri, body: body)
        }
    }

    static func handle(mock: APNsMockServer, method: HTTPMethod, uri: String, body: Data) async -> (HTTPResponseStatus, Data) {
        let object = (try? JSONSerialization.jsonObject(with: body.isEmpty ? Data("{}".utf8) : body)) as? [String: Any]
        guard let object else { return error(.badRequest, "body is not a JSON object") }
        switch (method, uri) {
        case (.POST, "/goaway"):
            await mock.goAway(reason: object["reason"] as? String ?? "Shutdown")
            return ok([:])
        case (.POST, "/max-streams"):
            guard let value = object["value"] as? Int, value >= 0 else { return error(.badRequest, "value must be an integer") }
            await mock.setMaxConcurrentStreams(value)
            return ok([:])
        case (.POST, "/close-connections"):
            await mock.closeAllConnections()
            return ok([:])
        default:
            return handleSynchronously(mock: mock, method: method, uri: uri, body: body)
        }
    }

    private static func handleSynchronously(mock: APNsMockServer, method: HTTPMethod, uri: String, body: Data) -> (HTTPResponseStatus, Data) {
        let object = (try? JSONSerialization.jsonObject(with: body.isEmpty ? Data("{}".utf8) : body)) as? [String: Any]
        guard let object else { return error(.badRequest, "body is not a JSON object") }
        switch (method, uri) {
        case (.GET, "/stats"):
            let stats = mock.statistics
            return ok([
                "requests": stats.requests, "accepted": stats.accepted, "responses": stats.responses,
                "refusedStreams": stats.refusedStreams, "withheldReplies": stats.withheldReplies,
                "droppedConnections": stats.droppedConnections, "goAwaysSent": stats.goAwaysSent,
                "connectionsOpened": stats.connectionsOpened, "openConnections": mock.openConnections,
                "acceptedByDeviceToken": stats.acceptedByDeviceToken,
                "broadcastRequests": stats.broadcastRequests, "acceptedBroadcasts": stats.acceptedBroadcasts,
                "managementRequests": stats.managementRequests,
            ])
        case (.GET, "/accepted"):
            let list = mock.acceptedNotifications.map { notification -> [String: Any] in
                var entry: [String: Any] = [
                    "deviceToken": notification.deviceToken, "topic": notification.topic,
                    "pushType": notification.pushType.rawValue, "apnsId": notification.apnsID,
                    "payload": String(decoding: notification.payload, as: UTF8.self),
                    "connectionId": notification.connectionID,
                ]
                entry["priority"] = notification.priority
                entry["expiration"] = notification.expiration
                entry["collapseId"] = notification.collapseID
                return entry
            }
            return ok(["accepted": list])
        case (.GET, "/accepted-broadcasts"):
            let list = mock.acceptedBroadcasts.map { broadcast -> [String: Any] in
                var entry: [String: Any] = [
                    "channelId": broadcast.channelID, "bundleId": broadcast.bundleID,
                    "requestId": broadcast.requestID, "uniqueId": broadcast.uniqueID,
                    "payload": String(decoding: broadcast.payload, as: UTF8.self),
                    "connectionId": broadcast.connectionID,
                ]
                entry["priority"] = broadcast.priority
                entry["expiration"] = broadcast.expiration
                return entry
            }
            return ok(["accepted": list])
        case (.POST, "/faults"):
            return applyFaults(object, to: mock.faults)
        case (.POST, "/reset-observations"):
            mock.resetObservations()
            return ok([:])
        case (.POST, "/registry"):
            guard let token = object["token"] as? String else { return error(.badRequest, "token is required") }
            switch object["state"] as? String {
            case "unregistered":
                mock.registry.unregister(token, sinceMilliseconds: (object["sinceMs"] as? Int).map(Int64.init) ?? mock.clock.nowMilliseconds())
            case "expired":
                mock.registry.set(token, .expired)
            case "active":
                mock.registry.register(
                    token, bundleID: object["bundleId"] as? String,
                    environment: (object["environment"] as? String).flatMap(APNsEnvironment.init(rawValue:))
                )
            case "remove":
                mock.registry.remove(token)
            default:
                return error(.badRequest, "state must be unregistered, expired, active or remove")
            }
            return ok([:])
        default:
            return error(.notFound, "no such control endpoint")
        }
    }

    static func applyFaults(_ object: [String: Any], to faults: FaultInjector) -> (HTTPResponseStatus, Data) {
        if object["reset"] as? Bool == true { faults.reset() }
        if let rtt = object["rttMs"] as? Int {
            faults.latency = rtt > 0 ? .init(rtt: .milliseconds(rtt), jitter: .milliseconds(object["jitterMs"] as? Int ?? 0)) : nil
        }
        if let failNext = object["failNext"] as? [String: Any] {
            guard let count = failNext["count"] as? Int, let reason = failNext["reason"] as? String else {
                return error(.badRequest, "failNext needs count and reason")
            }
            faults.failNext(count, with: APNsReason(rawValue: reason))
        }
        if let rate = object["failureRate"] as? [String: Any] {
            guard let value = rate["rate"] as? Double, let reason = rate["reason"] as? String else {
                return error(.badRequest, "failureRate needs rate and reason")
            }
            faults.setFailureRate(value, for: APNsReason(rawValue: reason))
        }
        if let count = object["refuseNext"] as? Int { faults.refuseNext(count) }
        if let count = object["withholdNext"] as? Int { faults.withholdNext(count) }
        if let all = object["withholdAll"] as? Bool { faults.withholdAllReplies = all }
        if let rate = object["withholdRate"] as? Double { faults.withholdRate = rate }
        if let count = object["dropNext"] as? Int { faults.dropConnectionOnNext(count) }
        if object.keys.contains("goAwayAfterStreams") { faults.goAwayAfterStreams = object["goAwayAfterStreams"] as? Int }
        if let stall = object["stallFlowControl"] as? Bool { faults.stallFlowControl = stall }
        if let drop = object["dropStreamLimitAfterRejection"] as? Bool { faults.dropStreamLimitAfterRejection = drop }
        return ok([:])
    }

    private static func ok(_ object: [String: Any]) -> (HTTPResponseStatus, Data) {
        (.ok, (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8))
    }

    private static func error(_ status: HTTPResponseStatus, _ message: String) -> (HTTPResponseStatus, Data) {
        (status, (try? JSONSerialization.data(withJSONObject: ["error": message])) ?? Data("{}".utf8))
    }
}
