import APNsCore
import APNsMock
import Foundation
import Logging
import ServiceSupport
@testable import APNsClient

/// An in-process mock APNs (TLS, h2, ES256 verification) and a token client pointed at it.
final class MockFixture: Sendable {
    static let keyID = "ABC123DEFG"
    static let teamID = "DEF123GHIJ"
    let server: APNsMockServer
    let directory: URL
    let keyPath: String
    let signer: ProviderTokenSigner
    let port: Int
    let caPath: String

    init(strictFleet: Bool = false, clock: ManualWallClock? = nil, configure: (inout APNsMockConfiguration) -> Void = { _ in }) async throws {
        directory = try makeTemporaryDirectory()
        let (keyPath, pem) = try generateP8Key(in: directory)
        self.keyPath = keyPath
        signer = try ProviderTokenSigner(pem: pem, keyID: Self.keyID, teamID: Self.teamID)
        var configuration = APNsMockConfiguration()
        configuration.providerKeys = [try ProviderKey(keyID: Self.keyID, teamID: Self.teamID, pem: pem)]
        configuration.strictFleet = strictFleet
        if let clock { configuration.clock = clock.clock }
        configure(&configuration)
        var logger = Logger(label: "apns-mock")
        logger.logLevel = .critical
        server = APNsMockServer(configuration: configuration, logger: logger)
        port = try await server.start()
        caPath = server.caCertificatePEMPath!
    }

    func client(clock: WallClock = .system, configure: (inout APNsClientConfiguration) -> Void = { _ in }) throws -> APNsClient {
        var configuration = APNsClientConfiguration(credential: .token(signer), trust: .caFile(caPath))
        configuration.route(allEnvironmentsTo: .init(host: "127.0.0.1", port: port))
        configuration.clock = clock
        configuration.pool.reconnectBackoffBase = .milliseconds(10)
        configure(&configuration)
        var logger = Logger(label: "apns-client")
        logger.logLevel = .critical
        return try APNsClient(configuration: configuration, logger: logger)
    }

    func stop() async {
        await server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    static func notification(_ i: Int = 0, pushType: PushType = .alert, bundle: String = "com.example.app") throws -> APNsNotification {
        APNsNotification(
            deviceToken: try DeviceToken(hex: String(format: "%064x", i + 1)), topic: pushType.topic(forBundleID: bundle),
            pushType: pushType, priority: pushType == .background ? .powerConsiderate : .immediate,
            payload: Array(#"{"aps":{"alert":"hello"}}"#.utf8)
        )
    }
}
