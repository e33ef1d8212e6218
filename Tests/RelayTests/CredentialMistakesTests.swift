import APNsClient
import Crypto
import Foundation
import Logging
import Relay
import RelayApp
import TestSupport
import Testing

/// Credential mistakes caught before the first push (issue #28): ids of the wrong shape, keys of the wrong
/// type, certificates that expired or whose key is another's — each refused at start with what was found.
@Suite struct CredentialMistakesTests {
    private func configuration(_ overrides: [String: String]) async throws -> RelayAppConfiguration {
        var settings = ["kafka.bootstrapServers": "b:9092"]
        settings.merge(overrides) { $1 }
        return try RelayAppConfiguration(reader: try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: settings))
    }

    private func problems(_ overrides: [String: String]) async throws -> [String] {
        var settings = ["kafka.bootstrapServers": "b:9092"]
        settings.merge(overrides) { $1 }
        let reader = try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: settings)
        return try #require(throws: ConfigurationError.self) { try RelayAppConfiguration(reader: reader) }.problems
    }

    private func token(keyID: String, teamID: String, keyFile: String = "/keys/AuthKey.p8") -> [String: String] {
        ["apns.token.keyId": keyID, "apns.token.teamId": teamID, "apns.token.privateKeyFile": keyFile]
    }

    @Test func idsOfTheWrongShapeAreRefusedSayingWhatWasFound() async throws {
        #expect(try await problems(token(keyID: "ABC", teamID: "DEF")) == [
            "configuration key 'apns.token.keyId' (APNS_RELAY_APNS_TOKEN_KEY_ID): 'ABC' is not an Apple Key ID: those are 10 characters, "
                + "A–Z and 0–9 (this has 3 characters)",
            "configuration key 'apns.token.teamId' (APNS_RELAY_APNS_TOKEN_TEAM_ID): 'DEF' is not an Apple Team ID: those are 10 "
                + "characters, A–Z and 0–9 (this has 3 characters)",
        ])
        #expect(try await problems(token(keyID: "abc123defg", teamID: "DEF123GHIJ")) == [
            "configuration key 'apns.token.keyId' (APNS_RELAY_APNS_TOKEN_KEY_ID): 'abc123defg' is not an Apple Key ID: those are 10 "
                + "characters, A–Z and 0–9 (this has lowercase letters)",
        ])
        #expect(try await problems(token(keyID: "ABC123DEFG", teamID: "DEF-123 GHI")) == [
            "configuration key 'apns.token.teamId' (APNS_RELAY_APNS_TOKEN_TEAM_ID): 'DEF-123 GHI' is not an Apple Team ID: those are 10 "
                + "characters, A–Z and 0–9 (this has 11 characters, other characters ('-', space))",
        ])
        // A named credential's keys are named as such.
        let named = try await problems([
            "apns.credentials": "acme", "apns.credential.acme.topics": "com.acme.app", "apns.credential.acme.token.keyId": "ABC123DEFG",
            "apns.credential.acme.token.teamId": "DEF123GHI", "apns.credential.acme.token.privateKeyFile": "/acme.p8",
        ])
        #expect(named == [
            "configuration key 'apns.credential.acme.token.teamId' (APNS_RELAY_APNS_CREDENTIAL_ACME_TOKEN_TEAM_ID): 'DEF123GHI' is not an "
                + "Apple Team ID: those are 10 characters, A–Z and 0–9 (this has 9 characters)",
        ])
    }

    @Test func aKeyIDFileOfTheWrongShapeIsRefusedWithItsPath() throws {
        let directory = try makeTemporaryDirectory("key-id-file")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("keyId").path
        try "abc\n".write(toFile: file, atomically: true, encoding: .utf8)
        let error = try #require(throws: RelayError.self) { try RelayApp.keyID(.file(file), prefix: "apns.") }
        #expect(error.description == "the APNs key id file '\(file)' (apns.token.keyIdFile) is 4 bytes (3 characters once trimmed), not a 10-character key id, holds lowercase letters: an Apple Key ID is 10 characters, A–Z and 0–9")
        #expect(!error.description.contains("abc"), "the file's content is never shown (it may be the key itself)")
    }

    @Test func aSigningKeyOfAnotherTypeIsRefusedWithItsPath() async throws {
        let directory = try makeTemporaryDirectory("key-types")
        defer { try? FileManager.default.removeItem(at: directory) }
        let rsa = directory.appendingPathComponent("rsa.p8").path
        _ = try await runProcess("/usr/bin/openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", rsa], check: true)
        let p384 = directory.appendingPathComponent("p384.p8").path
        try P384.Signing.PrivateKey().pemRepresentation.write(toFile: p384, atomically: true, encoding: .utf8)
        let apple = "APNs signs provider tokens with ES256: a PKCS#8 EC key on curve P-256, the .p8 file Apple's developer account (Keys) gives"
        for (file, found) in [(rsa, "an RSA key, not P-256"), (p384, "an EC key on curve secp384r1, not P-256 (prime256v1)")] {
            let configuration = try await configuration(token(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", keyFile: file))
            let error = try #require(throws: RelayError.self) {
                _ = try RelayApp.clientConfiguration(configuration.apns, credential: configuration.apns.credentials[0], logger: Logger.quiet("keys"))
            }
            #expect(error.description == "cannot parse the APNs signing key '\(file)' (apns.token.privateKeyFile, key id ABC123DEFG): the key is \(found): \(apple)")
        }
    }

    private func certificateCredential(_ files: (certificate: String, key: String)) -> [String: String] {
        ["apns.auth": "certificate", "apns.certificate.certificateFile": files.certificate, "apns.certificate.privateKeyFile": files.key]
    }

    @Test func anExpiredCertificateIsRefusedAtStart() async throws {
        let directory = try makeTemporaryDirectory("expired-certificate")
        defer { try? FileManager.default.removeItem(at: directory) }
        let expiry = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 / 60).rounded(.down) * 60 - 86_400)
        let files = try TestCertificate.write(
            in: directory, name: "expired", bundleID: "com.example.app", notBefore: expiry - 365 * 86_400, notAfter: expiry)
        let configuration = try await configuration(certificateCredential(files))
        let error = try #require(throws: RelayError.self) {
            _ = try RelayApp.client(
                configuration.apns, credential: configuration.apns.credentials[0], eventLoops: RelayApp.eventLoops(configuration.apns),
                logger: Logger.quiet("certificates"))
        }
        let date = CertificateDetails.date(Int64(expiry.timeIntervalSince1970))
        #expect(error.description.hasPrefix("cannot load the client certificate of APNs credential 'default' (apns.certificate.*): the client "
            + "certificate (com.example.app) expired on \(date): APNs refuses it; make a new one in Apple's developer account (Certificates) "
            + "and replace the file"), "\(error)")
    }

    @Test func aCertificateWhoseKeyIsAnothersIsRefusedAtStart() async throws {
        let directory = try makeTemporaryDirectory("mismatched-certificate")
        defer { try? FileManager.default.removeItem(at: directory) }
        let now = Date()
        let files = try TestCertificate.write(
            in: directory, name: "ours", bundleID: "com.example.app", notBefore: now - 86_400, notAfter: now + 300 * 86_400)
        try P256.Signing.PrivateKey().pemRepresentation.write(toFile: files.key, atomically: true, encoding: .utf8)
        let configuration = try await configuration(certificateCredential(files))
        let error = try #require(throws: RelayError.self) {
            _ = try RelayApp.client(
                configuration.apns, credential: configuration.apns.credentials[0], eventLoops: RelayApp.eventLoops(configuration.apns),
                logger: Logger.quiet("certificates"))
        }
        #expect(error.description.hasPrefix("cannot load the client certificate of APNs credential 'default' (apns.certificate.*): the private "
            + "key does not belong to the client certificate (they come from different certificate requests)"), "\(error)")
    }

    @Test func expiryNoticesStartThirtyDaysAheadAndTurnToErrorsAtSeven() {
        let now: Int64 = 1_800_000_000
        let watched = [
            CertificateExpiryWatcher.Watched(what: "far", notAfter: now + 31 * 86_400),
            CertificateExpiryWatcher.Watched(what: "soon", notAfter: now + 10 * 86_400 + 5),
            CertificateExpiryWatcher.Watched(what: "very soon", notAfter: now + 2 * 86_400),
            CertificateExpiryWatcher.Watched(what: "gone", notAfter: now - 1),
        ]
        let notices = CertificateExpiryWatcher.notices(watched, now: now)
        #expect(notices.map(\.0) == [.warning, .error, .error])
        #expect(notices.map(\.1) == [
            "soon expires on 2027-01-25 08:00 UTC, in 10 days: renew it before then",
            "very soon expires on 2027-01-17 08:00 UTC, in 2 days: renew it now",
            "gone expired on 2027-01-15 07:59 UTC: APNs refuses it; replace it and restart the relay",
        ])
    }
}
