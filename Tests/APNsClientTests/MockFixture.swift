import APNsCore
import APNsMock
import Foundation
import Logging
import ServiceSupport
import TestSupport
@testable import APNsClient

/// The `APNsClient` side of the shared fixture: a token client pointed at the mock.
extension MockFixture {
    /// Signs with the fixture's key, read from its `.p8` the way the relay reads one.
    var signer: ProviderTokenSigner {
        get throws { try ProviderTokenSigner(pem: String(contentsOfFile: keyPath, encoding: .utf8), keyID: key.keyID, teamID: key.teamID) }
    }

    func client(
        clock: WallClock = .system, eventLoops: APNsEventLoopGroup = .forTests, configure: (inout APNsClientConfiguration) -> Void = { _ in }
    ) throws -> APNsClient {
        var configuration = APNsClientConfiguration(credential: .token(try signer), trust: .caFile(caPath))
        configuration.route(allEnvironmentsTo: .init(host: "127.0.0.1", port: port))
        configuration.clock = clock
        configuration.pool.reconnectBackoffBase = .milliseconds(10)
        configure(&configuration)
        var logger = Logger(label: "apns-client")
        logger.logLevel = .critical
        return try APNsClient(configuration: configuration, eventLoops: eventLoops, logger: logger)
    }

    static func notification(_ i: Int = 0, pushType: PushType = .alert, bundle: String = "com.example.app") throws -> APNsNotification {
        APNsNotification(
            deviceToken: try DeviceToken(hex: String(format: "%064x", i + 1)), topic: pushType.topic(forBundleID: bundle),
            pushType: pushType, priority: pushType == .background ? .powerConsiderate : .immediate,
            payload: ArraySlice(#"{"aps":{"alert":"hello"}}"#.utf8)
        )
    }
}

extension APNsEventLoopGroup {
    /// The loops the tests' clients run on unless a test brings its own: one loop, started on first use (on
    /// the calling thread, not in a task that a busy cooperative pool may start late) and running for the
    /// rest of the test process.
    static let forTests: APNsEventLoopGroup = {
        let group = try! APNsEventLoopGroup(loops: 1)
        do { try group.startThreads() } catch { fatalError("the tests' APNs event loop did not start: \(error)") }
        return group
    }()

    /// Starts the group's threads now and returns a task that stops them when it is cancelled (a test's own
    /// group).
    func runUntilCancelled() throws -> Task<Void, any Error> {
        try startThreads()
        return Task { try await run() }
    }
}
