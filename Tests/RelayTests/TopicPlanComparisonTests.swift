import Kafka
import Relay
import RelayApp
import Testing

/// `TopicPlan.contradictions(with:)`, what `apns-relay check` warns of: a cluster's topics against README's
/// "Topics and ACLs" table. The cluster values here are written out from that table, not taken from the plan.
@Suite struct TopicPlanComparisonTests {
    private let topics = RelayConfiguration.Topics(
        input: ["events"], results: "results", removedTokens: "tokens", removedChannels: "channels", deadLetters: "dead")
    private let day = 86_400_000

    private var plan: TopicPlan { TopicPlan(topics: topics, partitions: 12, maxDeadLetterBytes: 900 * 1024) }

    /// README's table: replication 3 and min.insync.replicas 2 everywhere; inputs and results deleted after a
    /// day and 7 days, removals compacted, dead letters deleted after 14–30 days with room for the largest.
    private func asTheTableSays(partitions: Int = 12) -> [String: TopicPlan.ClusterTopic] {
        func topic(_ partitions: Int, _ configs: [String: String]) -> TopicPlan.ClusterTopic {
            TopicPlan.ClusterTopic(partitions: partitions, replicationFactor: 3, configs: configs.merging(["min.insync.replicas": "2"]) { $1 })
        }
        return [
            "events": topic(partitions, ["cleanup.policy": "delete", "retention.ms": String(day)]),
            "results": topic(partitions, ["cleanup.policy": "delete", "retention.ms": String(7 * day)]),
            "tokens": topic(3, ["cleanup.policy": "compact"]),
            "channels": topic(6, ["cleanup.policy": "compact,delete", "retention.ms": String(30 * day)]),
            // Kafka's default max.message.bytes (1 MiB + 12) holds relay.maxDeadLetterBytes 900 KiB and more.
            "dead": topic(3, ["cleanup.policy": "delete", "retention.ms": String(14 * day), "max.message.bytes": "1048588"]),
        ]
    }

    @Test func aClusterAsTheTableSaysContradictsNothing() {
        #expect(plan.contradictions(with: asTheTableSays()) == [])
        // The plan's own partition count does not matter: the results are compared with the input the cluster has.
        #expect(plan.contradictions(with: asTheTableSays(partitions: 4)) == [])
    }

    @Test func compactedResultsAreAWarning() {
        for policy in ["compact", "compact,delete", "delete, compact"] {
            var cluster = asTheTableSays()
            cluster["results"]?.configs?["cleanup.policy"] = policy
            let lines = plan.contradictions(with: cluster)
            #expect(lines.count == 1, "\(policy): \(lines)")
            #expect(lines.first?.hasPrefix("Kafka topic results (kafka.topics.results): cleanup.policy is \(policy), the plan says delete") == true, "\(lines)")
            #expect(lines.first?.contains("loses the results") == true, "\(lines)")
        }
    }

