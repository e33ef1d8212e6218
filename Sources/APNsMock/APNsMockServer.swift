import APNsCore
import Foundation
import Logging
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import ServiceSupport
import Synchronization

/// A mock APNs provider API server: TLS 1.2+, ALPN `h2`, HTTP/2 only, validating `POST /3/device/<token>`
/// and broadcast sends `POST /4/broadcasts/apps/<bundleID>` like APNs, verifying ES256 provider tokens or
/// client certificates, with fault injection and observation for tests. With
/// `APNsMockConfiguration.managementPort` it also serves the broadcast channel-management API on a second port.
///
/// Plain async lifecycle: `start()` binds and returns the port, `stop()` closes everything.
///
/// ```swift
/// var configuration = APNsMockConfiguration()
/// configuration.providerKeys = [ProviderKey(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", publicKey: key.publicKey)]
/// let server = APNsMockServer(configuration: configuration)
/// let port = try await server.start()
/// // … client trusts server.caCertificatePEMPath …
/// try await server.waitForAccepted(count: 10, timeout: .seconds(5))
/// await server.stop()
/// ```
package final class APNsMockServer: Sendable {
    package let configuration: APNsMockConfiguration
    /// Device tokens with special answers (unregistered, expired, other topic, other environment).
    package var registry: DeviceRegistry { context.registry }
    /// Broadcast channels, shared by broadcast sends and the channel-management port; tests may create and
    /// delete channels here directly.
    package var channels: ChannelRegistry { context.channels }
    /// Fault injection, programmable while the server runs. For tests,
    /// benchmarks, the demo and `apns-mock`'s fault flags, not for code that only needs an APNs to talk to.
    package var faults: FaultInjector { context.faults }
    /// The clock the server reads (the configured one).
    package var clock: WallClock { context.clock }

    private let context: MockServerContext
    private let state = Mutex(RunState())

    private struct RunState {
        var group: MultiThreadedEventLoopGroup?
        var channel: (any Channel)?
        var control: MockControlServer?
        var management: (any Channel)?
        var port: Int?
        var controlPort: Int?
        var managementPort: Int?
        var caPEM: String?
        var caPEMPath: String?
        var temporaryDirectory: URL?
    }

    package init(configuration: APNsMockConfiguration = APNsMockConfiguration(), logger: Logger = Logger(label: "apns-mock")) {
        self.configuration = configuration
        self.context = MockServerContext(configuration: configuration, logger: logger)
    }

    /// The bound port, once started.
    package var port: Int? { state.withLock { $0.port } }
    /// The control interface's port, when `configuration.controlPort` is set and the server started.
    package var controlPort: Int? { state.withLock { $0.controlPort } }
    /// The channel-management port, when `configuration.managementPort` is set and the server started.
    package var managementPort: Int? { state.withLock { $0.managementPort } }
    /// PEM of the certificate clients should trust.
    package var caCertificatePEM: String? { state.withLock { $0.caPEM } }
    /// Path of a file holding `caCertificatePEM`.
    package var caCertificatePEMPath: String? { state.withLock { $0.caPEMPath } }

    /// Binds and starts serving; returns the bound port.
    /// - Throws: certificate, TLS-configuration or bind errors.
    @discardableResult
    package func start() async throws -> Int {
        let (certificateChain, privateKey, caPEM, caPath, temporaryDirectory) = try makeCredentials()
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: certificateChain.map { .certificate($0) },
            privateKey: .privateKey(privateKey)
        )
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        let certificateMode = configuration.clientCertificateTrustRootsPEM != nil
        if let rootsPEM = configuration.clientCertificateTrustRootsPEM {
            tls.certificateVerification = .noHostnameVerification
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(rootsPEM.utf8)))
        }
        let sslContext = try NIOSSLContext(configuration: tls)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.eventLoopThreads))
        let context = self.context
        let maxStreams = configuration.maxConcurrentStreams
        // Both listeners: same certificate, authentication and connection behaviour; the role picks the API.
        func bootstrap(_ role: ListenerRole) -> ServerBootstrap {
            ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                .childChannelOption(.maxMessagesPerRead, value: 16)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try Self.configure(channel: channel, sslContext: sslContext, context: context,
                                           certificateMode: certificateMode, maxStreams: maxStreams, role: role)
                    }
                }
        }
        let channel: any Channel
        do {
            channel = try await bootstrap(.push).bind(host: configuration.host, port: configuration.port).get()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        var management: (any Channel)?
        if let requested = configuration.managementPort {
            do {
                management = try await bootstrap(.management).bind(host: configuration.host, port: requested).get()
            } catch {
                try? await channel.close()
                try? await group.shutdownGracefully()
                throw error
            }
        }
        let port = channel.localAddress?.port ?? 0
        let managementPort = management?.localAddress?.port
        var control: MockControlServer?
        var controlPort: Int?
        if let requested = configuration.controlPort {
            let server = MockControlServer(mock: self, group: group)
            controlPort = try await server.start(host: configuration.host, port: requested)
            control = server
        }
        context.faults.onFlowControlResumed.withLock { resume in
            // Straight to the connections' event loops: a task could wait for a busy cooperative pool, and
            // the clients stalled on their windows with it.
            resume = { [context] in context.onEachConnection { _ in } }
        }
        state.withLock {
            $0 = RunState(group: group, channel: channel, control: control, management: management, port: port,
                          controlPort: controlPort, managementPort: managementPort,
                          caPEM: caPEM, caPEMPath: caPath, temporaryDirectory: temporaryDirectory)
        }
        context.logger.info("apns-mock listening", metadata: [
            "port": "\(port)", "ca": "\(caPath)", "management": "\(managementPort.map(String.init) ?? "none")",
        ])
        return port
    }

    /// Closes the listener and every connection, and stops the event loops.
    package func stop() async {
        let run = state.withLock { state -> RunState in
            defer { state = RunState(caPEM: state.caPEM, caPEMPath: state.caPEMPath, temporaryDirectory: state.temporaryDirectory) }
            return state
        }
        try? await run.channel?.close()
        try? await run.management?.close()
        await run.control?.stop()
        await context.forEachConnection { $0.closeAbruptly() }
        try? await run.group?.shutdownGracefully()
        if run.channel != nil, let directory = run.temporaryDirectory {
            try? FileManager.default.removeItem(at: directory)
        }
    }

    // MARK: Observation

    /// Counters so far.
    package var statistics: MockStatistics { context.observations.statistics }

    /// The `iat` of every provider token that verified, oldest first: each new one is a token rotation of the
    /// fleet (replicas sharing a key sign the same `iat`).
    package var providerTokensIssuedAt: [Int64] { context.authority.issuedAtOfVerifiedTokens }

    /// Connections that changed their provider token and had the change accepted (a refused change is answered
    /// 429 TooManyProviderTokenUpdates and counted in `statistics`).
    package var acceptedConnectionTokenUpdates: Int { context.authority.acceptedConnectionTokenUpdates }

    /// Accepted notifications, oldest first (at most `configuration.acceptedHistoryLimit`).
    package var acceptedNotifications: [AcceptedNotification] { context.observations.accepted }

    /// Accepted broadcast sends, oldest first (at most `configuration.acceptedHistoryLimit`).
    package var acceptedBroadcasts: [AcceptedBroadcast] { context.observations.acceptedBroadcasts }

    /// Clears counters and the accepted histories (not the device or channel registry, faults or connection
    /// state).
    package func resetObservations() { context.observations.reset() }

    /// Waits until at least `count` notifications were accepted in total, and returns the accepted history.
    /// - Throws: `APNsMockTimeout` naming what was seen when `timeout` passes first.
    @discardableResult
    package func waitForAccepted(count: Int, timeout: Duration) async throws -> [AcceptedNotification] {
        try await context.observations.wait(for: "\(count) accepted notifications", timeout: timeout) {
            $0.accepted >= count
        }
        return acceptedNotifications
    }

    /// Waits until at least `count` broadcast sends were accepted in total, and returns the accepted broadcasts.
    /// - Throws: `APNsMockTimeout` naming what was seen when `timeout` passes first.
    @discardableResult
    package func waitForAcceptedBroadcasts(count: Int, timeout: Duration) async throws -> [AcceptedBroadcast] {
        try await context.observations.wait(for: "\(count) accepted broadcasts", timeout: timeout) {
            $0.acceptedBroadcasts >= count
        }
        return acceptedBroadcasts
    }

    /// Waits until `condition` holds for the statistics (checked after every request and event).
    /// - Throws: `APNsMockTimeout` with `description` when `timeout` passes first.
    package func waitUntil(
        _ description: String,
        timeout: Duration,
        _ condition: @escaping @Sendable (MockStatistics) -> Bool
    ) async throws {
        try await context.observations.wait(for: description, timeout: timeout, condition: condition)
    }

    /// Number of open client connections, on the push and the management port.
    package var openConnections: Int { context.openConnectionCount }

    // MARK: Connection commands

    /// Sends GOAWAY (NO_ERROR, `{"reason":…}`) on every open connection; last-stream-id is the highest stream
    /// received, streams above it are not processed, and each connection closes once its streams are answered.
    package func goAway(reason: String = "Shutdown") async {
        await context.forEachConnection { $0.goAway(reason: reason) }
    }

    /// Advertises MAX_CONCURRENT_STREAMS `value` on every open connection now, and on later connections once
    /// they post a valid token. Use 1 to emulate APNs throttling a connection.
    package func setMaxConcurrentStreams(_ value: Int) async {
        context.maxConcurrentStreams = value
        await context.forEachConnection { $0.setMaxConcurrentStreams(value) }
    }

    /// Closes every client connection at once, without GOAWAY (abrupt TCP close).
    package func closeAllConnections() async {
        await context.forEachConnection { $0.dropByCommand() }
    }

    // MARK: Set-up

    private static func configure(
        channel: any Channel,
        sslContext: NIOSSLContext,
        context: MockServerContext,
        certificateMode: Bool,
        maxStreams: Int,
        role: ListenerRole
    ) throws {
        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
        try configureHTTP2(channel: channel, context: context, certificateMode: certificateMode, maxStreams: maxStreams, role: role)
    }

    /// Everything after TLS: write coalescing, HTTP/2, the mock's handler. Separate so that tests can run it
    /// on an `EmbeddedChannel`.
    static func configureHTTP2(
        channel: any Channel,
        context: MockServerContext,
        certificateMode: Bool,
        maxStreams: Int,
        role: ListenerRole = .push
    ) throws {
        let sync = channel.pipeline.syncOperations
        // One TLS record per flush instead of one per HTTP/2 frame.
        let coalescer = WriteCoalescingHandler(coalesces: context.coalescesWrites)
        try sync.addHandler(coalescer)
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .headerTableSize, value: 4096),
            HTTP2Setting(parameter: .maxConcurrentStreams, value: certificateMode ? maxStreams : 1),
            HTTP2Setting(parameter: .initialWindowSize, value: 65535),
            HTTP2Setting(parameter: .maxFrameSize, value: 16384),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 8000),
        ]
        // The mock checks the headers APNs cares about itself; NIO's generic header-block and content-length
        // validation cost ~15% of the mock's CPU per request (measured with perf), so it is off.
        connection.headerBlockValidation = .disabled
        connection.contentLengthValidation = .disabled
        // Fault injection resets streams on purpose and clients reset withheld ones; NIO's DoS limits must
        // not turn that into connection errors.
        connection.maximumRecentlyResetStreams = 10_000
        connection.maximumConnectionGlitches = 1_000_000
        connection.controlFrameRateLimit.maximumCount = 1_000_000
        connection.maximumBufferedControlFrames = 100_000
        var stream = NIOHTTP2Handler.StreamConfiguration()
        stream.streamResetFrameRateLimit.maximumCount = 1_000_000
        stream.streamErrorRateLimit.maximumCount = 1_000_000
        try sync.addHandler(NIOHTTP2Handler(mode: .server, connectionConfiguration: connection, streamConfiguration: stream))
        let id = context.makeConnectionID()
        let authentication: ConnectionAuthentication
        if certificateMode {
            authentication = ConnectionAuthentication(mode: .certificate(topics: []))
        } else {
            authentication = ConnectionAuthentication(mode: .token)
        }
        let handler = APNsConnectionHandler(connectionID: id, role: role, server: context, authentication: authentication,
                                            certificateMode: certificateMode, initialStreamLimit: certificateMode ? maxStreams : 1)
        try sync.addHandler(handler)
        // Unowned: both handlers live in this channel's pipeline and are removed together.
        coalescer.beforeFlush = { [unowned handler] in handler.commitRecords() }
        context.connectionOpened(id, channel: channel, handler: handler)
    }

    private func makeCredentials() throws -> (
        [NIOSSLCertificate], NIOSSLPrivateKey, String, String, URL?
    ) {
        switch configuration.tls {
        case .selfSigned:
            let generated = try SelfSignedCertificate.generate()
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("apns-mock-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let path = directory.appendingPathComponent("ca.pem")
            try generated.certificatePEM.write(to: path, atomically: true, encoding: .utf8)
            return (
                try NIOSSLCertificate.fromPEMBytes(Array(generated.certificatePEM.utf8)),
                try NIOSSLPrivateKey(bytes: Array(generated.privateKeyPEM.utf8), format: .pem),
                generated.certificatePEM,
                path.path,
                directory
            )
        case .selfSignedIn(let directory):
            let folder = URL(fileURLWithPath: directory)
            let certificatePath = folder.appendingPathComponent("ca.pem")
            let keyPath = folder.appendingPathComponent("key.pem")
            if let certificatePEM = try? String(contentsOf: certificatePath, encoding: .utf8),
               let keyPEM = try? String(contentsOf: keyPath, encoding: .utf8),
               let certificate = try? NIOSSLCertificate.fromPEMBytes(Array(certificatePEM.utf8)).first,
               certificate.notValidAfter > time(nil) + 86_400
            {
                return ([certificate], try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem), certificatePEM, certificatePath.path, nil)
            }
            let generated = try SelfSignedCertificate.generate()
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try Data(generated.privateKeyPEM.utf8).write(to: keyPath, options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyPath.path)
            try generated.certificatePEM.write(to: certificatePath, atomically: true, encoding: .utf8)
            context.logger.notice("generated a TLS certificate in \(directory); later starts reuse it")
            return (
                try NIOSSLCertificate.fromPEMBytes(Array(generated.certificatePEM.utf8)),
                try NIOSSLPrivateKey(bytes: Array(generated.privateKeyPEM.utf8), format: .pem),
                generated.certificatePEM, certificatePath.path, nil
            )
        case .files(let chainPath, let keyPath, let caPath):
            let caPEM = try String(contentsOfFile: caPath, encoding: .utf8)
            return (
                try NIOSSLCertificate.fromPEMFile(chainPath),
                try NIOSSLPrivateKey(file: keyPath, format: .pem),
                caPEM,
                caPath,
                nil
            )
        }
    }
}
