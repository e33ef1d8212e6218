import Foundation
import Kafka
import Logging
import RelayApp
import RelaySandbox
import TestSupport
import Testing

/// `kafka.sasl.*` and `kafka.tls.*` against a listener that enforces them (`KafkaGateway`, in front of the
/// sandbox's mock cluster): the relay binary, run as a user runs it, delivers with the right secret; with a
/// wrong one its start fails with a line that names the mechanism, and `check` fails too; no log line or
/// error holds either secret. Each refusal is also counted by the gateway: a test that expects one cannot
/// pass on a connection that never tried.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct KafkaAuthenticationTests {
    let logger = Logger.quiet("kafka-auth")
    /// With a comma and an equals sign: a password reaches librdkafka whole.
    static let secret = "Right-p4ss,w=1"
    static let wrong = "Wr0ng-p4ss"

    /// A file in a directory of its own holding `text`.
    private static func file(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("kafka-secret-\(UUID().uuidString)").path
        try (text + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private static func environment(_ sandbox: RelaySandbox, _ gateway: KafkaGateway, _ settings: [String: String]) -> [String: String] {
        var environment = sandbox.relayEnvironment()
        environment["APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS"] = gateway.bootstrap
        for (key, value) in settings { environment["APNS_RELAY_" + RelayAppConfiguration.environmentName(forKey: key)] = value }
        return environment
    }

    /// The relay through the gateway delivers `count` events, and stops cleanly.
    private func delivers(_ sandbox: RelaySandbox, _ gateway: KafkaGateway, _ settings: [String: String], count: Int = 3, tag: String) async throws -> String {
        let reader = try OutputReader(sandbox: sandbox, logger: logger)
        let relay = try RelayProcess(environment: Self.environment(sandbox, gateway, settings))
        do {
            try await sandbox.produce((0..<count).map { (key: "\(tag)-\($0)", value: SampleEvents.event(id: "\(tag)-\($0)", deviceToken: SampleEvents.token(1 + $0))) })
            let results = try await reader.results(count: count, timeout: .seconds(90))
            #expect(Set(results.map(\.keyString)) == Set((0..<count).map { "\(tag)-\($0)" }))
            #expect(results.allSatisfy { $0.json?["outcome"] as? String == "delivered" })
            #expect(await relay.terminate(timeout: .seconds(30)) == 0, "\(relay.log)")
        } catch {
            relay.kill()
            await reader.close()
            throw TestFailure("\(error); the relay's log: \(relay.log)")
        }
        await reader.close()
        return relay.log
    }

    /// The relay's start fails within the time-out; its log says so.
    private func startIsRefused(_ sandbox: RelaySandbox, _ gateway: KafkaGateway, _ settings: [String: String]) async throws -> String {
        let relay = try RelayProcess(environment: Self.environment(sandbox, gateway, settings))
        let status = await relay.exit(within: .seconds(90))
        #expect(status == 1, "the relay stops with status 1 (got \(status.map(String.init) ?? "no exit")): \(relay.log)")
        return relay.log
    }

    private func check(_ sandbox: RelaySandbox, _ gateway: KafkaGateway, _ settings: [String: String]) async throws -> ProcessOutput {
        try await runProcess(try RelayProcess.binary().path, ["check", "--skip-apns", "--timeout-ms", "8000"],
                             environment: Self.environment(sandbox, gateway, settings), timeout: .seconds(90))
    }

    private func expectNoSecret(_ texts: String...) {
        for text in texts {
            #expect(!text.contains(Self.secret) && !text.contains(Self.wrong), "a secret in: \(text)")
        }
    }

    @Test(arguments: ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    func aPasswordMechanismAuthenticatesAndAWrongPasswordStopsTheStart(mechanism: String) async throws {
        try await withSandbox(logger: logger) { sandbox in
            let gatewayPassword = try Self.file(Self.secret)
            let gateway = try await KafkaGateway(upstream: sandbox.bootstrapServers, ["--mechanism", mechanism, "--user", "relay", "--password-file", gatewayPassword])
            defer { gateway.stop() }
            let right = ["kafka.sasl.mechanism": mechanism, "kafka.sasl.username": "relay", "kafka.sasl.passwordFile": try Self.file(Self.secret)]
            let good = try await delivers(sandbox, gateway, right, tag: "good")
            #expect(gateway.authenticated > 0 && gateway.refused == 0, "\(gateway.log)")

            var wrong = right
            wrong["kafka.sasl.passwordFile"] = try Self.file(Self.wrong)
            let refused = try await startIsRefused(sandbox, gateway, wrong)
            #expect(refused.contains("Kafka refused the relay's credentials (SASL \(mechanism) as user 'relay')"), "\(refused)")
            #expect(refused.contains("Check kafka.sasl.mechanism, kafka.sasl.username, kafka.sasl.passwordFile"), "\(refused)")
            #expect(gateway.refused > 0, "the gateway refused a session: \(gateway.log)")
            let checked = try await check(sandbox, gateway, wrong)
            #expect(checked.status == 1, "\(checked.stdout)")
            #expect(checked.stdout.contains("✗ Kafka: ") && checked.stdout.contains("SASL \(mechanism) as user 'relay'"), "\(checked.stdout)")
            let passed = try await check(sandbox, gateway, right)
            #expect(passed.status == 0, "the control: the right password passes check: \(passed.stdout)")
            expectNoSecret(good, refused, checked.stdout + checked.stderr, passed.stdout + passed.stderr, gateway.log)
        }
    }

    @Test func scramOverTLSVerifiesTheBrokerAgainstTheCAFile() async throws {
        let certificates = try await TestCertificates.make()
        try await withSandbox(logger: logger) { sandbox in
            let gateway = try await KafkaGateway(upstream: sandbox.bootstrapServers, [
                "--mechanism", "SCRAM-SHA-512", "--user", "relay", "--password-file", try Self.file(Self.secret),
                "--tls-cert", certificates.serverCertificate, "--tls-key", certificates.serverKey,
            ])
            defer { gateway.stop() }
            let right = ["kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.username": "relay", "kafka.sasl.passwordFile": try Self.file(Self.secret),
                         "kafka.tls.caFile": certificates.ca]
            let good = try await delivers(sandbox, gateway, right, tag: "tls")
            #expect(gateway.authenticated > 0, "\(gateway.log)")

            // A CA that did not sign the broker's certificate: the relay refuses the broker.
            var untrusted = right
            untrusted["kafka.tls.caFile"] = certificates.otherCA
            let refused = try await startIsRefused(sandbox, gateway, untrusted)
            #expect(refused.contains("Kafka refused the relay's credentials (SASL SCRAM-SHA-512 as user 'relay' over TLS)"), "\(refused)")
            #expect(refused.lowercased().contains("certificate verify failed"), "\(refused)")
            expectNoSecret(good, refused, gateway.log)
        }
    }

    @Test func mutualTLSPresentsTheClientCertificate() async throws {
        let certificates = try await TestCertificates.make()
        try await withSandbox(logger: logger) { sandbox in
            let gateway = try await KafkaGateway(upstream: sandbox.bootstrapServers, [
                "--tls-cert", certificates.serverCertificate, "--tls-key", certificates.serverKey, "--client-ca", certificates.ca,
            ])
            defer { gateway.stop() }
            let right = ["kafka.tls.caFile": certificates.ca, "kafka.tls.certFile": certificates.clientCertificate, "kafka.tls.keyFile": certificates.clientKey]
            _ = try await delivers(sandbox, gateway, right, tag: "mtls")
            #expect(gateway.authenticated > 0 && gateway.refused == 0, "\(gateway.log)")

            // Without a client certificate the gateway refuses the handshake.
            let refused = try await startIsRefused(sandbox, gateway, ["kafka.tls.caFile": certificates.ca])
            #expect(refused.contains("Kafka refused the relay's credentials (TLS)"), "\(refused)")
            #expect(gateway.refused > 0, "\(gateway.log)")
        }
    }

    @Test func oauthBearerFetchesATokenWithClientCredentials() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let gateway = try await KafkaGateway(upstream: sandbox.bootstrapServers, [
                "--mechanism", "OAUTHBEARER", "--oidc-client-id", "apns-relay", "--oidc-client-secret-file", try Self.file(Self.secret),
            ])
            defer { gateway.stop() }
            let endpoint = try #require(gateway.tokenEndpoint)
            let right = ["kafka.sasl.mechanism": "OAUTHBEARER", "kafka.sasl.oauthbearer.tokenEndpointUrl": endpoint,
                         "kafka.sasl.oauthbearer.clientId": "apns-relay", "kafka.sasl.oauthbearer.clientSecretFile": try Self.file(Self.secret),
                         "kafka.sasl.oauthbearer.scope": "kafka"]
            guard KafkaLibrary.hasOIDC else {
                // This librdkafka cannot fetch tokens (no libcurl): the start says so, naming the build.
                let refused = try await startIsRefused(sandbox, gateway, right)
                #expect(refused.contains("needs a librdkafka built with OIDC support (libcurl); this one (\(KafkaLibrary.version)) lacks it"), "\(refused)")
                return
            }
            let good = try await delivers(sandbox, gateway, right, tag: "oidc")
            #expect(gateway.authenticated > 0 && gateway.refused == 0, "\(gateway.log)")

            var wrong = right
            wrong["kafka.sasl.oauthbearer.clientSecretFile"] = try Self.file(Self.wrong)
            let refused = try await startIsRefused(sandbox, gateway, wrong)
            #expect(refused.contains("Kafka refused the relay's credentials (SASL OAUTHBEARER (OIDC client 'apns-relay' at \(endpoint)))"), "\(refused)")
            expectNoSecret(good, refused, gateway.log)
        }
    }

    /// What a rotation test works with: a SCRAM gateway and a relay, each reading its password from a file of
    /// its own, the relay re-reading it every 200 ms, and one event already delivered through the gateway.
    private struct Rotation {
        let sandbox: RelaySandbox
        let gateway: KafkaGateway
        let relay: RelayProcess
        let reader: OutputReader
        let gatewayPassword: String
        let relayPassword: String
        let rotated = "R0tated-" + KafkaAuthenticationTests.wrong

        func rotate(_ file: String) throws { try (rotated + "\n").write(toFile: file, atomically: true, encoding: .utf8) }

        /// Produces an event after the rotation and expects it delivered, the relay to stop cleanly, and no
        /// password in its log.
        func deliversAfterwards() async throws {
            try await sandbox.produce([(key: "after", value: SampleEvents.event(id: "after", deviceToken: SampleEvents.token(2)))])
            let after = try await KafkaAuthenticationTests.results(reader, count: 1, relay, gateway)
            #expect(after.map(\.keyString) == ["after"] && after.first?.json?["outcome"] as? String == "delivered")
        }

        func finish() async {
            #expect(await relay.terminate(timeout: .seconds(30)) == 0)
            await reader.close()
            #expect(!relay.log.contains(rotated) && !relay.log.contains(KafkaAuthenticationTests.secret))
        }
    }

    private func withRotation(_ body: (Rotation) async throws -> Void) async throws {
        try await withSandbox(logger: logger) { sandbox in
            let gatewayPassword = try Self.file(Self.secret)
            let gateway = try await KafkaGateway(upstream: sandbox.bootstrapServers, ["--mechanism", "SCRAM-SHA-256", "--user", "relay", "--password-file", gatewayPassword])
            defer { gateway.stop() }
            let relayPassword = try Self.file(Self.secret)
            let settings = ["kafka.sasl.mechanism": "SCRAM-SHA-256", "kafka.sasl.username": "relay", "kafka.sasl.passwordFile": relayPassword,
                            "kafka.sasl.reloadIntervalMs": "200"]
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let relay = try RelayProcess(environment: Self.environment(sandbox, gateway, settings))
            defer { relay.kill() }
            try await sandbox.produce([(key: "before", value: SampleEvents.event(id: "before", deviceToken: SampleEvents.token(1)))])
            _ = try await Self.results(reader, count: 1, relay, gateway)
            try await body(Rotation(sandbox: sandbox, gateway: gateway, relay: relay, reader: reader,
                                    gatewayPassword: gatewayPassword, relayPassword: relayPassword))
        }
    }

    /// A password rotated in its file is presented on the next connections: the gateway drops every connection
    /// after both sides changed it, and events produced then are delivered. Without the re-read the relay's
    /// reconnections would present the old password, be refused, and nothing more would be delivered.
    @Test func aRotatedPasswordFileIsUsedWithoutARestart() async throws {
        try await withRotation { rotation in
            let (gateway, relay) = (rotation.gateway, rotation.relay)
            for file in [rotation.gatewayPassword, rotation.relayPassword] { try rotation.rotate(file) }
            try await eventually("the relay logs the new password file", within: .seconds(30)) {
                relay.log.contains("Kafka SASL password changed in '\(rotation.relayPassword)'")
            }
            let before = gateway.authenticated
            gateway.dropConnections()
            try await rotation.deliversAfterwards()
            #expect(gateway.authenticated > before, "the relay authenticated again after the drop: \(gateway.log)")
            #expect(gateway.refused == 0, "never with the old password: \(gateway.log)")
            await rotation.finish()
        }
    }

    /// The broker may take a rotated password before the relay's Secret has it (Kubernetes updates each node's
    /// copy on its own schedule): reconnections are refused meanwhile. That refusal of a credential that had
    /// worked is retried, not a reason to stop, and once the relay's file has the new password it delivers.
    @Test func aRefusalAfterJoiningIsRetriedUntilTheRelaysPasswordCatchesUp() async throws {
        try await withRotation { rotation in
            let (gateway, relay) = (rotation.gateway, rotation.relay)
            try rotation.rotate(rotation.gatewayPassword)
            gateway.dropConnections()
            try await eventually("the gateway refuses the old password", within: .seconds(60)) { gateway.refused > 0 }
            try await eventually("the relay says it retries", within: .seconds(30)) {
                relay.log.contains("Kafka refused the relay's credentials after they had worked; retrying")
            }
            try rotation.rotate(rotation.relayPassword)
            try await rotation.deliversAfterwards()
            await rotation.finish()
        }
    }

    /// The next `count` results; on a time-out the relay's and the gateway's logs are part of the failure.
    fileprivate static func results(_ reader: OutputReader, count: Int, _ relay: RelayProcess, _ gateway: KafkaGateway) async throws -> [OutputReader.Record] {
        do {
            return try await reader.results(count: count, timeout: .seconds(90))
        } catch {
            throw TestFailure("\(error)\nrelay log:\n\(relay.log)\ngateway log:\n\(gateway.log)")
        }
    }
}
