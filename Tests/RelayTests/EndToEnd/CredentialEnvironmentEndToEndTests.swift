import APNsCore
import APNsMock
import Crypto
import Foundation
import Logging
import RelayApp
import RelaySandbox
import TestSupport
import Testing

/// Two signing keys for one app, one restricted to each APNs environment (Apple allows this since 2025),
/// against two mock APNs — one per environment — that refuse a key used in the other environment with
/// 403 BadEnvironmentKeyInToken, as APNs does (issue #26).
@Suite(.serialized, .timeLimit(.minutes(3)))
struct CredentialEnvironmentEndToEndTests {
    let logger = Logger.quiet("credential-environments")
    static let team = "SCOPETEAM1"
    static let productionKeyID = "PRODKEY001"
    static let developmentKeyID = "DEVKEY0001"

    /// A production and a development mock APNs, each trusting both keys (each key restricted to its own
    /// environment), and the files a relay needs: both keys and one CA file that trusts both mocks.
    struct ScopedAPNs {
        let production: APNsMockServer
        let development: APNsMockServer
        let productionPort: Int
        let developmentPort: Int
        let productionKeyFile: String
        let developmentKeyFile: String
        let caFile: String
    }

    private func withScopedAPNs<T: Sendable>(_ body: (ScopedAPNs) async throws -> T) async throws -> T {
        let directory = NSTemporaryDirectory() + "scoped-apns-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let productionKey = P256.Signing.PrivateKey()
        let developmentKey = P256.Signing.PrivateKey()
        let keys = [
            ProviderKey(keyID: Self.productionKeyID, teamID: Self.team, publicKey: productionKey.publicKey, environment: .production),
            ProviderKey(keyID: Self.developmentKeyID, teamID: Self.team, publicKey: developmentKey.publicKey, environment: .development),
        ]
        func mock(_ environment: APNsEnvironment) -> APNsMockServer {
            var configuration = APNsMockConfiguration()
            configuration.environment = environment
            configuration.providerKeys = keys
            // One certificate for both (made by the first to start, reused by the second): one CA file.
            configuration.tls = .selfSignedIn(directory: directory + "/tls")
            return APNsMockServer(configuration: configuration, logger: logger)
        }
        let production = mock(.production), development = mock(.development)
        let productionPort = try await production.start()
        let developmentPort = try await development.start()
        let productionKeyFile = directory + "/AuthKey_\(Self.productionKeyID).p8"
        let developmentKeyFile = directory + "/AuthKey_\(Self.developmentKeyID).p8"
        try productionKey.pemRepresentation.write(toFile: productionKeyFile, atomically: true, encoding: .utf8)
        try developmentKey.pemRepresentation.write(toFile: developmentKeyFile, atomically: true, encoding: .utf8)
        for file in [productionKeyFile, developmentKeyFile] {
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        }
        let caFile = try #require(development.caCertificatePEMPath)
        #expect(production.caCertificatePEMPath == caFile)
        let scoped = ScopedAPNs(
            production: production, development: development, productionPort: productionPort, developmentPort: developmentPort,
            productionKeyFile: productionKeyFile, developmentKeyFile: developmentKeyFile, caFile: caFile)
        do {
            let value = try await body(scoped)
            await production.stop()
            await development.stop()
            return value
        } catch {
            await production.stop()
            await development.stop()
            throw error
        }
    }

    /// The sandbox's settings with its own credential replaced by `prod` (production) and `dev`
    /// (development) for com.example.a, and the APNs hosts by the two mocks. `swapped`: each credential is
    /// given the other environment's key, the mistake this guards against.
    private func settings(_ sandbox: RelaySandbox, _ apns: ScopedAPNs, swapped: Bool = false) -> [String: String] {
        var settings = sandbox.relaySettings(groupID: "scoped-\(UUID().uuidString.prefix(8))")
        for key in ["apns.token.keyId", "apns.token.teamId", "apns.token.privateKeyFile"] { settings[key] = nil }
        let production = (Self.productionKeyID, apns.productionKeyFile), development = (Self.developmentKeyID, apns.developmentKeyFile)
        let keys = swapped ? (development, production) : (production, development)
        settings.merge([
            "apns.caFile": apns.caFile,
            "apns.production.port": String(apns.productionPort),
            "apns.development.port": String(apns.developmentPort),
            "apns.credentials": "prod,dev",
            "apns.credential.prod.token.keyId": keys.0.0, "apns.credential.prod.token.privateKeyFile": keys.0.1,
            "apns.credential.prod.token.teamId": Self.team, "apns.credential.prod.environments": "production",
            "apns.credential.prod.topics": "com.example.a,com.example.b",
            "apns.credential.dev.token.keyId": keys.1.0, "apns.credential.dev.token.privateKeyFile": keys.1.1,
            "apns.credential.dev.token.teamId": Self.team, "apns.credential.dev.environments": "development",
            "apns.credential.dev.topics": "com.example.a",
        ]) { $1 }
        return settings
    }

