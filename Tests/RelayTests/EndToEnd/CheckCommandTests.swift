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

    /// `--topic` becomes the check push's apns-topic header: anything but a bundle id is refused before APNs is asked.
    @Test func aTopicThatIsNoBundleIDIsRefused() async throws {
        try await withSandbox { sandbox in
            for hostile in ["com.example.app\r\nx-injected: 1", "..", "com.example.app#x"] {
                let (status, output) = try await check(["--topic", hostile, "--skip-kafka"], sandbox.relayEnvironment())
                #expect(status == 64 && output.contains("--topic must be a bundle id"), "\(hostile): \(output)")
            }
            #expect(sandbox.apns.statistics.deviceTokens.isEmpty, "no check push was sent")
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

    /// librdkafka's mock cluster answers metadata but not DescribeConfigs (it has no handler for it, and its
    /// metadata names broker 0 as the controller these requests go to, which none of its brokers is): the
    /// results' partitions are still compared with the input's, and the configurations are said to be unread,
    /// without failing. Every mock topic has one replica (the fixture's), below README's 3: one warning each.
    @Test func resultsWithFewerPartitionsThanTheInputAreAWarning() async throws {
        try await withSandbox { sandbox in
            let topics = sandbox.options.topics
            let good = try await check(["--skip-apns"], sandbox.relayEnvironment())
            #expect(good.status == 0, "\(good.output)")
            #expect(!good.output.contains("partition(s), fewer than"), "results and input have 6 partitions each: \(good.output)")
            #expect(warnings(good.output).count == 5 && warnings(good.output).allSatisfy { $0.contains("replication factor 1, the plan says 3") }, "\(good.output)")
            #expect(good.output.contains("- Kafka topic configurations of \((topics.inputs + topics.outputs).joined(separator: ", ")): could not be read"), "\(good.output)")
            #expect(good.output.contains("controller"), "the reason: \(good.output)")
            #expect(good.output.contains("- Kafka write permission on \(topics.outputs.joined(separator: ", ")): not checked: \(writeNotCheckedReason(controller: true))"), "\(good.output)")

            try sandbox.cluster.createTopic("few-results", partitions: 2)
            var environment = sandbox.relayEnvironment()
            environment["APNS_RELAY_KAFKA_TOPICS_RESULTS"] = "few-results"
            let few = try await check(["--skip-apns"], environment)
            #expect(few.status == 0, "a warning, not a problem: \(few.output)")
            #expect(few.output.contains("! Kafka topic few-results (kafka.topics.results): 2 partition(s), fewer than the 6 of apns-notifications"), "\(few.output)")
            #expect(warnings(few.output).count == 6, "\(few.output)")
            #expect(few.output.contains("OK: ") && few.output.contains("6 warning(s)"), "\(few.output)")
        }
    }

    /// noida-db answers DescribeConfigs. Topics set up as README's table says give no cleanup.policy, partition
    /// or retention warning (one broker: replication 1 and min.insync.replicas 1 are the only ones, two per
    /// topic); a compacted results topic with fewer partitions than the input, and removed tokens deleted
    /// rather than compacted, are warnings — and still not problems.
    @Test func topicConfigurationsThatContradictTheTableAreWarnings() async throws {
        let broker = try await NoidaBroker.start()
        do {
            var options = RelaySandbox.Options()
            options.externalBootstrapServers = broker.bootstrapServers
            options.partitions = 4
            try await withSandbox(options) { sandbox in
                let day = 86_400_000
                let durable = ["min.insync.replicas": "1"]
                try await createTopics([
                    ("ok-events", 4, durable.merging(["cleanup.policy": "delete", "retention.ms": String(day)]) { $1 }),
                    ("ok-results", 4, durable.merging(["cleanup.policy": "delete", "retention.ms": String(7 * day)]) { $1 }),
                    ("ok-tokens", 3, durable.merging(["cleanup.policy": "compact"]) { $1 }),
                    ("ok-channels", 3, durable.merging(["cleanup.policy": "compact"]) { $1 }),
                    ("ok-dead", 3, durable.merging(["cleanup.policy": "delete", "retention.ms": String(30 * day)]) { $1 }),
                    ("compacted-results", 2, durable.merging(["cleanup.policy": "compact"]) { $1 }),
                    ("deleted-tokens", 3, durable.merging(["cleanup.policy": "delete", "retention.ms": String(7 * day)]) { $1 }),
                ], on: broker)
                var environment = sandbox.relayEnvironment()
                environment["APNS_RELAY_KAFKA_TOPICS_INPUT"] = "ok-events"
                environment["APNS_RELAY_KAFKA_TOPICS_RESULTS"] = "ok-results"
                environment["APNS_RELAY_KAFKA_TOPICS_REMOVED_TOKENS"] = "ok-tokens"
                environment["APNS_RELAY_KAFKA_TOPICS_REMOVED_CHANNELS"] = "ok-channels"
                environment["APNS_RELAY_KAFKA_TOPICS_DEAD_LETTERS"] = "ok-dead"
                let good = try await check(["--skip-apns"], environment)
                #expect(good.status == 0, "\(good.output)")
                #expect(!good.output.contains("- Kafka topic configurations"), "noida-db answers DescribeConfigs: \(good.output)")
                let durability = warnings(good.output).filter {
                    $0.contains(": replication factor 1, the plan says 3") || $0.contains(": min.insync.replicas 1, the plan says 2")
                }
                #expect(warnings(good.output).count == 10 && durability.count == 10, "only the one-broker durability ones: \(good.output)")
                #expect(good.output.contains("- Kafka write permission on ok-results, ok-tokens, ok-channels, ok-dead: not checked: \(writeNotCheckedReason(controller: false))"), "\(good.output)")

                environment["APNS_RELAY_KAFKA_TOPICS_RESULTS"] = "compacted-results"
                environment["APNS_RELAY_KAFKA_TOPICS_REMOVED_TOKENS"] = "deleted-tokens"
                let bad = try await check(["--skip-apns"], environment)
                #expect(bad.status == 0, "warnings, not problems: \(bad.output)")
                #expect(bad.output.contains("! Kafka topic compacted-results (kafka.topics.results): cleanup.policy is compact, the plan says delete"), "\(bad.output)")
                #expect(bad.output.contains("! Kafka topic compacted-results (kafka.topics.results): 2 partition(s), fewer than the 4 of ok-events"), "\(bad.output)")
                #expect(bad.output.contains("! Kafka topic deleted-tokens (kafka.topics.removedTokens): cleanup.policy is delete, the plan recommends compact"), "\(bad.output)")
                #expect(warnings(bad.output).count == 13 && bad.output.contains("OK: ") && bad.output.contains("13 warning(s)"), "\(bad.output)")
            }
        } catch {
            let log = broker.log
            await broker.stop()
            throw TestFailure("\(error); noida-db's output:\n\(log.suffix(2000))")
        }
        await broker.stop()
    }

    /// The `!` lines of a check's output.
    private func warnings(_ output: String) -> [String] {
        output.split(separator: "\n").filter { $0.hasPrefix("! ") }.map(String.init)
    }

    /// Why `check` cannot say whether the relay may write: librdkafka before 2.3 has no DescribeTopics (its
    /// CHANGELOG), the mock's controller is unreachable, and noida-db's answer carries no authorized operations.
    private func writeNotCheckedReason(controller: Bool) -> String {
        guard KafkaLibrary.isAtLeast(2, 3) else { return "librdkafka \(KafkaLibrary.version) cannot ask the broker" }
        return controller ? "the cluster's metadata names broker 0 as its controller" : "the broker did not say"
    }

    /// Creates topics with their configurations through confluent-kafka's AdminClient in `.venv` (the sandbox
    /// creates topics without any): a client other than the one under test.
    private func createTopics(_ topics: [(name: String, partitions: Int, configs: [String: String])], on broker: NoidaBroker) async throws {
        let python = Checkout.root.appendingPathComponent(".venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw TestFailure("no .venv (make test creates it before the Swift tests: make venv)")
        }
        let specification = topics.map { ["name": $0.name, "partitions": $0.partitions, "configs": $0.configs] as [String: Any] }
        let json = String(decoding: try JSONSerialization.data(withJSONObject: specification), as: UTF8.self)
        let script = """
            import json, sys
            from confluent_kafka.admin import AdminClient, NewTopic
            admin = AdminClient({"bootstrap.servers": sys.argv[1]})
            wanted = [NewTopic(t["name"], t["partitions"], 1, config=t["configs"]) for t in json.loads(sys.argv[2])]
            failed = 0
            for name, future in admin.create_topics(wanted, operation_timeout=10, request_timeout=10).items():
                try:
                    future.result()
                except Exception as error:
                    failed += 1
                    print(f"{name}: {error}")
            sys.exit(1 if failed else 0)
            """
        let result = try await runProcess(python, ["-c", script, broker.bootstrapServers, json], timeout: .seconds(30))
        guard result.status == 0 else { throw TestFailure("creating topics on noida-db: \(result.stdout)\(result.stderr)") }
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
