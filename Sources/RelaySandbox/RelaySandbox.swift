import APNsCore
import APNsMock
import Crypto
import Foundation
import Kafka
import KafkaMock
import Logging
import Relay
import RelayApp
import ServiceSupport
import Synchronization

/// A complete, throw-away environment for the relay on one machine: librdkafka's mock Kafka cluster (or a
/// broker the caller runs, `Options.externalBootstrapServers`), the mock APNs server (TLS + HTTP/2) trusting
/// a freshly made signing key, and the topics the relay uses.
///
/// `apns-relay demo`, the end-to-end tests and the benchmarks all run on it, so what they exercise is the
/// real protocol stack on both sides. Nothing reaches the network beyond 127.0.0.1.
package final class RelaySandbox: Sendable {
    package struct Options: Sendable {
        package var brokers = 1
        package var partitions = 6
        package var inputTopic = "apns-notifications"
        package var topics = RelayConfiguration.Topics.defaults
        /// The environment the mock APNs plays (development adds `apns-unique-id`).
        package var apnsEnvironment: APNsEnvironment = .development
        package var strictFleet = true
        package var maxConcurrentStreams = 1000
        package var apnsEventLoopThreads = 1
        /// librdkafka properties of the sandbox's input producer, e.g. `max.in.flight.requests.per.connection=1`
        /// where a test injects produce errors (see `MockKafkaCluster.pushRequestErrors`).
        package var inputProducerProperties: [String: String] = [:]
        /// A Kafka-protocol broker the caller runs instead of librdkafka's mock cluster (noida-db in the tests,
        /// where transactions or a second broker implementation matter). The sandbox creates its topics there
        /// through the admin API; the mock cluster's fault hooks (`cluster`) are then unavailable.
        package var externalBootstrapServers: String? = nil
        package init() {}
    }

    package let options: Options
    /// librdkafka's mock cluster, unless `options.externalBootstrapServers` names another broker.
    package let mockCluster: MockKafkaCluster?
    /// The mock cluster, for tests that move leaders, take brokers down or inject request errors.
    package var cluster: MockKafkaCluster {
        guard let mockCluster else { preconditionFailure("this sandbox runs on \(bootstrapServers), not on librdkafka's mock cluster") }
        return mockCluster
    }
    package let apns: APNsMockServer
    package let apnsPort: Int
    /// The mock's channel-management port (broadcast channels).
    package let managementPort: Int
    package let caFile: String
    package let keyID = "DEMOKEY001"
    package let teamID = "DEMOTEAM01"
    /// The `.p8` file of the throw-away signing key (removed by `stop()`).
    package let keyFile: String
    private let directory: String
    private let logger: Logger

    package let bootstrapServers: String

    package init(options: Options = Options(), logger: Logger) async throws {
        self.options = options
        self.logger = logger
        directory = NSTemporaryDirectory() + "apns-relay-sandbox-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)

        let key = P256.Signing.PrivateKey()
        keyFile = directory + "/AuthKey_\(keyID).p8"
        try key.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
        // As an operator keeps a key: readable by its owner only (the relay warns of a key others may read).
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile)

        let topics = Set(options.topics.inputs + options.topics.outputs)
        if let external = options.externalBootstrapServers {
            mockCluster = nil
            bootstrapServers = external
            try await KafkaTopicCreation.create(
                Dictionary(uniqueKeysWithValues: topics.map { ($0, options.partitions) }), bootstrapServers: [external], logger: logger)
        } else {
            let cluster = try MockKafkaCluster(brokers: options.brokers, logger: logger)
            mockCluster = cluster
            bootstrapServers = cluster.bootstrapServers
            for topic in topics {
                try cluster.createTopic(topic, partitions: options.partitions)
            }
        }

        var configuration = APNsMockConfiguration()
        configuration.environment = options.apnsEnvironment
        configuration.providerKeys = [ProviderKey(keyID: keyID, teamID: teamID, publicKey: key.publicKey)]
        configuration.strictFleet = options.strictFleet
        configuration.maxConcurrentStreams = options.maxConcurrentStreams
        configuration.managementPort = 0
        configuration.eventLoopThreads = options.apnsEventLoopThreads
        apns = APNsMockServer(configuration: configuration, logger: logger)
        apnsPort = try await apns.start()
        guard let managementPort = apns.managementPort else { throw RelayError("the mock APNs opened no management port") }
        self.managementPort = managementPort
        guard let caPath = apns.caCertificatePEMPath else { throw RelayError("the mock APNs wrote no CA file") }
        caFile = caPath
    }

    /// Settings for a relay of this sandbox, as `--set` flags would give them (see `RelayAppConfiguration`).
    package func relaySettings(groupID: String = "apns-relay") -> [String: String] {
        [
            "kafka.bootstrapServers": bootstrapServers,
            "kafka.groupId": groupID,
            "kafka.sessionTimeoutMs": "6000",
            "kafka.statisticsIntervalMs": "0",
            "kafka.topics.input": options.topics.input.joined(separator: ","),
            "kafka.topics.urgent": options.topics.urgent.joined(separator: ","),
            "kafka.topics.results": options.topics.results,
            "kafka.topics.removedTokens": options.topics.removedTokens,
            "kafka.topics.removedChannels": options.topics.removedChannels,
            "kafka.topics.deadLetters": options.topics.deadLetters,
            "apns.token.keyId": keyID,
            "apns.token.teamId": teamID,
            "apns.token.privateKeyFile": keyFile,
            "apns.caFile": caFile,
            "apns.production.host": "127.0.0.1",
            "apns.production.port": String(apnsPort),
            "apns.development.host": "127.0.0.1",
            "apns.development.port": String(apnsPort),
            "apns.production.managementHost": "127.0.0.1",
            "apns.production.managementPort": String(managementPort),
            "apns.development.managementHost": "127.0.0.1",
            "apns.development.managementPort": String(managementPort),
            "admin.port": "0",
        ]
    }

    /// The same settings as `APNS_RELAY_*` environment variables, for a relay in another process.
    package func relayEnvironment(groupID: String = "apns-relay") -> [String: String] {
        Dictionary(uniqueKeysWithValues: relaySettings(groupID: groupID).map {
            ("APNS_RELAY_" + RelayAppConfiguration.environmentName(forKey: $0.key), $0.value)
        })
    }

    /// A relay configuration for this sandbox, with `overrides` on top.
    package func relayConfiguration(groupID: String = "apns-relay", overrides: [String: String] = [:]) async throws -> RelayAppConfiguration {
        let settings = relaySettings(groupID: groupID).merging(overrides) { $1 }
        let reader = try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: settings)
        return try RelayAppConfiguration(reader: reader)
    }

    /// Produces events to the input topic (or `topic`) and waits until Kafka has them all.
    package func produce(_ events: [(key: String, value: [UInt8])], to topic: String? = nil) async throws {
        try await produce(records: events.map { InputRecord(key: Array($0.key.utf8), value: $0.value) }, to: topic)
    }

    /// A record for the input topic, with whatever key and headers a test needs.
    package struct InputRecord: Sendable {
        package var key: [UInt8]?
        package var value: [UInt8]
        package var headers: [KafkaHeader]
        /// The record's create time (Unix milliseconds); `nil`: when it is produced.
        package var timestampMilliseconds: Int64?

        package init(key: [UInt8]?, value: [UInt8], headers: [KafkaHeader] = [], timestampMilliseconds: Int64? = nil) {
            self.key = key
            self.value = value
            self.headers = headers
            self.timestampMilliseconds = timestampMilliseconds
        }
    }

    /// Produces records to the input topic (no order among them) and waits until Kafka has them all.
    ///
    /// Batched as a busy producer would (linger, many records per request): librdkafka's mock returns one
    /// record batch per partition per fetch, so tiny batches would make the input, not the relay, the
    /// limit of a benchmark.
    package func produce(records events: [InputRecord], to topic: String? = nil) async throws {
        var configuration = KafkaProducerConfiguration(bootstrapServers: [bootstrapServers])
        configuration.clientID = "sandbox-producer"
        configuration.linger = .milliseconds(20)
        // Tests send oversize events on purpose (the relay must refuse them, not the producer).
        configuration.additionalProperties["message.max.bytes"] = String(32 << 20)
        configuration.additionalProperties["queue.buffering.max.messages"] = String(max(100_000, events.count))
        configuration.additionalProperties.merge(options.inputProducerProperties) { $1 }
        let producer = try KafkaProducer(configuration: configuration, logger: logger)
        try producer.start()
        let outcome = Latch<KafkaError?>()
        let remaining = Countdown(events.count)
        if events.isEmpty { outcome.set(nil) }
        for event in events {
            try producer.produce(
                topic: topic ?? options.inputTopic, key: event.key, value: event.value, headers: event.headers,
                timestampMilliseconds: event.timestampMilliseconds
            ) { report in
                switch report {
                case .success:
                    if remaining.countDown() { outcome.set(nil) }
                case .failure(let error):
                    outcome.set(error)
                }
            }
        }
        let failure = await outcome.wait(timeout: .seconds(120))
        try await producer.close(timeout: .seconds(10))
        switch failure {
        case nil: throw RelayError("producing \(events.count) input records took longer than 120 s")
        case .some(let error?): throw error
        case .some(nil): break
        }
    }

    /// Stops the mock APNs and removes the temporary files.
    package func stop() async {
        await apns.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Counts delivery reports down to zero from any thread.
private final class Countdown: Sendable {
    private let remaining: Atomic<Int>
    init(_ count: Int) { remaining = Atomic(count) }
    /// - Returns: `true` for the call that reached zero.
    func countDown() -> Bool { remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 }
}