    private func events(_ environment: APNsEnvironment, _ range: Range<Int>, topic: String = "com.example.a") -> [(key: String, value: [UInt8])] {
        range.map { n in
            (key: "\(environment.rawValue)-\(n)",
             value: SampleEvents.event(id: "\(environment.rawValue)-\(n)", deviceToken: SampleEvents.token(n), topic: topic, environment: environment))
        }
    }

    @Test func eachEnvironmentIsServedByItsOwnKey() async throws {
        try await withScopedAPNs { apns in
            try await withSandbox(logger: logger) { sandbox in
                let unserved = events(.development, 20..<23, topic: "com.example.b")
                try await sandbox.produce(events(.production, 0..<10) + events(.development, 10..<20) + unserved)
                let reader = try OutputReader(sandbox: sandbox, logger: logger)
                let topics = sandbox.options.topics
                let configuration = try RelayAppConfiguration(reader: try await RelayAppConfiguration.reader(
                    file: nil, environment: [:], overrides: settings(sandbox, apns)))
                #expect(configuration.notices.count == 1, "com.example.b has no development credential: \(configuration.notices)")
                let records = try await withRelay(configuration, logger: logger) { _ in
                    try await reader.collect(timeout: .seconds(60)) { records in
                        records.filter { $0.topic == topics.results }.count >= 23
                            && records.filter { $0.topic == topics.deadLetters }.count >= unserved.count
                    }
                }
                await reader.close()
                let results = Dictionary(records.filter { $0.topic == topics.results }.map { ($0.keyString, $0.json ?? [:]) }) { a, _ in a }
                for key in results.keys.sorted() where !key.hasPrefix("development-2") {
                    #expect(results[key]?["outcome"] as? String == "delivered", "\(key): \(results[key] ?? [:])")
                }
                // Each mock refuses the other environment's key, so a push it accepted came with the right one.
                #expect(apns.production.statistics.accepted == 10)
                #expect(apns.development.statistics.accepted == 10)
                #expect(apns.production.statistics.responses.keys.sorted() == ["200"], "\(apns.production.statistics.responses)")

                // A (topic, environment) no credential covers: invalid and dead-lettered, never sent.
                for event in unserved {
                    let result = try #require(results[event.key])
                    #expect(result["outcome"] as? String == "invalid")
                    #expect(result["reason"] as? String == "NoCredentialForEnvironment")
                    #expect(result["message"] as? String == "no configured APNs credential covers topic com.example.b in the development "
                        + "environment (credential 'prod' covers it in the other one only: see its environments key)")
                }
                let letters = records.filter { $0.topic == topics.deadLetters }.map(\.keyString)
                #expect(Set(letters) == Set(unserved.map(\.key)))
                #expect(apns.development.statistics.requests == 10, "nothing of com.example.b reached APNs")
            }
        }
    }

    /// Each credential given the other environment's key: APNs refuses every push with
    /// BadEnvironmentKeyInToken. The relay answers each event with that reason, publishes no removed-token
    /// record (the devices are fine), says which credential it is (gauge, one log line a minute), and stays
    /// ready: the relay works, a credential is misconfigured.
    @Test func swappedKeysAreACredentialProblemNotTheDevices() async throws {
        try await withScopedAPNs { apns in
            try await withSandbox(logger: logger) { sandbox in
                let port = String(try freeLocalPort())
                var environment = Dictionary(uniqueKeysWithValues: settings(sandbox, apns, swapped: true).map {
                    ("APNS_RELAY_" + RelayAppConfiguration.environmentName(forKey: $0.key), $0.value)
                })
                environment["APNS_RELAY_ADMIN_HOST"] = "127.0.0.1"
                environment["APNS_RELAY_ADMIN_PORT"] = port
                let relay = try RelayProcess(environment: environment)
                let reader = try OutputReader(sandbox: sandbox, logger: logger)
                let topics = sandbox.options.topics
                try await sandbox.produce(events(.production, 0..<10) + events(.development, 10..<20))
                let records = try await reader.collect(timeout: .seconds(60)) { records in
                    records.filter { $0.topic == topics.results }.count >= 20
                }
                let metrics = try await http("http://127.0.0.1:\(port)/metrics").body
                let ready = try await http("http://127.0.0.1:\(port)/readyz")
                #expect(await relay.terminate(timeout: .seconds(30)) == 0)
                await reader.close()

                let results = records.filter { $0.topic == topics.results }.compactMap(\.json)
                #expect(results.count == 20)
                for result in results {
                    #expect(result["outcome"] as? String == "rejected", "\(result)")
                    #expect(result["status"] as? Int == 403)
                    #expect(result["reason"] as? String == "BadEnvironmentKeyInToken", "\(result)")
                }
                #expect(!records.contains { $0.topic == topics.removedTokens }, "a refused key says nothing about the devices")
                for (credential, environment) in [("prod", "production"), ("dev", "development")] {
                    let line = metrics.split(separator: "\n").first {
                        $0.hasPrefix("apns_client_credential_refused{") && $0.contains("credential=\"\(credential)\"")
                            && $0.contains("environment=\"\(environment)\"")
                    }
                    #expect(line.flatMap { Double($0.split(separator: " ").last ?? "") } == 1, "\(credential) in \(environment): \(line ?? "no gauge")")
                    let logged = relay.log.components(separatedBy: "APNs refuses credential '\(credential)' in the \(environment) environment: 403 BadEnvironmentKeyInToken").count - 1
                    #expect(logged == 1, "logged once a minute, not per push: \(logged)")
                }
                #expect(ready.status == 200, "the relay is up and ready; the credential is misconfigured: \(ready.body)")
            }
        }
    }

    /// `apns-relay check` shows the scoping in matching order, checks each credential in its own
    /// environments only, warns of an environment a bundle id has no credential in, and names the
    /// environment restriction when APNs answers BadEnvironmentKeyInToken.
    @Test func checkShowsTheScopingAndNamesAKeyForTheOtherEnvironment() async throws {
        try await withScopedAPNs { apns in
            try await withSandbox(logger: logger) { sandbox in
                func check(swapped: Bool) async throws -> (status: Int32, output: String) {
                    let environment = Dictionary(uniqueKeysWithValues: settings(sandbox, apns, swapped: swapped).map {
                        ("APNS_RELAY_" + RelayAppConfiguration.environmentName(forKey: $0.key), $0.value)
                    })
                    let result = try await runProcess(
                        try RelayProcess.binary().path, ["check", "--skip-kafka"], environment: environment, timeout: .seconds(90))
                    return (result.status, result.stdout + result.stderr)
                }
                let good = try await check(swapped: false)
                #expect(good.status == 0, "\(good.output)")
                for line in [
                    "  prod: com.example.a, com.example.b in production\n", "  dev: com.example.a in development\n",
                    "! configuration: credential 'prod' pushes com.example.b in production only (apns.credential.prod.environments)",
                    "✓ APNs production 127.0.0.1:\(apns.productionPort), credential prod, topic com.example.a: accepted",
                    "- APNs development 127.0.0.1:\(apns.developmentPort), credential prod, topic com.example.a: not checked, the credential is for production only (apns.credential.prod.environments)",
                    "✓ APNs development 127.0.0.1:\(apns.developmentPort), credential dev, topic com.example.a: accepted",
                    "OK: ", "1 warning(s)",
                ] {
                    #expect(good.output.contains(line), "missing '\(line)' in \(good.output)")
                }
                let swapped = try await check(swapped: true)
                #expect(swapped.status == 1, "\(swapped.output)")
                #expect(swapped.output.contains(
                    "✗ APNs production 127.0.0.1:\(apns.productionPort), credential prod, topic com.example.a: the credential was refused: 403 "
                        + "BadEnvironmentKeyInToken — its signing key is restricted to the other environment in Apple's developer account: set "
                        + "apns.credential.prod.environments to the environment the key is for, and give production a credential of its own"),
                    "\(swapped.output)")
                #expect(swapped.output.contains("2 problem(s)"), "\(swapped.output)")
            }
        }
    }
}
