import Foundation
import TestSupport
import Testing
import Yams

/// `apns-relay topics --print`, run as a user runs it: the topics the configuration names, with what README's
/// "Topics and ACLs" table asks of each (the expected values are that table's, written out here).
@Suite struct TopicsCommandTests {
    private let settings = [
        "--set", "kafka.bootstrapServers=kafka-0:9092", "--set", "apns.token.keyId=ABC123DEFG", "--set", "apns.token.teamId=DEF123GHIJ",
        "--set", "apns.token.privateKeyFile=/k.p8", "--set", "kafka.topics.urgent=apns-urgent", "--set", "kafka.groupId=push",
    ]

    private func topics(_ arguments: [String]) async throws -> String {
        let result = try await runProcess(try RelayProcess.binary().path, ["topics", "--print"] + settings + arguments)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout
    }

    @Test func strimziTopicsFollowTheTable() async throws {
        let text = try await topics(["--format", "strimzi", "--partitions", "24", "--strimzi-cluster", "events"])
        let documents = try Yams.load_all(yaml: text).compactMap { $0 as? [String: Any] }
        var byName: [String: (partitions: Int, replicas: Int, config: [String: String])] = [:]
        for document in documents {
            #expect(document["kind"] as? String == "KafkaTopic")
            let metadata = try #require(document["metadata"] as? [String: Any])
            #expect((metadata["labels"] as? [String: String])?["strimzi.io/cluster"] == "events")
            let spec = try #require(document["spec"] as? [String: Any])
            byName[try #require(metadata["name"] as? String)] = (
                spec["partitions"] as? Int ?? 0, spec["replicas"] as? Int ?? 0, spec["config"] as? [String: String] ?? [:])
        }
        #expect(Set(byName.keys) == ["apns-notifications", "apns-urgent", "apns-results", "apns-removed-tokens", "apns-removed-channels", "apns-dead-letters"])
        #expect(byName.values.allSatisfy { $0.replicas == 3 && $0.config["min.insync.replicas"] == "2" })
        for name in ["apns-notifications", "apns-urgent", "apns-results"] {
            #expect(byName[name]?.partitions == 24, "\(name): the input's partitions, and the results' match them")
            #expect(byName[name]?.config["cleanup.policy"] == "delete", "\(name)")
        }
        #expect(byName["apns-removed-tokens"]?.config["cleanup.policy"] == "compact")
        #expect(byName["apns-removed-channels"]?.config["cleanup.policy"] == "compact")
        #expect(byName["apns-dead-letters"]?.config["cleanup.policy"] == "delete")
        // relay.maxDeadLetterBytes (921600 by default) and its headers must fit.
        #expect(Int(byName["apns-dead-letters"]?.config["max.message.bytes"] ?? "") ?? 0 > 921_600)
    }

    @Test func kafkaTopicsCommandsNameTheBrokerAndEveryTopic() async throws {
        let lines = try await topics([]).split(separator: "\n").filter { $0.hasPrefix("kafka-topics.sh") }
        #expect(lines.count == 6)
        #expect(lines.allSatisfy { $0.contains("--bootstrap-server kafka-0:9092 --create --if-not-exists") && $0.contains("--replication-factor 3") })
        #expect(lines.contains { $0.contains("--topic apns-removed-tokens --partitions 3") && $0.contains("--config cleanup.policy=compact") })
    }

    @Test func aclsAddTheTransactionalIdsOnlyWithExactlyOnce() async throws {
        let atLeastOnce = try await topics(["--format", "acls"])
        #expect(atLeastOnce.contains("--operation Read --operation Describe --group push"))
        #expect(atLeastOnce.contains("--operation Write --operation Describe --topic apns-results"))
        #expect(!atLeastOnce.contains("--transactional-id"))
        let exactlyOnce = try await topics(["--format", "acls", "--set", "kafka.exactlyOnce=true"])
        #expect(exactlyOnce.contains("--operation Write --operation Describe --transactional-id push- --resource-pattern-type prefixed"))
    }
}
