import Foundation
import Kafka
import RelaySandbox
import TestSupport
import Testing

/// `apns-relay check`, run as a user runs it, against the sandbox's mock Kafka and mock APNs.
@Suite struct CheckCommandTests {
    private func check(_ arguments: [String], _ environment: [String: String]) async throws -> (status: Int32, output: String) {
        let result = try await runProcess(try RelayProcess.binary().path, ["check"] + arguments, environment: environment, timeout: .seconds(90))
        return (result.status, result.stdout + result.stderr)
    }

    @Test func aGoodSetupPassesEveryCheck() async throws {
        try await withSandbox { sandbox in
            let (status, output) = try await check(["--topic", "com.example.app"], sandbox.relayEnvironment())
            #expect(status == 0, "\(output)")
            #expect(output.contains("kafka.bootstrapServers"), "the effective configuration is listed: \(output)")
            #expect(output.contains("(env APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS)"), "with its source: \(output)")
            #expect(output.contains("relay.maxInFlightEvents") && output.contains("(default)"), "\(output)")
            #expect(output.contains("✓ Kafka topic \(sandbox.options.topics.results)"), "\(output)")
            #expect(output.contains("✓ Kafka consumer group"), "\(output)")
            #expect(output.contains("✓ APNs production") && output.contains("✓ APNs development"), "\(output)")
            #expect(!output.contains("✗"), "\(output)")
            #expect(output.contains("OK: "), "\(output)")
            #expect(!output.contains("BEGIN PRIVATE KEY"), "no key material: \(output)")
        }
    }

    @Test func eachProblemGetsOneLineAndAFailingStatus() async throws {
        try await withSandbox { sandbox in
            var environment = sandbox.relayEnvironment()
            environment["APNS_RELAY_KAFKA_TOPICS_RESULTS"] = "no-such-topic"
            environment["APNS_RELAY_APNS_TOKEN_KEY_ID"] = "WRONGKEY01"
            environment["APNS_RELAY_KAFKA_PROPERTIES"] = "sasl.password=hunter2,socket.keepalive.enable=true"
            let (status, output) = try await check(["--topic", "com.example.app", "--environment", "development"], environment)
            #expect(status == 1, "\(output)")
            #expect(output.contains("✗ Kafka topic no-such-topic (kafka.topics.results) is missing"), "\(output)")
            #expect(output.contains("✗ APNs development") && output.contains("403 InvalidProviderToken"), "\(output)")
            #expect(output.contains("sasl.password=<redacted>") && !output.contains("hunter2"), "secrets are redacted: \(output)")
            #expect(output.contains("2 problem(s)"), "\(output)")
        }
    }

    /// `kafka.exactlyOnce`: the transaction coordinator is asked to register a producer (InitProducerId), under
    /// an id beside the relay's (the relay's own would fence a relay running with it); a refusal is a problem.
    @Test func exactlyOnceAsksTheTransactionCoordinator() async throws {
        try await withSandbox { sandbox in
            let plain = try await check(["--skip-apns"], sandbox.relayEnvironment())
            #expect(plain.status == 0 && !plain.output.contains("Kafka transactions"), "\(plain.output)")

            var environment = sandbox.relayEnvironment()
            environment["APNS_RELAY_KAFKA_EXACTLY_ONCE"] = "true"
            environment["APNS_RELAY_KAFKA_TRANSACTIONAL_ID"] = "apns-relay-0"
            let good = try await check(["--skip-apns"], environment)
            #expect(good.status == 0, "\(good.output)")
            #expect(good.output.contains("✓ Kafka transactions (kafka.exactlyOnce)") && good.output.contains("apns-relay-0.check"), "\(good.output)")

            sandbox.cluster.pushRequestErrors(.initProducerID, [.transactionalIDAuthorizationFailed])
            let refused = try await check(["--skip-apns"], environment)
            #expect(refused.status == 1, "\(refused.output)")
            #expect(refused.output.contains("✗ Kafka transactions (kafka.exactlyOnce): the broker refused"), "\(refused.output)")
            #expect(refused.output.contains("1 problem(s)"), "\(refused.output)")
        }
    }

