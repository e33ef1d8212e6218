import APNsClient
import Foundation
import Logging
import RelayApp
import RelaySandbox
import TestSupport
import Testing

/// A new signing key in the credential's files (a Kubernetes Secret updated in place) is taken without a
/// restart, from the next token epoch.
@Suite struct SigningKeyRotationTests {
    private let team = "TEAM000001"

    private func files(_ directory: URL, key: TestSigningKey) throws -> (key: String, keyID: String) {
        let keyFile = directory.appendingPathComponent("AuthKey.p8").path
        let keyIDFile = directory.appendingPathComponent("keyId").path
        try key.pem.write(toFile: keyFile, atomically: true, encoding: .utf8)
        try "\(key.keyID)\n".write(toFile: keyIDFile, atomically: true, encoding: .utf8)
        return (keyFile, keyIDFile)
    }

    @Test func aChangedKeyAndKeyIDAreTakenAtTheNextEpochAndABrokenOneIsRefusedOnce() throws {
        let directory = try makeTemporaryDirectory("key-rotation")
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = TestSigningKey(keyID: "KEY0000001", teamID: team)
        let second = TestSigningKey(keyID: "KEY0000002", teamID: team)
        let paths = try files(directory, key: first)
        let signer = try ProviderTokenSigner(pem: first.pem, keyID: first.keyID, teamID: team)
        var watched = SigningKeyWatcher.Watched(credential: "default", prefix: "apns.", signer: signer, keyFile: paths.key, keyID: .file(paths.keyID))
        let recorder = LogRecorder()
        let logger = recorder.logger()
        let now: Int64 = 1_700_000_000

        #expect(SigningKeyWatcher.check(&watched, now: now, logger: logger) == .unchanged)
        // ServiceLifecycle logs a service's description: it must not carry the key it read.
        let described = "\(SigningKeyWatcher(watching: [watched], interval: .seconds(10), logger: logger)) \(String(reflecting: watched))"
        #expect(!described.contains("PRIVATE KEY") && !described.contains(first.pem.split(separator: "\n")[1].prefix(30)), "\(described)")
        _ = try files(directory, key: second)
        let next = now - now % 1800 + 1800
        #expect(SigningKeyWatcher.check(&watched, now: now, logger: logger) == .rotated(fromKeyID: "KEY0000001", toKeyID: "KEY0000002", from: next))
        #expect(SigningKeyWatcher.check(&watched, now: now + 10, logger: logger) == .unchanged, "acted on once")
        #expect(try signer.token(now: now).keyID == "KEY0000001", "the current epoch keeps the old key")
        #expect(try signer.token(now: next).keyID == "KEY0000002")
        #expect(recorder.lines(.notice).contains { $0.contains("signing key of credential 'default' changed") })

        // A broken key: refused, logged once, the current key stays; the key's bytes are never logged.
        try "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n".write(toFile: paths.key, atomically: true, encoding: .utf8)
        guard case .refused(let message) = SigningKeyWatcher.check(&watched, now: next + 10, logger: logger) else {
            Issue.record("a broken key was not refused")
            return
        }
        #expect(message.contains("'\(paths.key)'") && message.contains("apns.token.privateKeyFile") && message.contains("still signing with key id KEY0000002"), "\(message)")
        #expect(SigningKeyWatcher.check(&watched, now: next + 20, logger: logger) == .unchanged, "refused once")
        #expect(recorder.lines(.error).count == 1)
        #expect(!recorder.records.entries.contains { $0.message.contains("MIGHAgEA") }, "key material is never logged")
        #expect(try signer.token(now: next + 3600).keyID == "KEY0000002")

        // A missing file (an operator's change half done): said once, the key stays.
        try FileManager.default.removeItem(atPath: paths.key)
        guard case .refused(let missing) = SigningKeyWatcher.check(&watched, now: next + 30, logger: logger) else {
            Issue.record("a missing key file was not reported")
            return
        }
        #expect(missing.contains("cannot read the APNs signing key"), "\(missing)")
        #expect(SigningKeyWatcher.check(&watched, now: next + 40, logger: logger) == .unchanged)
    }

    /// The relay runs the watcher: a key written over the mounted one is noticed while events keep flowing
    /// with the current key (it is the next epoch's).
    @Test func theRelayNoticesANewKeyWithoutARestart() async throws {
        try await withSandbox { sandbox in
            let recorder = LogRecorder()
            var logger = recorder.logger(label: "relay")
            logger.logLevel = .notice
            let reader = try OutputReader(sandbox: sandbox, logger: Logger(label: "test"))
            let results = try await withRelay(sandbox, overrides: ["apns.keyReloadIntervalMs": "100"], logger: logger) { _ in
                try await sandbox.produce([(key: "r1", value: SampleEvents.event(id: "r1", deviceToken: SampleEvents.token(1)))])
                _ = try await reader.results(count: 1, timeout: .seconds(60))
                let replacement = TestSigningKey(keyID: sandbox.keyID, teamID: sandbox.teamID)
                try replacement.pem.write(toFile: sandbox.keyFile, atomically: true, encoding: .utf8)
                try await eventually("the relay noticed the new key", within: .seconds(30)) {
                    recorder.lines(.notice).contains { $0.contains("signing key of credential 'default' changed") }
                }
                try await sandbox.produce([(key: "r2", value: SampleEvents.event(id: "r2", deviceToken: SampleEvents.token(2)))])
                return try await reader.results(count: 1, timeout: .seconds(60))
            }
            await reader.close()
            let json = try #require(results.first?.json)
            #expect(json["outcome"] as? String == "delivered", "the current epoch's token still works: \(json)")
        }
    }
}
