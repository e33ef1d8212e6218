extension TopicPlan {
    /// One topic as a cluster describes it, for ``contradictions(with:)``.
    package struct ClusterTopic: Sendable, Equatable {
        package var partitions: Int
        /// The fewest replicas any of its partitions has; `nil` when the metadata did not say.
        package var replicationFactor: Int?
        /// Its configuration as the broker reports it (the broker's defaults included); `nil` when it could not
        /// be read.
        package var configs: [String: String]?

        package init(partitions: Int, replicationFactor: Int? = nil, configs: [String: String]? = nil) {
            self.partitions = partitions
            self.replicationFactor = replicationFactor
            self.configs = configs
        }
    }

    /// Where `cluster` contradicts this plan, one sentence per topic and setting: what the cluster has, what the
    /// plan says, and what the difference costs. `apns-relay check` prints them as warnings.
    ///
    /// Compared: `cleanup.policy` (compaction where the plan deletes, and the other way round), the results
    /// topic's partitions against the largest input topic the cluster has (whatever `partitions` this plan was
    /// made with), the replication factor, `min.insync.replicas`, `retention.ms` against
    /// ``Topic/minimumRetentionMs``, and `max.message.bytes` where the plan sets one. A topic missing from
    /// `cluster`, or a setting it does not report, is not compared.
    package func contradictions(with cluster: [String: ClusterTopic]) -> [String] {
        let inputs = topics.filter { $0.key == "kafka.topics.input" || $0.key == "kafka.topics.urgent" }
        let largestInput = inputs.compactMap { topic in cluster[topic.name].map { (topic.name, $0.partitions) } }
            .max { $0.1 < $1.1 }
        var lines: [String] = []
        for topic in topics {
            guard let found = cluster[topic.name] else { continue }
            let label = "Kafka topic \(topic.name) (\(topic.key))"
            let planned = Dictionary(topic.configs, uniquingKeysWith: { $1 })
            let configs = found.configs ?? [:]

            let policy = configs["cleanup.policy"].map(Self.policies)
            if let wanted = planned["cleanup.policy"].map(Self.policies), let policy,
                let value = configs["cleanup.policy"]
            {
                if !wanted.contains("compact") && policy.contains("compact") {
                    lines.append(
                        "\(label): cleanup.policy is \(value), the plan says delete: compaction keeps only the "
                            + "latest record of each key, and every record of this topic counts, not the last per key "
                            + "(\(Self.compactionLoss(topic.key)))")
                } else if wanted.contains("compact") && !policy.contains("compact") {
                    let retention = configs["retention.ms"].flatMap(Int.init).map { " (\(Self.duration($0)))" } ?? ""
                    lines.append(
                        "\(label): cleanup.policy is \(value), the plan recommends compact (or compact,delete): "
                            + "the latest record of each key is what a reader acts on, and compaction keeps it however old; "
                            + "with delete alone it is gone after retention.ms\(retention)")
                }
            }

            if topic.key == "kafka.topics.results", let (input, count) = largestInput, found.partitions != count {
                lines.append(
                    "\(label): \(found.partitions) partition(s), \(found.partitions < count ? "fewer" : "more") "
                        + "than the \(count) of \(input): the plan gives results the input's partition count, so that with "
                        + "kafka.partitioner a result lands on the partition its event's key did")
            }

            if let replicas = found.replicationFactor, replicas < replicationFactor {
                lines.append(
                    "\(label): replication factor \(replicas), the plan says \(replicationFactor): "
                        + "a record is on \(replicas) broker(s) only, and losing \(replicas == 1 ? "that broker" : "them") loses it"
                )
            }
            if let value = configs["min.insync.replicas"].flatMap(Int.init) {
                if let replicas = found.replicationFactor, value > replicas {
                    lines.append(
                        "\(label): min.insync.replicas \(value), more than its \(replicas) replica(s): the broker "
                            + "refuses every write with acks=all (the relay's) as NOT_ENOUGH_REPLICAS")
                } else if let wanted = planned["min.insync.replicas"].flatMap(Int.init), value < wanted {
                    lines.append(
                        "\(label): min.insync.replicas \(value), the plan says \(wanted): a record counts as "
                            + "written (acks=all) once \(value) broker(s) have it, and losing \(value == 1 ? "that one" : "them") "
                            + "before the others copied it loses it")
                }
            }

            if let minimum = topic.minimumRetentionMs, policy?.contains("delete") ?? true,
                let retention = configs["retention.ms"].flatMap(Int.init), retention >= 0, retention < minimum
            {
                lines.append(
                    "\(label): retention.ms \(retention) (\(Self.duration(retention))), shorter than the plan's "
                        + "minimum of \(Self.duration(minimum)): records are deleted before their readers may get to them"
                )
            }

            if let wanted = planned["max.message.bytes"].flatMap(Int.init),
                let value = configs["max.message.bytes"].flatMap(Int.init), value < wanted
            {
                lines.append(
                    "\(label): max.message.bytes \(value), below the plan's \(wanted): the broker refuses "
                        + "records larger than \(value) bytes, and the relay writes them up to the plan's size")
            }
        }
        return lines
    }

    /// `compact,delete` → `["compact", "delete"]`.
    private static func policies(_ value: String) -> Set<String> {
        Set(value.split(separator: ",").map { $0.filter { !$0.isWhitespace }.lowercased() })
    }

    /// What compaction loses on a topic the plan deletes.
    private static func compactionLoss(_ key: String) -> String {
        switch key {
        case "kafka.topics.results": "a compacted results topic loses the results of earlier events with the same key"
        case "kafka.topics.input", "kafka.topics.urgent":
            "events with the same key may be compacted away before the relay reads them"
        case "kafka.topics.deadLetters": "dead letters with the same key are lost before anyone replays them"
        default: "records with the same key are lost"
        }
    }

    /// `604800000` → `7 days`; `3600000` → `1 hour`.
    private static func duration(_ milliseconds: Int) -> String {
        func count(_ n: Int, _ unit: String) -> String { n == 1 ? "1 \(unit)" : "\(n) \(unit)s" }
        for (unit, length) in [("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000)]
        where milliseconds >= length && milliseconds % length == 0 {
            return count(milliseconds / length, unit)
        }
        return "\(milliseconds) ms"
    }
}