    @Test func compactionWhereTheTableDeletesIsAWarningOnEveryTopic() {
        var cluster = asTheTableSays()
        cluster["events"]?.configs?["cleanup.policy"] = "compact"
        cluster["dead"]?.configs?["cleanup.policy"] = "compact"
        let lines = plan.contradictions(with: cluster)
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("Kafka topic events (kafka.topics.input): cleanup.policy is compact, the plan says delete") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("Kafka topic dead (kafka.topics.deadLetters): cleanup.policy is compact, the plan says delete") }, "\(lines)")
    }

    /// The table recommends compaction for removals; deleting them is a softer note, naming the retention.
    @Test func deletedRemovalsAreANoteThatSaysWhatThePlanRecommends() {
        var cluster = asTheTableSays()
        cluster["tokens"]?.configs = ["cleanup.policy": "delete", "retention.ms": String(7 * day), "min.insync.replicas": "2"]
        let lines = plan.contradictions(with: cluster)
        #expect(lines == [
            "Kafka topic tokens (kafka.topics.removedTokens): cleanup.policy is delete, the plan recommends compact (or compact,delete): "
                + "the latest record of each key is what a reader acts on, and compaction keeps it however old; with delete alone it is gone after retention.ms (7 days)",
        ])
    }

    @Test func resultsWithOtherPartitionsThanTheLargestInputAreAWarning() {
        var withUrgent = topics
        withUrgent.urgent = ["urgent"]
        let plan = TopicPlan(topics: withUrgent, partitions: 1, maxDeadLetterBytes: 900 * 1024)
        var cluster = asTheTableSays(partitions: 12)
        cluster["urgent"] = cluster["events"].map { var urgent = $0; urgent.partitions = 24; return urgent }
        let fewer = plan.contradictions(with: cluster)
        #expect(fewer.count == 1, "\(fewer)")
        #expect(fewer.first?.hasPrefix("Kafka topic results (kafka.topics.results): 12 partition(s), fewer than the 24 of urgent:") == true, "\(fewer)")

        cluster["results"]?.partitions = 24
        #expect(plan.contradictions(with: cluster) == [], "as many as the largest input")
        cluster["results"]?.partitions = 48
        #expect(plan.contradictions(with: cluster).first?.contains("48 partition(s), more than the 24 of urgent") == true)
    }

    @Test func replicationBelowTheTablesIsAWarning() {
        var cluster = asTheTableSays()
        cluster["results"]?.replicationFactor = 1
        cluster["results"]?.configs?["min.insync.replicas"] = "1"
        cluster["tokens"]?.configs?["min.insync.replicas"] = "1"
        let lines = plan.contradictions(with: cluster)
        #expect(lines.count == 3, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("Kafka topic results (kafka.topics.results): replication factor 1, the plan says 3") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("Kafka topic results (kafka.topics.results): min.insync.replicas 1, the plan says 2") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("Kafka topic tokens (kafka.topics.removedTokens): min.insync.replicas 1, the plan says 2") }, "\(lines)")
    }

    /// Kafka refuses acks=all writes to a partition with fewer in-sync replicas than min.insync.replicas.
    @Test func moreInSyncReplicasThanReplicasIsAWarning() {
        var cluster = asTheTableSays()
        cluster["dead"]?.replicationFactor = 1
        let lines = plan.contradictions(with: cluster)
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("Kafka topic dead (kafka.topics.deadLetters): min.insync.replicas 2, more than its 1 replica(s)") }, "\(lines)")
    }

    /// README: dead letters are kept long enough to fix a producer and replay, 14–30 days.
    @Test func deadLettersKeptShorterThanTwoWeeksAreAWarning() {
        var cluster = asTheTableSays()
        cluster["dead"]?.configs?["retention.ms"] = String(13 * day)
        #expect(plan.contradictions(with: cluster) == [
            "Kafka topic dead (kafka.topics.deadLetters): retention.ms \(13 * day) (13 days), shorter than the plan's minimum of 14 days: "
                + "records are deleted before their readers may get to them",
        ])
        cluster["dead"]?.configs?["retention.ms"] = "-1"
        #expect(plan.contradictions(with: cluster) == [], "-1: kept for ever")
        // Results and inputs: the table names a retention (as long as readers lag), no minimum.
        cluster = asTheTableSays()
        cluster["results"]?.configs?["retention.ms"] = "3600000"
        cluster["events"]?.configs?["retention.ms"] = "3600000"
        #expect(plan.contradictions(with: cluster) == [])
    }

    @Test func aDeadLetterTopicThatRefusesTheLargestDeadLettersIsAWarning() {
        var cluster = asTheTableSays()
        cluster["dead"]?.configs?["max.message.bytes"] = String(900 * 1024)
        let lines = plan.contradictions(with: cluster)
        #expect(lines.count == 1 && lines.first?.hasPrefix("Kafka topic dead (kafka.topics.deadLetters): max.message.bytes 921600, below the plan's") == true, "\(lines)")
    }

    /// Where the configurations could not be read, what the metadata says is still compared; missing topics
    /// are the existence check's.
    @Test func unreadConfigurationsAndMissingTopicsAreNotGuessed() {
        var cluster = asTheTableSays()
        for name in cluster.keys { cluster[name]?.configs = nil }
        cluster["tokens"] = nil
        #expect(plan.contradictions(with: cluster) == [])
        cluster["results"]?.partitions = 2
        cluster["results"]?.replicationFactor = 1
        let lines = plan.contradictions(with: cluster)
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.contains { $0.contains("2 partition(s), fewer than the 12 of events") } && lines.contains { $0.contains("replication factor 1") }, "\(lines)")
    }

    /// librdkafka's CHANGELOG: DescribeTopics with authorized operations came in 2.3.0. Every function is found
    /// in the loaded library from then on (`make test` runs this on 2.0.2 and on the image's current one).
    @Test func describeTopicsIsFoundInTheLoadedLibrdkafkaFrom23On() {
        #expect(KafkaLibrary.hasDescribeTopics == KafkaLibrary.isAtLeast(2, 3), "librdkafka \(KafkaLibrary.version)")
    }

    /// The broker lists the operations it allows; WRITE, or ALL, lets the relay produce.
    @Test func writeIsAllowedByWriteOrAll() {
        var described = KafkaTopicConfigurations()
        described.authorizedOperations = ["a": ["READ", "WRITE", "DESCRIBE"], "b": ["ALL"], "c": ["READ", "DESCRIBE"]]
        described.operationsUnknown = ["d": "the broker did not say"]
        #expect(described.mayWrite("a") == true && described.mayWrite("b") == true)
        #expect(described.mayWrite("c") == false)
        #expect(described.mayWrite("d") == nil)
    }
}
