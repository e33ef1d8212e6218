import APNsCore
import APNsMock
import Crypto
import Foundation
import Kafka
import Logging
import Relay

/// A complete, throw-away environment for the relay on one machine: librdkafka's mock Kafka cluster, the
/// mock APNs server (TLS + HTTP/2) trusting a freshly made signing key, and the topics the relay uses.
///
/// `apns-relay demo`, the end-to-end tests and the benchmarks all run on it, so what they exercise is the
/// real protocol stack on both sides. Nothing reaches the network beyond 127.0.0.1.
public final class RelaySandbox: Sendable {
    public struct Options: Sendable {
        public var brokers = 1
        public var partitions = 6
        public var inputTopic = "apns-notifications"
        public var topics = RelayConfiguration.Topics(
            input: ["apns-notifications"], results: "apns-results", removedTokens: "apns-removed-tokens",
            deadLetters: "apns-dead-letters"
        )
        /// The environment the mock APNs plays (development adds `apns-unique-id`).
        public var apnsEnvironment: APNsEnvironment = .development
        public var strictFleet = true
        public var maxConcurrentStreams = 1000
        public var apnsEventLoopThreads = 1
        public init() {}
    }

    public let options: Options
    public let cluster: MockKafkaCluster
    public let apns: APNsMockServer
    public let apnsPort: Int
    public let caFile: String
    public let keyID = "DEMOKEY001"
    public let teamID = "DEMOTEAM01"
    /// The `.p8` file of the throw-away signing key (removed by `stop()`).
    public let keyFile: String
    private let directory: String
    private let logger: Logger

    public var bootstrapServers: String { cluster.bootstrapServers }

    public init(options: Options = Options(), logger: Logger) async throws {
        self.options = options
        self.logger = logger
        directory = NSTemporaryDirectory() + "apns-relay-sandbox-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)

        let key = P256.Signing.PrivateKey()
        keyFile = directory + "/AuthKey_\(keyID).p8"
        try key.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)

        cluster = try MockKafkaCluster(brokers: options.brokers, logger: logger)
        let topics = options.topics
        for topic in Set(topics.input + [topics.results, topics.removedTokens, topics.deadLetters]) {
            try cluster.createTopic(topic, partitions: options.partitions)
        }

        var configuration = APNsMockConfiguration()
        configuration.environment = options.apnsEnvironment
        configuration.providerKeys = [ProviderKey(keyID: keyID, teamID: teamID, publicKey: key.publicKey)]
        configuration.strictFleet = options.strictFleet
        configuration.maxConcurrentStreams = options.maxConcurrentStreams
        configuration.eventLoopThreads = options.apnsEventLoopThreads
        apns = APNsMockServer(configuration: configuration, logger: logger)
        apnsPort = try await apns.start()
        guard let caPath = apns.caCertificatePEMPath else { throw RelayError("the mock APNs wrote no CA file") }
        caFile = caPath
    }

    /// Settings for a relay of this sandbox, as `--set` flags would give them (see `RelayAppConfiguration`).
    public func relaySettings(groupID: String = "apns-relay") -> [String: String] {
        [
            "kafka.bootstrapServers": bootstrapServers,
            "kafka.groupId": groupID,
            "kafka.sessionTimeoutMs": "6000",
            "kafka.statisticsIntervalMs": "0",
            "kafka.topics.input": options.topics.input.joined(separator: ","),
            "kafka.topics.results": options.topics.results,
            "kafka.topics.removedTokens": options.topics.removedTokens,
            "kafka.topics.deadLetters": options.topics.deadLetters,
            "apns.token.keyId": keyID,
            "apns.token.teamId": teamID,
            "apns.token.privateKeyFile": keyFile,
            "apns.caFile": caFile,
            "apns.production.host": "127.0.0.1",
            "apns.production.port": String(apnsPort),
            "apns.development.host": "127.0.0.1",
            "apns.development.port": String(apnsPort),
            "admin.port": "0",
        ]
    }

    /// The same settings as `APNS_RELAY_*` environment variables, for a relay in another process.
    public func relayEnvironment(groupID: String = "apns-relay") -> [String: String] {
        Dictionary(uniqueKeysWithValues: relaySettings(groupID: groupID).map {
            ("APNS_RELAY_" + RelayAppConfiguration.environmentName(forKey: $0.key), $0.value)
        })
    }

    /// A relay configuration for this sandbox, with `overrides` on top.
    public func relayConfiguration(groupID: String = "apns-relay", overrides: [String: String] = [:]) async throws -> RelayAppConfiguration {
        let settings = relaySettings(groupID: groupID).merging(overrides) { $1 }
        let reader = try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: settings)
        return try RelayAppConfiguration(reader: reader)
    }

    /// Produces events to the input topic and waits until Kafka has them all.
    public func produce(_ events: [(key: String, value: [UInt8])]) async throws {
        try await produce(records: events.map { InputRecord(key: Array($0.key.utf8), value: $0.value) })
    }

    /// A record for the input topic, with whatever key and headers a test needs.
    public struct InputRecord: Sendable {
        public var key: [UInt8]?
        public var value: [UInt8]
        public var headers: [KafkaHeader]

        public init(key: [UInt8]?, value: [UInt8], headers: [KafkaHeader] = []) {
            self.key = key
            self.value = value
            self.headers = headers
        }
    }

    /// Produces records to the input topic (concurrently: no order among them) and waits until Kafka has them all.
    public func produce(records events: [InputRecord]) async throws {
        var configuration = KafkaProducerConfiguration(bootstrapServers: [bootstrapServers])
        configuration.clientID = "sandbox-producer"
        // Tests send oversize events on purpose (the relay must refuse them, not the producer).
        configuration.additionalProperties["message.max.bytes"] = String(32 << 20)
        let producer = try KafkaProducer(configuration: configuration, logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            var pending = 0
            for event in events {
                if pending >= 2000 {
                    try await group.next()
                    pending -= 1
                }
                group.addTask { [topic = options.inputTopic] in
                    _ = try await producer.send(topic: topic, key: event.key, value: event.value, headers: event.headers)
                }
                pending += 1
            }
            try await group.waitForAll()
        }
        try await producer.close(timeout: .seconds(10))
    }

    /// Stops the mock APNs and removes the temporary files.
    public func stop() async {
        await apns.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
