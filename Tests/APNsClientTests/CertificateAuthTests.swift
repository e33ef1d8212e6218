import APNsCore
import APNsMock
import Foundation
import Logging
import TestSupport
import Testing
@testable import APNsClient

/// Certificate (mutual TLS) authentication against the mock in certificate mode.
@Suite(.serialized) struct CertificateAuthTests {
    struct Credentials {
        let caPEM: String
        let certificate: String
        let key: String
        let pkcs12: String
    }

    static func makeCredentials(in dir: URL, bundle: String) async throws -> Credentials {
        let p = { (name: String) in dir.appendingPathComponent(name).path }
        _ = try await runProcess("/usr/bin/openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                     "-keyout", p("ca.key"), "-out", p("ca.crt"), "-subj", "/CN=Test Push CA", "-days", "2"], check: true).stdout
        _ = try await runProcess("/usr/bin/openssl", ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                     "-keyout", p("client.key"), "-out", p("client.csr"),
                                     "-subj", "/UID=\(bundle)/CN=Apple Push Services: \(bundle)"], check: true).stdout
        _ = try await runProcess("/usr/bin/openssl", ["x509", "-req", "-in", p("client.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
                                     "-CAcreateserial", "-out", p("client.crt"), "-days", "2"], check: true).stdout
        _ = try await runProcess("/usr/bin/openssl", ["pkcs12", "-export", "-in", p("client.crt"), "-inkey", p("client.key"),
                                     "-out", p("client.p12"), "-passout", "pass:secret"], check: true).stdout
        return Credentials(caPEM: try String(contentsOfFile: p("ca.crt"), encoding: .utf8), certificate: p("client.crt"),
                           key: p("client.key"), pkcs12: p("client.p12"))
    }

    func send(with certificate: ClientCertificate, mock: APNsMockServer, ca: String) async throws -> APNsResponse {
        var configuration = APNsClientConfiguration(credential: .certificate(certificate), trust: .caFile(ca))
        configuration.route(allEnvironmentsTo: .init(host: "127.0.0.1", port: mock.port!))
        var logger = Logger(label: "apns-client")
        logger.logLevel = .critical
        let client = try APNsClient(configuration: configuration, eventLoops: .forTests, logger: logger)
        defer { Task { await client.shutdown() } }
        return try await client.send(try MockFixture.notification(3), timeout: hangGuard)
    }

    @Test func pemAndPKCS12ClientCertificatesAuthenticate() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let credentials = try await Self.makeCredentials(in: dir, bundle: "com.example.app")
        var configuration = APNsMockConfiguration()
        configuration.clientCertificateTrustRootsPEM = credentials.caPEM
        var logger = Logger(label: "apns-mock")
        logger.logLevel = .critical
        let mock = APNsMockServer(configuration: configuration, logger: logger)
        try await mock.start()
        let ca = mock.caCertificatePEMPath!
        let pem = try await send(with: .pem(certificateFile: credentials.certificate, privateKeyFile: credentials.key), mock: mock, ca: ca)
        #expect(pem.status == 200, "\(pem)")
        let p12 = try await send(with: .pkcs12(file: credentials.pkcs12, passphrase: "secret"), mock: mock, ca: ca)
        #expect(p12.status == 200, "\(p12)")
        #expect(mock.statistics.accepted == 2)
        await mock.stop()
    }

    @Test func wrongPKCS12PassphraseIsAnInvalidCredential() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let credentials = try await Self.makeCredentials(in: dir, bundle: "com.example.app")
        let error = #expect(throws: APNsClientError.self) {
            try APNsClient(configuration: APNsClientConfiguration(credential: .certificate(.pkcs12(file: credentials.pkcs12, passphrase: "hunter2-not-it"))), eventLoops: .forTests)
        }
        #expect(error?.code == .invalidCredential)
        #expect(!(error?.description.contains("hunter2") ?? true), "the passphrase is never printed")
    }
}
