import APNsCore
import Foundation
import Logging
import ServiceSupport
import TestSupport
import Testing
@testable import APNsClient

/// What the client requires of a TLS peer before it sends a request: h2 selected by ALPN, and a certificate
/// checked against the name it connected to (never against no name at all).
@Suite(.serialized) struct TLSPeerChecksTests {
    static func client(host: String, port: Int, trust: ServerTrust) throws -> APNsClient {
        let signer = try ProviderTokenSigner(key: ECPrivateKey(rawPrivateKey: ProviderTokenTests.rfcKey), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        var configuration = APNsClientConfiguration(credential: .token(signer), trust: trust)
        configuration.route(allEnvironmentsTo: .init(host: host, port: port))
        configuration.pool.maxConnections = 1
        configuration.pool.reconnectBackoffBase = .milliseconds(10)
        var logger = Logger(label: "apns-client")
        logger.logLevel = .critical
        return try APNsClient(configuration: configuration, eventLoops: .forTests, logger: logger)
    }

    /// `openssl s_server` completes TLS with a certificate the client trusts but selects no ALPN protocol (it
    /// was given none): an HTTP/1.1 server, or a middlebox, not APNs.
    @Test func refusesAServerThatSelectsNoALPNProtocol() async throws {
        let directory = try makeTemporaryDirectory("no-alpn")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (cert, key) = try await generateServerCertificate(in: directory)
        let port = try freeLocalPort()
        let server = try ChildProcess("/usr/bin/openssl", ["s_server", "-accept", String(port), "-cert", cert, "-key", key, "-www", "-quiet"])
        defer { server.stop() }
        try await waitForListener(port: port)

        let client = try Self.client(host: "127.0.0.1", port: port, trust: .caFile(cert))
        let error = try await #require(throws: APNsClientError.self) {
            try await client.send(try TransportTests.notification(), timeout: hangGuard)
        }
        #expect(error.transportFailure == .connectFailed, "\(error)")
        #expect(error.message.contains("TLS server 127.0.0.1 selected no ALPN protocol, not h2"), "\(error)")
        #expect(client.connectionCount(for: .production) == 0)
        await client.shutdown(deadline: .now.advanced(by: .seconds(5)))
    }

    /// The same certificate and server with h2 selected is accepted: the refusal above is the ALPN check's.
    @Test func acceptsTheSameServerWhenItSelectsH2() async throws {
        let server = try await NGHTTPD()
        defer { server.stop() }
        let client = try Self.client(host: "127.0.0.1", port: server.port, trust: .caFile(server.caFile))
        let response = try await client.send(try TransportTests.notification(), timeout: hangGuard)
        #expect(response.status == 200)
        await client.shutdown(deadline: .now.advanced(by: .seconds(5)))
    }

    /// A name the verifier cannot take (here one with a NUL, which C sees cut short as "localhost") must fail
    /// the connection: an unchecked setter left the name unset or shortened, and the handshake then accepted
    /// a certificate for another name.
    @Test func refusesToConnectWhenTheNameToVerifyCannotBeSet() async throws {
        let server = try await NGHTTPD()
        defer { server.stop() }
        let client = try Self.client(host: "localhost\u{0}.attacker.example", port: server.port, trust: .caFile(server.caFile))
        let error = try await #require(throws: APNsClientError.self) {
            try await client.send(try TransportTests.notification(), timeout: hangGuard)
        }
        #expect(error.transportFailure == .connectFailed, "\(error)")
        #expect(error.message.contains("cannot set the name to verify the server's certificate against"), "\(error)")
        await client.shutdown(deadline: .now.advanced(by: .seconds(5)))
    }

}
