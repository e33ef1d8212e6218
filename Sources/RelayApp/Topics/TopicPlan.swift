import Relay

/// The topics a relay needs and how to create them (README "Topics and ACLs"): who writes and reads each, its
/// key, partitions, `cleanup.policy` and retention; and the ACLs its principal needs in each mode. One copy, read
/// by `apns-relay topics`, so the commands it prints cannot drift from what the relay expects.
package struct TopicPlan: Sendable {
    package struct Topic: Sendable, Equatable {
        package var name: String
        /// Which configuration key names it (`kafka.topics.results`).
        package var key: String
        package var partitions: Int
        /// Topic configurations to create it with (`cleanup.policy`, `retention.ms`, `min.insync.replicas`, …).
        package var configs: [(String, String)]
        package var purpose: String
        /// The shortest `retention.ms` that still serves the topic's readers, where README's table gives a range
        /// (`retention.ms` in `configs` is what to create it with); `nil`: the plan states no minimum.
        package var minimumRetentionMs: Int? = nil

        package static func == (a: Topic, b: Topic) -> Bool {
            a.name == b.name && a.key == b.key && a.partitions == b.partitions && a.purpose == b.purpose
                && a.minimumRetentionMs == b.minimumRetentionMs
                && a.configs.map { "\($0.0)=\($0.1)" } == b.configs.map { "\($0.0)=\($0.1)" }
        }
    }

    package var topics: [Topic]
    package var replicationFactor: Int

    private static let day = 86_400_000

    /// - Parameters:
    ///   - partitions: the input topics' partition count (the replicas' upper bound), which the results topic
    ///     shares so that a result lands on the partition its event's key did (with `kafka.partitioner`).
    ///   - maxDeadLetterBytes: `relay.maxDeadLetterBytes`, which the dead-letter topic must accept.
    package init(topics: RelayConfiguration.Topics, partitions: Int, replicationFactor: Int = 3, maxDeadLetterBytes: Int) {
        let durable = [("min.insync.replicas", String(min(2, replicationFactor)))]
        var planned: [Topic] = []
        for name in topics.input {
            planned.append(Topic(name: name, key: "kafka.topics.input", partitions: partitions,
                                 configs: durable + [("cleanup.policy", "delete"), ("retention.ms", String(Self.day))],
                                 purpose: "notification events (bulk lane): your services write, the relay reads"))
        }
        for name in topics.urgent {
            planned.append(Topic(name: name, key: "kafka.topics.urgent", partitions: partitions,
                                 configs: durable + [("cleanup.policy", "delete"), ("retention.ms", String(Self.day))],
                                 purpose: "notification events (urgent lane): your services write, the relay reads"))
        }
        planned.append(Topic(name: topics.results, key: "kafka.topics.results", partitions: partitions,
                             configs: durable + [("cleanup.policy", "delete"), ("retention.ms", String(7 * Self.day))],
                             purpose: "one result per event, keyed by the event's key: the relay writes, your services read"))
        planned.append(Topic(name: topics.removedTokens, key: "kafka.topics.removedTokens", partitions: 3,
                             configs: durable + [("cleanup.policy", "compact")],
                             purpose: "removed device tokens, keyed by token (the latest per token counts): your token cleanup reads"))
        planned.append(Topic(name: topics.removedChannels, key: "kafka.topics.removedChannels", partitions: 3,
                             configs: durable + [("cleanup.policy", "compact")],
                             purpose: "removed broadcast channels, keyed by channel id: your channel cleanup reads"))
        planned.append(Topic(name: topics.deadLetters, key: "kafka.topics.deadLetters", partitions: 3,
                             configs: durable + [("cleanup.policy", "delete"), ("retention.ms", String(30 * Self.day)),
                                                 ("max.message.bytes", String(maxDeadLetterBytes + 64 * 1024))],
                             purpose: "events that could not be read or sent, as they came: operators and apns-relay replay read",
                             minimumRetentionMs: 14 * Self.day))
        self.topics = planned
        self.replicationFactor = replicationFactor
    }

    /// One `kafka-topics.sh --create` command per topic.
    package func kafkaTopicsCommands(bootstrapServer: String) -> [String] {
        topics.map { topic in
            (["kafka-topics.sh --bootstrap-server \(bootstrapServer) --create --if-not-exists --topic \(topic.name)",
              "--partitions \(topic.partitions) --replication-factor \(replicationFactor)"]
                + topic.configs.map { "--config \($0.0)=\($0.1)" }).joined(separator: " ")
        }
    }

    /// Strimzi `KafkaTopic` resources, one YAML document per topic.
    package func strimziTopics(cluster: String, namespace: String?) -> String {
        topics.map { topic in
            var lines = [
                "apiVersion: kafka.strimzi.io/v1beta2", "kind: KafkaTopic", "metadata:", "  name: \(topic.name)",
            ]
            if let namespace { lines.append("  namespace: \(namespace)") }
            lines += [
                "  labels:", "    strimzi.io/cluster: \(cluster)",
                "  annotations:", "    apns-relay/purpose: \"\(topic.purpose)\"",
                "spec:", "  partitions: \(topic.partitions)", "  replicas: \(replicationFactor)", "  config:",
            ]
            lines += topic.configs.map { "    \($0.0): \"\($0.1)\"" }
            return "---\n" + lines.joined(separator: "\n")
        }.joined(separator: "\n") + "\n"
    }

    /// `kafka-acls.sh --add` commands for `principal`: what the relay reads and writes, and with exactly-once its
    /// transactional ids (`<groupId>-`, prefixed: one id per replica).
    package func kafkaACLCommands(bootstrapServer: String, principal: String, groupID: String, exactlyOnce: Bool) -> [String] {
        let base = "kafka-acls.sh --bootstrap-server \(bootstrapServer) --add --allow-principal \(principal)"
        let inputs = topics.filter { $0.key == "kafka.topics.input" || $0.key == "kafka.topics.urgent" }
        let outputs = topics.filter { !inputs.contains($0) }
        var commands = inputs.map { "\(base) --operation Read --operation Describe --topic \($0.name)" }
        commands.append("\(base) --operation Read --operation Describe --group \(groupID)")
        commands += outputs.map { "\(base) --operation Write --operation Describe --topic \($0.name)" }
        // Brokers before Kafka 3.0 (KIP-679) ask the idempotent producer for this as well.
        commands.append("\(base) --operation IdempotentWrite --cluster")
        if exactlyOnce {
            commands.append("\(base) --operation Write --operation Describe --transactional-id \(groupID)- --resource-pattern-type prefixed")
        }
        return commands
    }
}
