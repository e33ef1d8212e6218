import Kafka
import Logging
import Relay
import RelayApp

extension CheckCommand {
    /// The topics' settings against ``TopicPlan`` (README "Topics and ACLs"), and whether the relay may write to
    /// each output topic, asked without writing (a record in an output topic would reach its readers).
    ///
    /// Prints a warning (`!`) where the cluster contradicts the plan, a `-` line for what could not be read and
    /// why, `✓` where the settings are as planned or the broker allows WRITE, and a problem (`✗`) where it allows
    /// the principal of `properties` other operations but not WRITE. Topics the cluster lacks are left to the
    /// existence check. Returns the number of warnings printed.
    func checkTopicSettings(
        _ configuration: RelayAppConfiguration, cluster: KafkaClusterInspection, properties: [String: String],
        timeout: Duration, logger: Logger, pass: (String) -> Void, fail: (String) -> Void
    ) async -> Int {
        let topics = configuration.relay.topics
        var present: [String] = []
        for topic in topics.inputs + topics.outputs where cluster.partitions[topic] != nil && !present.contains(topic) {
            present.append(topic)
        }
        guard !present.isEmpty else { return 0 }
        let described: KafkaTopicConfigurations
        do {
            described = try await KafkaTopicConfigurations.describe(
                present, bootstrapServers: configuration.kafka.bootstrapServers, properties: properties,
                timeout: timeout, logger: logger)
        } catch {
            print("- Kafka topic settings and write permissions: not checked: \(error)")
            return 0
        }

        // The plan's results topic shares the input's partition count: the largest input the cluster has.
        let largestInput = topics.inputs.compactMap { cluster.partitions[$0] }.max() ?? 1
        let plan = TopicPlan(
            topics: topics, partitions: largestInput, maxDeadLetterBytes: configuration.relay.maxDeadLetterBytes)
        var observed: [String: TopicPlan.ClusterTopic] = [:]
        for topic in present {
            observed[topic] = TopicPlan.ClusterTopic(
                partitions: cluster.partitions[topic] ?? 0, replicationFactor: described.replicationFactors[topic],
                configs: described.configurations[topic])
        }
        let contradictions = plan.contradictions(with: observed)
        for line in contradictions { print("! " + line) }
        for (reason, names) in Self.byReason(described.unreadable, order: present) {
            print(
                "- Kafka topic configurations of \(names.joined(separator: ", ")): could not be read (cleanup.policy, "
                    + "retention, min.insync.replicas not checked): \(reason)")
        }
        if contradictions.isEmpty && described.unreadable.isEmpty {
            pass(
                "Kafka topic settings as planned (apns-relay topics): cleanup.policy, retention, min.insync.replicas, "
                    + "replication, and the results' partitions match the input's")
        }

        for topic in topics.outputs where present.contains(topic) {
            let key = plan.topics.first { $0.name == topic }?.key ?? "?"
            switch described.mayWrite(topic) {
            case true?:
                pass(
                    "Kafka topic \(topic) (\(key)): the relay may write to it (WRITE is among the operations the broker allows its principal)"
                )
            case false?:
                let allowed = described.authorizedOperations[topic, default: []].sorted().joined(separator: ", ")
                fail(
                    "Kafka topic \(topic) (\(key)): the relay may not write to it: the broker allows its principal "
                        + "\(allowed.isEmpty ? "nothing" : allowed) but not WRITE (grant Write and Describe: README \"Topics and ACLs\")"
                )
            case nil:
                continue
            }
        }
        let outputs = topics.outputs.filter(present.contains)
        for (reason, names) in Self.byReason(
            described.operationsUnknown.filter { outputs.contains($0.key) }, order: outputs)
        {
            print("- Kafka write permission on \(names.joined(separator: ", ")): not checked: \(reason)")
        }
        return contradictions.count
    }

    /// Topics grouped by the reason given for each, in `order`: one line per reason rather than per topic.
    private static func byReason(_ reasons: [String: String], order: [String]) -> [(String, [String])] {
        var groups: [(String, [String])] = []
        for topic in order {
            guard let reason = reasons[topic] else { continue }
            if let index = groups.firstIndex(where: { $0.0 == reason }) {
                groups[index].1.append(topic)
            } else {
                groups.append((reason, [topic]))
            }
        }
        return groups
    }
}