    /// Urgent topics are checked like the other inputs, and named by their key.
    @Test func urgentTopicsAreChecked() async throws {
        var options = RelaySandbox.Options()
        options.topics.urgent = ["apns-urgent"]
        try await withSandbox(options) { sandbox in
            let good = try await check(["--skip-apns"], sandbox.relayEnvironment())
            #expect(good.status == 0, "\(good.output)")
            #expect(good.output.contains("✓ Kafka topic apns-urgent (kafka.topics.urgent)"), "\(good.output)")
            #expect(good.output.contains("relay.lanes.urgentShare"), "the share is listed with the configuration: \(good.output)")

            var environment = sandbox.relayEnvironment()
            environment["APNS_RELAY_KAFKA_TOPICS_URGENT"] = "apns-urgent,no-such-urgent"
            let bad = try await check(["--skip-apns"], environment)
            #expect(bad.status == 1, "\(bad.output)")
            #expect(bad.output.contains("✗ Kafka topic no-such-urgent (kafka.topics.urgent) is missing"), "\(bad.output)")
        }
    }

    /// `--channels` lists the bundle's channels on each environment's management host; a host that does not
    /// answer, or a bundle without broadcast, is a problem.
    @Test func channelsChecksTheManagementHosts() async throws {
        try await withSandbox { sandbox in
            _ = try sandbox.apns.channels.create(bundleID: "com.example.app", storagePolicy: 1)
            let good = try await check(["--topic", "com.example.app", "--skip-kafka", "--channels"], sandbox.relayEnvironment())
            #expect(good.status == 0, "\(good.output)")
            #expect(good.output.contains("✓ APNs channel management production 127.0.0.1:\(sandbox.managementPort), credential default, bundle com.example.app: 1 channel(s)"), "\(good.output)")
            #expect(good.output.contains("✓ APNs channel management development"), "\(good.output)")

            let refusing = try RefusingPort()
            var environment = sandbox.relayEnvironment()
            environment["APNS_RELAY_APNS_DEVELOPMENT_MANAGEMENT_PORT"] = String(refusing.port)
            let bad = try await check(["--topic", "com.example.app", "--skip-kafka", "--channels", "--timeout-ms", "3000"], environment)
            #expect(bad.status == 1, "\(bad.output)")
            #expect(bad.output.contains("✓ APNs channel management production"), "\(bad.output)")
            #expect(bad.output.contains("✗ APNs channel management development 127.0.0.1:\(refusing.port)") && bad.output.contains("no answer"), "\(bad.output)")
            let without = try await check(["--topic", "com.example.app", "--skip-kafka"], environment)
            #expect(without.status == 0 && !without.output.contains("channel management"), "opt-in: \(without.output)")
        }
    }

    @Test func anUnreachableKafkaIsOneProblem() async throws {
        try await withSandbox { sandbox in
            var environment = sandbox.relayEnvironment()
            environment["APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS"] = "127.0.0.1:1"
            let (status, output) = try await check(["--skip-apns", "--timeout-ms", "3000"], environment)
            #expect(status == 1, "\(output)")
            #expect(output.contains("✗ Kafka: ") && output.contains("127.0.0.1:1"), "\(output)")
        }
    }

    @Test func aBrokenConfigurationListsEveryProblem() async throws {
        let (status, output) = try await check([], ["APNS_RELAY_RELAY_MAX_IN_FLIGHT_EVENTS": "lots"])
        #expect(status == 1, "\(output)")
        #expect(output.contains("✗ configuration: ") && output.contains("relay.maxInFlightEvents"), "\(output)")
        #expect(output.contains("kafka.bootstrapServers"), "the missing required key too: \(output)")
    }
}
