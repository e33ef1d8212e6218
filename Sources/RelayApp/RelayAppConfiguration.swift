import APNsClient
import APNsCore
import Configuration
import Foundation
import Kafka
import Relay

/// Everything `apns-relay run` needs, read from a file (YAML or JSON), the environment (`APNS_RELAY_*`)
/// and flags, in increasing precedence. Every key, its default and its variable are listed in README.md.
///
/// Secrets (the `.p8` key, certificate keys, passphrases) are read from files named here, never from the
/// configuration itself, and are never printed.
package struct RelayAppConfiguration: Sendable {
    /// The defaults written here (and in `RelayConfiguration`, `APNs`, `Admin`) are the only copy: the
    /// reader takes them from a default instance, and a test checks README.md and the chart against them.
    package struct Kafka: Sendable {
        /// The consumer's own defaults (`KafkaConsumerConfiguration`): the one copy of every setting the
        /// relay only passes on to it.
        private static let consumer = KafkaConsumerConfiguration(bootstrapServers: [], groupID: "apns-relay")

        package var bootstrapServers: [String] = []
        package var groupID = Self.consumer.groupID
        package var clientID = Self.consumer.clientID
        /// `kafka.groupInstanceId`: static membership (the chart can give each pod its name).
        package var groupInstanceID = Self.consumer.groupInstanceID
        package var sessionTimeout = Self.consumer.sessionTimeout
        package var maxPollInterval = Self.consumer.maxPollInterval
        /// `kafka.autoOffsetReset`: where a group with no committed offset for a partition starts.
        package var autoOffsetReset = Self.consumer.autoOffsetReset
        package var assignmentStrategy = Self.consumer.partitionAssignmentStrategy
        /// The relay's own: its consumer-lag gauges read librdkafka's statistics (the library's default is off).
        package var statisticsInterval: Duration = .seconds(15)
        package var autoCommitInterval = Self.consumer.autoCommitInterval
        /// `kafka.exactlyOnce`: results, removals and dead letters with their offsets in Kafka transactions.
        package var exactlyOnce = false
        /// `kafka.transactionalId`; `nil`: the group id and the host name (a pod's name in Kubernetes).
        package var transactionalID: String?
        package var transactionInterval = RelayConfiguration.ExactlyOnce(transactionalID: "").interval
        package var transactionTimeout = RelayConfiguration.ExactlyOnce(transactionalID: "").transactionTimeout
        /// What librdkafka may hold of records fetched ahead, over every partition together, in bytes: the fetch
        /// response on its way (`fetch.max.bytes`: a third, at most 2 MiB), and queued records, the rest
        /// (`queued.max.messages.kbytes`). See `RelayApp.prefetchSplit`.
        package var prefetchBytes = 8 * 1024 * 1024
        /// `linger.ms`: how long the producer gathers records into a batch before it sends a request. The
        /// relay's own (librdkafka's is 5 ms): while APNs is slow, answers come a few at a time, and a request
        /// per few records cost the producer's threads a quarter of the relay's CPU (Benchmarks/README,
        /// session 29). A result reaches Kafka (and its offset is stored for the next commit) at most this
        /// much later; events in flight are held that much longer.
        package var linger: Duration = .milliseconds(20)
        /// `kafka.partitioner`: the relay's own default is Java's (murmur2), so that a result, removed-token or
        /// removed-channel record lands on the partition a Java producer would give its key, for readers that
        /// join them with a topic a Java service writes by partition.
        package var partitioner: KafkaPartitioner = .murmur2Random
        /// `kafka.lingerMs`'s default with `kafka.exactlyOnce`: librdkafka's. A transaction's records wait for
        /// their acknowledgements before it commits, and a longer linger cost 7 % of the events per second a
        /// read_committed reader saw (two pairs, session 29).
        package static let exactlyOnceLinger: Duration = .milliseconds(5)
        /// librdkafka properties for both clients (SASL/SSL and anything else), then per client.
        package var properties: [String: String] = [:]
        package var consumerProperties: [String: String] = [:]
        package var producerProperties: [String: String] = [:]
        /// `kafka.sasl.*` and `kafka.tls.*`.
        package var security = KafkaSecurity()
    }

    package struct APNs: Sendable {
        package enum Auth: Sendable {
            case token(keyID: KeyID, teamID: String, privateKeyFile: String, rotationEpoch: Duration)
            case certificate(ClientCertificateSource)
        }

        /// The key id, as a value (`token.keyId`) or in a file beside the key (`token.keyIdFile`), which a key
        /// rotation replaces together with the key.
        package enum KeyID: Sendable, Equatable {
            case value(String)
            case file(String)
        }

        package struct Credential: Sendable {
            package var name: String
            /// Where its keys are: `apns.` for the unnamed one, `apns.credential.NAME.` for named ones.
            package var keyPrefix: String = "apns."
            package var auth: Auth
            /// Bundle ids (`com.example.app`, or `com.example.*`) this credential pushes to; empty: any.
            package var topics: [String]
            /// The APNs environments it pushes to (`environments`): since 2025 a key may be restricted to one.
            package var environments: Set<APNsEnvironment> = Set(APNsEnvironment.allCases)
        }

        package enum ClientCertificateSource: Sendable {
            case pem(certificateFile: String, privateKeyFile: String)
            case pkcs12(file: String, passphraseFile: String?)
        }

        /// One credential per team or certificate, each with its own connections (APNs binds a connection
        /// to one team). The first whose `topics` match an event's topic and whose `environments` include
        /// its environment sends it; empty `topics` match any.
        package var credentials: [Credential] = []
        package var endpoints: [APNsEnvironment: APNsClientConfiguration.Endpoint] = Dictionary(
            uniqueKeysWithValues: APNsEnvironment.allCases.map { ($0, APNsClientConfiguration.Endpoint(host: $0.host, port: 443)) }
        )
        /// Channel management (`apns-relay channels`): Apple's management hosts unless
        /// `apns.<environment>.managementHost`/`managementPort` say otherwise.
        package var managementEndpoints: [APNsEnvironment: APNsClientConfiguration.Endpoint] = Dictionary(
            uniqueKeysWithValues: APNsEnvironment.allCases.map {
                ($0, APNsClientConfiguration.Endpoint(host: $0.managementHost, port: $0.managementPort))
            }
        )
        /// A CA bundle to trust instead of the system store (the mock's CA in tests and the demo).
        package var caFile: String?
        package var insecureSkipVerify = false
        /// `apns.proxy.url`: reach APNs through this HTTP proxy (CONNECT), already checked.
        package var proxy: HTTPProxy?
        /// `apns.proxy.credentialsFile`: `user:password` for the proxy, read when the client is built.
        package var proxyCredentialsFile: String?
        /// `apns.ioThreads`: event loops serving every APNs connection; 0: `APNsEventLoopGroup.defaultLoopCount()`.
        package var ioThreads = 0
        /// `apns.batchWindowMs`: a busy event loop turns at most once per this window (the floor of `BatchWindow`).
        package var batchWindow = APNsEventLoopGroup.defaultBatchWindow
        package var minConnections = APNsClientConfiguration.Pool().minConnections
        package var maxConnections = APNsClientConfiguration.Pool().maxConnections
        /// `apns.pool.idleTimeoutMs`; `nil` (0): a pool keeps its connections however long it is idle.
        package var idleTimeout: Duration? = APNsClientConfiguration.Pool().idleTimeout
        package var connectTimeout = APNsClientConfiguration.Connection().connectTimeout
        /// `apns.pool.adaptiveConcurrency`: bound requests in flight by a limit learned from APNs' latency.
        package var adaptiveConcurrency = APNsClientConfiguration.Pool().adaptiveConcurrency
        /// Answers slower than this shrink that limit: a quarter of `relay.requestTimeoutMs`.
        package var congestionLatency = APNsClientConfiguration.Pool().congestionLatency
        /// The share of the pool's capacity bulk pushes may not use: `relay.lanes.urgentShare` when
        /// `kafka.topics.urgent` lists topics, else 0.
        package var urgentShare = APNsClientConfiguration.Pool().urgentShare
        /// `apns.token.rotationMinutes`.
        package static let tokenRotationMinutes = 30
        /// `apns.keyReloadIntervalMs`: how often token credentials' key files are read again for a new key;
        /// `nil` (0): never.
        package var keyReloadInterval: Duration? = .seconds(10)
    }

    package struct Admin: Sendable {
        package var host = "0.0.0.0"
        /// 0 disables the admin endpoint.
        package var port = 9090
    }

    package enum LogFormat: String, Sendable { case json, text }

    package var kafka: Kafka
    package var apns: APNs
    package var relay: RelayConfiguration
    package var admin: Admin
    package var tracing: Tracing
    package var logLevel = "info"
    package var logFormat = LogFormat.json
    /// Every key read, with the text of its default (`SettingsReader.defaults`): what README.md and the
    /// chart are checked against.
    package private(set) var defaults: [String: String] = [:]
    /// Every key this configuration read or declared (for `apns-relay check`'s listing).
    package private(set) var knownKeys: Set<String> = []
    /// Settings that were given but take no effect as things are (the relay logs each as a warning at start).
    package private(set) var notices: [String] = []
    /// `APNS_RELAY_*` variables that are the kubelet's service links, not configuration (logged at debug).
    package private(set) var ignoredVariables: [String] = []

    /// Reads and checks the configuration.
    /// - Throws: `ConfigurationError` listing every problem found, each naming its key: values of the wrong
    ///   type or range, missing or contradictory settings, and keys no part of the relay reads.
    /// - Parameters:
    ///   - requireKafka: `false` for tools that only talk to APNs (`apns-relay send`): Kafka's settings are
    ///     still checked when given, but need not be.
    ///   - requireCredential: `false` for tools that only talk to Kafka (`apns-relay replay`): an APNs
    ///     credential is checked when given, but need not be.
    package init(reader sources: ConfigurationSources, requireKafka: Bool = true, requireCredential: Bool = true) throws {
        let settings = SettingsReader(sources: sources)

        let kafkaDefaults = Kafka()
        let servers = settings.list("kafka.bootstrapServers", default: kafkaDefaults.bootstrapServers)
        if requireKafka, servers.isEmpty, !settings.wasRefused("kafka.bootstrapServers") {
            settings.problem("configuration key 'kafka.bootstrapServers' (APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS) is required, e.g. broker-1:9092,broker-2:9092")
        }
        let exactlyOnce = settings.bool("kafka.exactlyOnce", default: kafkaDefaults.exactlyOnce)
        kafka = Kafka(
            bootstrapServers: servers,
            groupID: settings.string("kafka.groupId", default: kafkaDefaults.groupID),
            clientID: settings.string("kafka.clientId", default: kafkaDefaults.clientID),
            groupInstanceID: settings.string("kafka.groupInstanceId").flatMap { $0.isEmpty ? nil : $0 },
            sessionTimeout: settings.milliseconds("kafka.sessionTimeoutMs", default: kafkaDefaults.sessionTimeout, range: 1000...3_600_000),
            maxPollInterval: settings.milliseconds("kafka.maxPollIntervalMs", default: kafkaDefaults.maxPollInterval, range: 1000...86_400_000),
            autoOffsetReset: settings.oneOf("kafka.autoOffsetReset", default: kafkaDefaults.autoOffsetReset, [
                "earliest": .earliest, "latest": .latest,
            ]),
            assignmentStrategy: settings.oneOf("kafka.assignmentStrategy", default: kafkaDefaults.assignmentStrategy, [
                "cooperative-sticky": .cooperativeSticky, "range": KafkaPartitionAssignmentStrategy(assignors: ["range"]),
                "roundrobin": KafkaPartitionAssignmentStrategy(assignors: ["roundrobin"]),
            ]),
            statisticsInterval: settings.milliseconds("kafka.statisticsIntervalMs", default: kafkaDefaults.statisticsInterval),
            autoCommitInterval: settings.milliseconds("kafka.autoCommitIntervalMs", default: kafkaDefaults.autoCommitInterval, range: 10...60_000),
            exactlyOnce: exactlyOnce,
            transactionalID: settings.string("kafka.transactionalId").flatMap { $0.isEmpty ? nil : $0 },
            transactionInterval: settings.milliseconds("kafka.transactionIntervalMs", default: kafkaDefaults.transactionInterval, range: 10...60_000),
            transactionTimeout: settings.milliseconds("kafka.transactionTimeoutMs", default: kafkaDefaults.transactionTimeout, range: 1000...900_000),
            prefetchBytes: settings.int("kafka.prefetchBytes", default: kafkaDefaults.prefetchBytes, range: 4 * 1024 * 1024...1 << 30),
            linger: settings.milliseconds("kafka.lingerMs", default: exactlyOnce ? Kafka.exactlyOnceLinger : kafkaDefaults.linger, range: 0...1000),
            partitioner: settings.oneOf("kafka.partitioner", default: kafkaDefaults.partitioner, Dictionary(uniqueKeysWithValues: KafkaPartitioner.all.map { ($0.rawValue, $0) })),
            properties: settings.properties("kafka.properties"),
            consumerProperties: settings.properties("kafka.consumerProperties"),
            producerProperties: settings.properties("kafka.producerProperties")
        )
        var securityNotices: [String] = []
        kafka.security = Self.kafkaSecurity(
            settings, properties: [kafka.properties, kafka.consumerProperties, kafka.producerProperties], notices: &securityNotices)
        notices += securityNotices

        let topicDefaults = RelayConfiguration.Topics.defaults
        var topics = RelayConfiguration.Topics(
            input: settings.list("kafka.topics.input", default: topicDefaults.input),
            results: settings.string("kafka.topics.results", default: topicDefaults.results),
            removedTokens: settings.string("kafka.topics.removedTokens", default: topicDefaults.removedTokens),
            removedChannels: settings.string("kafka.topics.removedChannels", default: topicDefaults.removedChannels),
            deadLetters: settings.string("kafka.topics.deadLetters", default: topicDefaults.deadLetters)
        )
        topics.urgent = settings.list("kafka.topics.urgent", default: topicDefaults.urgent)
        if topics.input.isEmpty { settings.problem("configuration key 'kafka.topics.input' lists no topic") }
        if let both = topics.urgent.first(where: topics.input.contains) {
            let bulk = topics.input == topicDefaults.input ? "kafka.topics.input (the bulk lane; by default \(topicDefaults.input.joined(separator: ",")))" : "kafka.topics.input (the bulk lane)"
            settings.problem("topic '\(both)' is in both \(bulk) and kafka.topics.urgent (APNS_RELAY_KAFKA_TOPICS_URGENT); a topic belongs to one lane: list the bulk topics in kafka.topics.input (APNS_RELAY_KAFKA_TOPICS_INPUT) and the urgent ones in kafka.topics.urgent")
        }
        if let loop = topics.outputs.first(where: topics.inputs.contains) {
            let key = topics.urgent.contains(loop) ? "kafka.topics.urgent" : "kafka.topics.input"
            settings.problem("topic '\(loop)' is both an input (\(key)) and an output topic; the relay would consume its own records")
        }

        let (credentials, named, credentialNotices) = Self.credentials(settings, required: requireCredential)
        notices += credentialNotices
        let apnsDefaults = APNs()
        var endpoints: [APNsEnvironment: APNsClientConfiguration.Endpoint] = [:]
        var managementEndpoints: [APNsEnvironment: APNsClientConfiguration.Endpoint] = [:]
        for environment in APNsEnvironment.allCases {
            let endpoint = apnsDefaults.endpoints[environment]!
            endpoints[environment] = APNsClientConfiguration.Endpoint(
                host: settings.string("apns.\(environment.rawValue).host", default: endpoint.host),
                port: settings.int("apns.\(environment.rawValue).port", default: endpoint.port, range: 1...65535)
            )
            let management = apnsDefaults.managementEndpoints[environment]!
            managementEndpoints[environment] = APNsClientConfiguration.Endpoint(
                host: settings.string("apns.\(environment.rawValue).managementHost", default: management.host),
                port: settings.int("apns.\(environment.rawValue).managementPort", default: management.port, range: 1...65535)
            )
        }
        let minConnections = settings.int("apns.pool.minConnections", default: apnsDefaults.minConnections, range: 0...1000)
        let maxConnections = settings.int("apns.pool.maxConnections", default: apnsDefaults.maxConnections, range: 1...1000)
        if minConnections > maxConnections {
            settings.problem("apns.pool.minConnections (\(minConnections)) is above apns.pool.maxConnections (\(maxConnections))")
        }
        apns = APNs(
            credentials: credentials, endpoints: endpoints, caFile: settings.string("apns.caFile"),
            insecureSkipVerify: settings.bool("apns.insecureSkipVerify", default: apnsDefaults.insecureSkipVerify),
            minConnections: minConnections, maxConnections: maxConnections,
            connectTimeout: settings.milliseconds("apns.connectTimeoutMs", default: apnsDefaults.connectTimeout, range: 100...120_000),
            adaptiveConcurrency: settings.bool("apns.pool.adaptiveConcurrency", default: apnsDefaults.adaptiveConcurrency)
        )
        apns.managementEndpoints = managementEndpoints
        apns.ioThreads = settings.int("apns.ioThreads", default: apnsDefaults.ioThreads, range: 0...256)
        apns.batchWindow = settings.milliseconds("apns.batchWindowMs", default: apnsDefaults.batchWindow, range: 0...100)
        if let url = settings.string("apns.proxy.url") {
            do {
                apns.proxy = try HTTPProxy(url: url)
            } catch {
                settings.problem("apns.proxy.url: \(error.message)")
            }
        }
        apns.proxyCredentialsFile = settings.string("apns.proxy.credentialsFile")
        if apns.proxyCredentialsFile != nil, apns.proxy == nil, !settings.wasRefused("apns.proxy.url") {
            settings.problem("apns.proxy.credentialsFile is set but apns.proxy.url is not")
        }
        let reload = settings.milliseconds("apns.keyReloadIntervalMs", default: apnsDefaults.keyReloadInterval ?? .zero, range: 0...3_600_000)
        apns.keyReloadInterval = reload > .zero ? reload : nil
        let idle = settings.milliseconds("apns.pool.idleTimeoutMs", default: apnsDefaults.idleTimeout ?? .zero, range: 0...86_400_000)
        apns.idleTimeout = idle > .zero ? idle : nil

        var relay = RelayConfiguration(topics: topics)
        // Each key's default is the value RelayConfiguration starts with.
        relay.maxEventBytes = settings.int("relay.maxEventBytes", default: relay.maxEventBytes, range: 1...(64 * 1024))
        let maxAge = settings.milliseconds("relay.maxEventAgeMs", default: .zero, range: 0...(365 * 86_400_000))
        relay.maxEventAge = maxAge > .zero ? maxAge : nil
        relay.maxDeadLetterBytes = settings.int("relay.maxDeadLetterBytes", default: relay.maxDeadLetterBytes, range: 1024...(64 << 20))
        relay.requestTimeout = settings.milliseconds("relay.requestTimeoutMs", default: relay.requestTimeout, range: 100...300_000)
        apns.congestionLatency = relay.requestTimeout / 4
        relay.inFlight.maxEvents = settings.int("relay.maxInFlightEvents", default: relay.inFlight.maxEvents, range: 1...1_000_000)
        relay.inFlight.maxBytes = settings.int("relay.maxInFlightBytes", default: relay.inFlight.maxBytes, range: 1024...(8 << 30))
        let sharePercent = settings.int(
            "relay.lanes.urgentShare", default: Int((relay.inFlight.urgentShare * 100).rounded()),
            range: 0...Int((InFlightGate.Limits.maxUrgentShare * 100).rounded()))
        relay.inFlight.urgentShare = Double(sharePercent) / 100
        if settings.isSet("relay.lanes.urgentShare"), topics.urgent.isEmpty {
            notices.append("relay.lanes.urgentShare is set (\(sharePercent) %) but kafka.topics.urgent lists no topic: nothing is reserved for an urgent lane")
        }
        apns.urgentShare = relay.effectiveInFlight.urgentShare
        relay.drainTimeout = settings.milliseconds("relay.drainTimeoutMs", default: relay.drainTimeout, range: 0...600_000)
        relay.revocationDrainTimeout = settings.milliseconds("relay.revocationDrainTimeoutMs", default: relay.revocationDrainTimeout, range: 0...600_000)
        relay.retry.maxAttempts = settings.int("relay.retry.maxAttempts", default: relay.retry.maxAttempts, range: 1...100)
        relay.retry.initialBackoff = settings.milliseconds("relay.retry.initialBackoffMs", default: relay.retry.initialBackoff, range: 1...600_000)
        relay.retry.maxBackoff = settings.milliseconds("relay.retry.maxBackoffMs", default: relay.retry.maxBackoff, range: 1...3_600_000)
        relay.tokenRemoval.badDeviceTokenPercent = settings.int("relay.tokenRemoval.badDeviceTokenPercent", default: relay.tokenRemoval.badDeviceTokenPercent, range: 1...100)
        relay.tokenRemoval.minimumSample = settings.int("relay.tokenRemoval.minimumSample", default: relay.tokenRemoval.minimumSample, range: 1...1_000_000)
        relay.tokenRemoval.window = settings.milliseconds("relay.tokenRemoval.windowMs", default: relay.tokenRemoval.window, range: 1000...3_600_000)
        if kafka.exactlyOnce {
            var exactlyOnce = RelayConfiguration.ExactlyOnce(transactionalID: kafka.transactionalID ?? Self.defaultTransactionalID(groupID: kafka.groupID))
            exactlyOnce.interval = kafka.transactionInterval
            exactlyOnce.transactionTimeout = kafka.transactionTimeout
            if exactlyOnce.transactionTimeout <= exactlyOnce.interval + relay.requestTimeout {
                settings.problem("kafka.transactionTimeoutMs (\(kafka.transactionTimeout.components.seconds) s) must exceed kafka.transactionIntervalMs plus relay.requestTimeoutMs: an open transaction would time out before it could commit")
            }
            relay.exactlyOnce = exactlyOnce
        } else if kafka.transactionalID != nil {
            notices.append("kafka.transactionalId is set but kafka.exactlyOnce is off: results are published at least once, without transactions")
        }
        relay.kafkaIdentity = .init(summary: kafka.security.summary, keys: kafka.security.keysToCheck)
        self.relay = relay

        let adminDefaults = Admin()
        admin = Admin(
            host: settings.string("admin.host", default: adminDefaults.host),
            port: settings.int("admin.port", default: adminDefaults.port, range: 0...65535)
        )
        var tracing = Tracing()
        if let endpoint = settings.string("tracing.otlpEndpoint") {
            if endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://") {
                tracing.otlpEndpoint = endpoint
            } else {
                settings.invalid("tracing.otlpEndpoint", "'\(endpoint)' is not an http:// or https:// URL, e.g. http://otel-collector:4318")
            }
        }
        tracing.serviceName = settings.string("tracing.serviceName", default: tracing.serviceName)
        tracing.sampleRatio = settings.double("tracing.sampleRatio", default: tracing.sampleRatio, range: 0...1)
        tracing.parentIsProducer = settings.bool("tracing.parentIsProducer", default: tracing.parentIsProducer)
        tracing.maxQueueSize = settings.int("tracing.maxQueueSize", default: tracing.maxQueueSize, range: 1...1_000_000)
        tracing.exportTimeout = settings.milliseconds("tracing.exportTimeoutMs", default: tracing.exportTimeout, range: 1...600_000)
        self.tracing = tracing
        logLevel = settings.oneOf("log.level", default: logLevel, Dictionary(uniqueKeysWithValues: ["trace", "debug", "info", "notice", "warning", "error", "critical"].map { ($0, $0) }))
        logFormat = settings.oneOf("log.format", default: logFormat, ["json": .json, "text": .text])
        defaults = settings.defaults
        settings.checkUnknownKeys(credentials: named)
        knownKeys = settings.known
        ignoredVariables = settings.ignoredVariables
        try settings.checkNoProblems()
    }

    /// `kafka.transactionalId`'s default: the group id and the host name, which a restarted pod of a
    /// StatefulSet keeps (a Deployment's new pod gets a new name: set the key, or accept that a crashed
    /// pod's open transaction holds `read_committed` readers back until `kafka.transactionTimeoutMs`).
    package static func defaultTransactionalID(groupID: String) -> String {
        var name = [CChar](repeating: 0, count: 256)
        let host = gethostname(&name, name.count) == 0 ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "relay"
        return "\(groupID)-\(host)"
    }

    /// The layered sources: `overrides` (flags, `key=value`), then `APNS_RELAY_*` variables, then the file.
    ///
    /// - Parameters:
    ///   - file: a `.yaml`/`.yml` or `.json` file, or `nil`.
    ///   - environment: the process environment; only `APNS_RELAY_`-prefixed variables are read.
    /// - Throws: `RelayError` naming the file when it cannot be read or parsed.
    package static func reader(file: String?, environment: [String: String], overrides: [String: String]) async throws -> ConfigurationSources {
        try await ConfigurationSources(file: file, environment: environment, overrides: overrides)
    }

    /// `kafka.bootstrapServers` → `KAFKA_BOOTSTRAP_SERVERS` (the variable name, without `APNS_RELAY_`).
    package static func environmentName(forKey key: String) -> String {
        var name = ""
        var previousWasLower = false
        for character in key {
            if character == "." || character == "-" {
                name.append("_")
                previousWasLower = false
            } else if character.isUppercase {
                if previousWasLower { name.append("_") }
                name.append(character)
                previousWasLower = false
            } else {
                name.append(contentsOf: character.uppercased())
                previousWasLower = character.isLowercase || character.isNumber
            }
        }
        return name
    }
}
