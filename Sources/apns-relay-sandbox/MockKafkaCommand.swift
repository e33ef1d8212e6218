import ArgumentParser
import Dispatch
import Kafka
import KafkaMock
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `apns-relay-sandbox mock-kafka`: an in-process mock Kafka cluster for local runs and for other clients (kcat).
///
/// Prints the bootstrap servers as the first line of stdout (flushed), then runs until SIGINT or SIGTERM.
struct MockKafkaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-kafka",
        abstract: "Run librdkafka's mock Kafka cluster on 127.0.0.1 until SIGINT/SIGTERM.",
        discussion: "The first line of stdout is the bootstrap servers string.")

    @Option(help: "Number of brokers.")
    var brokers: Int = 3

    @Option(name: .customLong("topic"), help: "A topic to create, as NAME:PARTITIONS (repeatable).")
    var topics: [TopicSpec] = []

    @Option(help: "librdkafka log level shown on stderr (trace, debug, info, notice, warning, error, critical).")
    var logLevel: String = "warning"

    struct TopicSpec: ExpressibleByArgument {
        var name: String
        var partitions: Int
        init?(argument: String) {
            let parts = argument.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, let partitions = Int(parts[1]), partitions > 0 else { return nil }
            name = String(parts[0])
            self.partitions = partitions
        }
    }

    func validate() throws {
        guard brokers >= 1 else { throw ValidationError("--brokers must be at least 1") }
    }

    func run() async throws {
        var logger = Logger(label: "apns-relay.mock-kafka") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .warning
        let cluster = try MockKafkaCluster(brokers: brokers, logger: logger)
        for topic in topics {
            try cluster.createTopic(topic.name, partitions: topic.partitions)
        }
        print(cluster.bootstrapServers)
        fflush(nil)  // all output streams; stdout is a pipe when a test or script reads this line
        logger.info("mock Kafka cluster running", metadata: [
            "bootstrap": "\(cluster.bootstrapServers)", "topics": "\(topics.map { "\($0.name):\($0.partitions)" })",
        ])
        let received = await Self.firstTerminationSignal()
        logger.info("stopping mock Kafka cluster", metadata: ["signal": "\(received)"])
        withExtendedLifetime(cluster) {}
    }

    /// Waits for SIGINT or SIGTERM without blocking a thread. The default actions are switched off (they
    /// would kill the process from whatever thread receives the signal); dispatch sources observe them.
    static func firstTerminationSignal() async -> Int32 {
        let queue = DispatchQueue(label: "apns-relay.mock-kafka.signals")
        return await withCheckedContinuation { continuation in
            let sources = [SIGINT, SIGTERM].map { signalNumber in
                signal(signalNumber, SIG_IGN)
                return (signalNumber, DispatchSource.makeSignalSource(signal: signalNumber, queue: queue))
            }
            var resumed = false  // only touched on `queue`
            for (signalNumber, source) in sources {
                source.setEventHandler {
                    guard !resumed else { return }
                    resumed = true
                    sources.forEach { $0.1.cancel() }
                    continuation.resume(returning: signalNumber)
                }
                source.resume()
            }
        }
    }
}
