import ArgumentParser
import Relay
import RelayApp

/// `apns-relay topics --print`: the commands that create the topics the configuration names, as README's
/// "Topics and ACLs" says they should be (the relay creates none), and the ACLs its principal needs.
struct TopicsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "topics",
        abstract: "Print the commands (kafka-topics.sh, kafka-acls.sh) or Strimzi KafkaTopic resources that create the relay's topics.",
        discussion: """
            Reads the configuration as run does (the topic names, kafka.groupId, kafka.exactlyOnce, \
            relay.maxDeadLetterBytes) and prints; it connects to nothing. Input and results topics get \
            --partitions (the replicas' upper bound; results match the input so a key's result lands where \
            its event did), the others 3; replication --replication-factor with min.insync.replicas 2.
            """
    )

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case kafkaTopics = "kafka-topics"
        case strimzi
        case acls
    }

    @OptionGroup var options: ConfigurationOptions

    @Flag(help: "Print (the only action: the relay never creates topics itself).")
    var print = false

    @Option(help: "What to print: kafka-topics (commands), strimzi (KafkaTopic YAML) or acls (kafka-acls.sh commands).")
    var format: Format = .kafkaTopics

    @Option(help: "Partitions of the input and results topics.")
    var partitions = 12

    @Option(help: "Replication factor of every topic.")
    var replicationFactor = 3

    @Option(help: "With --format strimzi: the Kafka cluster's name (the strimzi.io/cluster label).")
    var strimziCluster = "my-cluster"

    @Option(help: "With --format strimzi: the KafkaTopics' namespace.")
    var namespace: String?

    @Option(help: "With --format acls: the relay's principal.")
    var principal = "User:apns-relay"

    func validate() throws {
        guard print else { throw ValidationError("say --print: the relay never creates topics; this prints how to") }
        guard partitions >= 1, replicationFactor >= 1 else { throw ValidationError("--partitions and --replication-factor must be at least 1") }
    }

    func run() async throws {
        let configuration = try RelayAppConfiguration(reader: try await options.sources())
        let plan = TopicPlan(
            topics: configuration.relay.topics, partitions: partitions, replicationFactor: replicationFactor,
            maxDeadLetterBytes: configuration.relay.maxDeadLetterBytes)
        let bootstrap = configuration.kafka.bootstrapServers.joined(separator: ",")
        switch format {
        case .kafkaTopics:
            for (topic, command) in zip(plan.topics, plan.kafkaTopicsCommands(bootstrapServer: bootstrap)) {
                Swift.print("# \(topic.name) (\(topic.key)): \(topic.purpose)")
                Swift.print(command)
            }
        case .strimzi:
            Swift.print(plan.strimziTopics(cluster: strimziCluster, namespace: namespace), terminator: "")
        case .acls:
            let commands = plan.kafkaACLCommands(
                bootstrapServer: bootstrap, principal: principal, groupID: configuration.kafka.groupID, exactlyOnce: configuration.kafka.exactlyOnce)
            commands.forEach { Swift.print($0) }
        }
    }
}
