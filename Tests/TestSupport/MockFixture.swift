import APNsMock
import Crypto
import Foundation
import Logging
import ServiceSupport
import Synchronization

/// A provider signing key for tests. It signs with swift-crypto and the mock verifies through the JWT text,
/// so encoding bugs on either side show up.
package struct TestSigningKey: Sendable {
    package var keyID: String
    package var teamID: String
    package var privateKey: P256.Signing.PrivateKey

    package init(keyID: String, teamID: String, privateKey: P256.Signing.PrivateKey = P256.Signing.PrivateKey()) {
        self.keyID = keyID
        self.teamID = teamID
        self.privateKey = privateKey
    }

    /// What the mock trusts.
    package var providerKey: ProviderKey { ProviderKey(keyID: keyID, teamID: teamID, publicKey: privateKey.publicKey) }

    /// The key as Apple hands it out: a PKCS#8 PEM (`AuthKey_<kid>.p8`).
    package var pem: String { privateKey.pemRepresentation }

    /// An ES256 JWT; `der: true` encodes the signature as DER instead of raw r||s.
    package func token(issuedAt: Int64, der: Bool = false, signWith other: P256.Signing.PrivateKey? = nil) -> String {
        let header = base64URL(Data(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
        let claims = base64URL(Data(#"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#.utf8))
        let input = header + "." + claims
        let signature = try! (other ?? privateKey).signature(for: Data(input.utf8))
        return input + "." + base64URL(der ? signature.derRepresentation : signature.rawRepresentation)
    }

    package func authorization(issuedAt: Int64, der: Bool = false) -> (String, String) {
        ("authorization", "bearer " + token(issuedAt: issuedAt, der: der))
    }
}

/// Base64url without padding (JWT segments).
package func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// A started in-process mock APNs (TLS, HTTP/2, ES256 verification) that trusts three keys, on a clock the
/// test moves by hand. The mock's tests talk to it with a raw HTTP/2 client, the client's tests with
/// `APNsClient`; each adds its helpers in an extension. `stop()` at the end of each test.
package final class MockFixture: Sendable {
    package let server: APNsMockServer
    /// The key requests are signed with; its `.p8` is at `keyPath`.
    package let key: TestSigningKey
    package let otherKeySameTeam: TestSigningKey
    package let otherTeamKey: TestSigningKey
    package let clock: ManualWallClock
    package let port: Int
    package let caPEM: String
    package let caPath: String
    /// A temporary directory for the test's files, removed by `stop()`.
    package let directory: URL
    package let keyPath: String
    /// One token for the fixture's lifetime (ECDSA signatures are randomised: re-signing makes a new token).
    package let authorizationValue: String
    private let cleanups = Mutex<[@Sendable () async -> Void]>([])

    package static func start(
        strictFleet: Bool = false, clock: ManualWallClock = ManualWallClock(),
        _ configure: (inout APNsMockConfiguration) -> Void = { _ in }
    ) async throws -> MockFixture {
        let key = TestSigningKey(keyID: "KEY0000001", teamID: "TEAM000001")
        let sameTeam = TestSigningKey(keyID: "KEY0000002", teamID: "TEAM000001")
        let otherTeam = TestSigningKey(keyID: "KEY0000003", teamID: "TEAM000002")
        var configuration = APNsMockConfiguration()
        configuration.providerKeys = [key.providerKey, sameTeam.providerKey, otherTeam.providerKey]
        configuration.strictFleet = strictFleet
        configuration.clock = clock.clock
        configure(&configuration)
        var logger = Logger(label: "apns-mock")
        logger.logLevel = .critical
        let server = APNsMockServer(configuration: configuration, logger: logger)
        let port = try await server.start()
        return try MockFixture(server: server, keys: (key, sameTeam, otherTeam), clock: clock, port: port)
    }

    private init(
        server: APNsMockServer, keys: (TestSigningKey, TestSigningKey, TestSigningKey), clock: ManualWallClock, port: Int
    ) throws {
        self.server = server
        (key, otherKeySameTeam, otherTeamKey) = keys
        self.clock = clock
        self.port = port
        caPEM = server.caCertificatePEM!
        caPath = server.caCertificatePEMPath!
        directory = try makeTemporaryDirectory("apns-mock-fixture")
        keyPath = directory.appendingPathComponent("AuthKey_\(key.keyID).p8").path
        try key.pem.write(toFile: keyPath, atomically: true, encoding: .utf8)
        // As an operator keeps a key: readable by its owner only (the relay warns of a key others may read).
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyPath)
        authorizationValue = "bearer " + key.token(issuedAt: clock.nowSeconds)
    }

    /// Runs `cleanup` in `stop()`, before the server stops (clients the test opened).
    package func onStop(_ cleanup: @escaping @Sendable () async -> Void) {
        cleanups.withLock { $0.append(cleanup) }
    }

    package func stop() async {
        for cleanup in cleanups.withLock({ $0 }) { await cleanup() }
        await server.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}
