import Crypto
import Foundation
import Relay
import RelayApp
import TestSupport
import Testing

/// The warnings about secret files readable by others, as `check` prints them (its logger is quiet).
@Suite struct KeyFileNoticesTests {
    private func configuration(_ overrides: [String: String]) async throws -> RelayAppConfiguration {
        var settings = ["kafka.bootstrapServers": "b:9092"]
        settings.merge(overrides) { $1 }
        return try RelayAppConfiguration(reader: try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: settings))
    }

    @Test func keyFileNoticesCoverEverySecretFileOfACertificateCredential() async throws {
        let directory = try makeTemporaryDirectory("key-mode-p12")
        defer { try? FileManager.default.removeItem(at: directory) }
        let p12 = directory.appendingPathComponent("cert.p12").path
        let passphrase = directory.appendingPathComponent("passphrase").path
        try Data([0x30]).write(to: URL(fileURLWithPath: p12))
        try "x\n".write(toFile: passphrase, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: p12)
        try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: passphrase)
        // From a file, as a PKCS#12 credential is written in ConfigurationTests.
        let file = directory.appendingPathComponent("relay.json").path
        try #"{"kafka":{"bootstrapServers":"b:9092"},"apns":{"auth":"certificate","certificate":{"pkcs12File":"\#(p12)","passphraseFile":"\#(passphrase)"}}}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let configuration = try RelayAppConfiguration(reader: try await RelayAppConfiguration.reader(file: file, environment: [:], overrides: [:]))
        let notices = RelayApp.keyFileNotices(configuration.apns.credentials[0])
        #expect(notices.count == 2, "\(notices)")
        #expect(notices.first?.hasPrefix("the APNs PKCS#12 file '\(p12)' (apns.certificate.pkcs12File) has mode 0644") == true, "\(notices)")
        #expect(notices.last?.hasPrefix("the certificate passphrase file '\(passphrase)' (apns.certificate.passphraseFile) has mode 0444") == true, "\(notices)")
    }

    @Test func aCertificatesPrivateKeyFileReadableByOthersIsNamed() async throws {
        let directory = try makeTemporaryDirectory("key-mode-pem")
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        try "not read here\n".write(toFile: certificate, atomically: true, encoding: .utf8)
        try P256.Signing.PrivateKey().pemRepresentation.write(toFile: key, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: certificate)  // public: no notice
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: key)  // group only: no notice
        let configuration = try await configuration([
            "apns.auth": "certificate", "apns.certificate.certificateFile": certificate, "apns.certificate.privateKeyFile": key,
        ])
        #expect(RelayApp.keyFileNotices(configuration.apns.credentials[0]) == [])
        try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: key)
        #expect(RelayApp.keyFileNotices(configuration.apns.credentials[0]) == [
            "the APNs certificate's private key file '\(key)' (apns.certificate.privateKeyFile) has mode 0666: readable by others; "
                + "0600 or 0440 is enough (on Kubernetes, set the Secret volume's defaultMode: 0440)",
        ])
    }
}
