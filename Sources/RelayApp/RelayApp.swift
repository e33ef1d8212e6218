import APNsClient
import APNsCore
import Foundation
import Kafka
import Logging
import Relay
import ServiceLifecycle
import ServiceSupport

extension APNsClient: NotificationSender {
    // `holdUnsentRequests()` is the client's own.
    package func send(
        _ notification: APNsNotification, deadline: MonotonicInstant,
        completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    ) {
        sendReportingAnyError(notification, deadline: deadline, completion: completion)
    }
    // `send(_:deadline:now:answeringTo:)` is the client's own: the answer goes to the handler, no closure.

    /// How this client authenticates.
    package var authentication: AuthenticationKind {
        switch configuration.credential {
        case .token: .token
        case .certificate: .certificate
        }
    }
}

extension APNsClientError: TransportFailureError {}

/// Builds the running parts of the relay from its configuration: the Kafka clients, the APNs client and
/// the `RelayService`, ready to run in a `ServiceGroup`.
package struct RelayApp: Sendable {
    package let relay: RelayService
    /// The event loops every APNs client runs on: the first service, so it stops after the clients.
    package let eventLoops: APNsEventLoopGroup
    /// One client per configured credential, in configuration order.
    package let clients: [APNsClient]
    package let consumer: KafkaConsumer
    package let producer: KafkaProducer
    /// Reads token credentials' key files again for a new key (`nil`: none to watch, or turned off).
    package let keyWatcher: SigningKeyWatcher?
    /// Watches client certificates' and the CA file's expiry (`nil`: none).
    package let certificateWatcher: CertificateExpiryWatcher?
    /// Exports spans (`nil`: tracing is off).
    package let tracingExporter: (any Service)?
    /// Reads `kafka.sasl.passwordFile` again for a new password (`nil`: no password, or turned off).
    package let passwordWatcher: KafkaPasswordWatcher?

    /// Loads the credentials first (key and certificate files, the CA file), then creates the Kafka
    /// clients: a credential problem then fails the start-up before librdkafka starts connecting (and
    /// logging) and before a client exists that would be released without being closed.
    /// - Throws: a `RelayError` naming the file and its configuration key for an unreadable key, certificate
    ///   or CA file; a `KafkaError` for Kafka settings librdkafka refuses.
    package init(
        configuration: RelayAppConfiguration, logger: Logger, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        for notice in configuration.notices { logger.warning("\(notice)") }
        if !configuration.ignoredVariables.isEmpty {
            logger.debug("ignored the kubelet's service-link variables (not configuration): \(configuration.ignoredVariables.joined(separator: ", "))")
        }
        var credentials: [CredentialDirectory.Credential] = []
        var clients: [APNsClient] = []
        let eventLoops = try Self.eventLoops(configuration.apns)
        self.eventLoops = eventLoops
        logger.info("sized for \(CPUBudget.current): \(eventLoops.loopCount) APNs event loops (apns.ioThreads \(configuration.apns.ioThreads == 0 ? "0: one per 4 CPUs, at least 1" : String(configuration.apns.ioThreads)))")
        for credential in configuration.apns.credentials {
            var credentialLogger = logger
            credentialLogger[metadataKey: "credential"] = "\(credential.name)"
            let client = try Self.client(configuration.apns, credential: credential, eventLoops: eventLoops, logger: credentialLogger)
            clients.append(client)
            credentials.append(CredentialDirectory.Credential(
                name: credential.name, patterns: credential.topics, environments: credential.environments,
                authentication: client.authentication, sender: client))
        }
        self.clients = clients
        var watched: [SigningKeyWatcher.Watched] = []
        for (credential, client) in zip(configuration.apns.credentials, clients) {
            guard case .token(let signer) = client.configuration.credential,
                  case .token(let keyID, _, let keyFile, _) = credential.auth else { continue }
            watched.append(.init(credential: credential.name, prefix: credential.keyPrefix, signer: signer, keyFile: keyFile, keyID: keyID))
        }
        keyWatcher = configuration.apns.keyReloadInterval.flatMap { interval in
            watched.isEmpty ? nil : SigningKeyWatcher(watching: watched, interval: interval, logger: logger)
        }

        certificateWatcher = CertificateExpiryWatcher(
            clients: zip(configuration.apns.credentials, clients).map { ($0.name, $1) },
            caFile: configuration.apns.insecureSkipVerify ? nil : configuration.apns.caFile, logger: logger)

        // The Kafka secrets are read here too, before a client exists.
        let connection = try Self.connectionProperties(configuration.kafka)
        let consumerConfiguration = Self.consumerConfiguration(configuration, connection: connection)
        let producerConfiguration = Self.producerConfiguration(configuration, connection: connection)

        // Neither starts a thread here: the relay starts both in its `run()`.
        // Here, once the credentials are read: a start that fails before the Kafka clients exist names no library.
        logger.info("apns-relay \(ProductVersion.string) with \(LinkedLibraries.summary)")
        consumer = try KafkaConsumer(configuration: consumerConfiguration, logger: logger)
        producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)
        passwordWatcher = Self.passwordWatcher(configuration.kafka.security, connection: connection, consumer: consumer, producer: producer, logger: logger)
        let tracing = try Self.tracing(configuration, environment: environment, logger: logger)
        tracingExporter = tracing?.service
        relay = RelayService(
            configuration: configuration.relay, consumer: consumer, producer: producer,
            credentials: CredentialDirectory(credentials), logger: logger, tracing: tracing?.tracing
        )
    }

    /// `kafka.prefetchBytes` as librdkafka's queue bound and fetch response size, in bytes: the response is a
    /// third of the budget, at most 2 MiB; the queue is the rest.
    package static func prefetchSplit(_ budget: Int) -> (queued: Int, response: Int) {
        let response = min(budget / 3, 2 * 1024 * 1024)
        return (budget - response, response)
    }

    /// `queued.min.messages`: as many events of the largest legal size as the queue's budget holds, between
    /// 64 (a refill per few records would cost more than it saves) and librdkafka's 10,000 the relay used to set.
    package static func prefetchRecords(queued: Int, maxEventBytes: Int) -> Int {
        min(10_000, max(64, queued / max(1, maxEventBytes)))
    }

    /// Each lane's consumer buffer, in bytes (`KafkaConsumerConfiguration.bufferBytes`): a quarter of the
    /// in-flight budget, at least 1 MiB.
    package static func laneBufferBytes(_ inFlightBytes: Int) -> Int {
        max(1 << 20, inFlightBytes / 4)
    }

    /// The producer's settings: the relay's keys, then `kafka.properties` and `kafka.producerProperties`
    /// (which may repeat a key's value but not contradict it).
    ///
    /// - Parameter connection: ``connectionProperties(_:)``: how to reach and authenticate to the brokers.
    package static func producerConfiguration(_ configuration: RelayAppConfiguration, connection: [String: String] = [:]) -> KafkaProducerConfiguration {
        var producerConfiguration = KafkaProducerConfiguration(bootstrapServers: configuration.kafka.bootstrapServers)
        producerConfiguration.clientID = configuration.kafka.clientID
        producerConfiguration.linger = configuration.kafka.linger
        producerConfiguration.partitioner = configuration.kafka.partitioner
        producerConfiguration.additionalProperties = connection.merging(configuration.kafka.properties) { $1 }.merging(configuration.kafka.producerProperties) { $1 }
        if let exactlyOnce = configuration.relay.exactlyOnce {
            producerConfiguration.transactionalID = exactlyOnce.transactionalID
            producerConfiguration.transactionTimeout = exactlyOnce.transactionTimeout
        }
        return producerConfiguration
    }

    /// The consumer's settings: the relay's keys, then librdkafka's prefetch from `kafka.prefetchBytes`,
    /// then `kafka.properties` and `kafka.consumerProperties`, which override anything before them.
    package static func consumerConfiguration(_ configuration: RelayAppConfiguration, connection: [String: String] = [:]) -> KafkaConsumerConfiguration {
        var consumerConfiguration = KafkaConsumerConfiguration(
            bootstrapServers: configuration.kafka.bootstrapServers, groupID: configuration.kafka.groupID
        )
        consumerConfiguration.clientID = configuration.kafka.clientID
        consumerConfiguration.groupInstanceID = configuration.kafka.groupInstanceID
        consumerConfiguration.sessionTimeout = configuration.kafka.sessionTimeout
        consumerConfiguration.maxPollInterval = configuration.kafka.maxPollInterval
        consumerConfiguration.autoOffsetReset = configuration.kafka.autoOffsetReset
        consumerConfiguration.partitionAssignmentStrategy = configuration.kafka.assignmentStrategy
        consumerConfiguration.urgentTopics = Set(configuration.relay.topics.urgent)
        // The consumer holds revoked partitions a little longer than the relay drains them.
        consumerConfiguration.revocationDrainTimeout = configuration.relay.revocationDrainTimeout + .seconds(5)
        // librdkafka's prefetch, one budget for every partition (`kafka.prefetchBytes`):
        // - The consumer forwards every partition of a topic to one queue, so `queued.max.messages.kbytes`
        //   and `queued.min.messages` bound the records waiting for all of a topic's partitions together
        //   (librdkafka's defaults, 64 MB and 100k messages, would be per partition); each input topic has
        //   a queue, so that one topic's backlog never holds another's records back (the lane's topics are
        //   read in turn). While the relay is the bottleneck the
        //   queue fills and librdkafka 2.0.2 would look again only up to a second later; the consumer wakes
        //   its fetcher once the relay has drained a full queue to a quarter (`FetchNudger`), so the queue
        //   only has to cover that refill (Benchmarks/README.md, session 29: 8 MiB / 10k gave the same
        //   50–56k events/s as 18 MiB / 30k, and 13 MiB less at the peak; without the nudge 8 MB / 10k gave
        //   16k). The count bounds librdkafka's per-record overhead (a few hundred bytes each) when records
        //   are small.
        // - Those bounds are checked before a fetch: the response comes on top, up to `fetch.max.bytes`, which
        //   librdkafka otherwise sets to the whole queue budget. With a backlog every fetch comes back full,
        //   so the response is what the peak holds beyond the queue: a third of the budget, at most 2 MiB
        //   (1M events on 128 partitions peaked at 128 MiB RSS with 8 MiB responses, 107 MiB with 2 MiB,
        //   at the same throughput; Benchmarks/README.md, issue #39). The rest of the budget is the queue.
        //   `queued.max.messages.kbytes` counts keys and values only, not headers: records whose headers are
        //   most of their bytes would fill the queue far past the budget (60 KiB of headers on a 1 KiB value:
        //   5,500 records, 340 MiB). So the count bounds it too: the budget holds that many events of the
        //   largest legal size (`relay.maxEventBytes`); see `prefetchRecords`.
        let (queued, response) = prefetchSplit(configuration.kafka.prefetchBytes)
        let prefetch = [
            "queued.max.messages.kbytes": String(queued / 1024),
            "queued.min.messages": String(prefetchRecords(queued: queued, maxEventBytes: configuration.relay.maxEventBytes)),
            "fetch.max.bytes": String(response),
            // librdkafka has one fetch out per broker: one that waits on partitions with nothing new (an idle
            // urgent topic) holds back the refill of a drained one for that long (librdkafka's default: 500).
            "fetch.wait.max.ms": "100",
        ]
        // The consumer's own buffer, per lane, in bytes as well as records: a quarter of the in-flight budget.
        consumerConfiguration.bufferBytes = laneBufferBytes(configuration.relay.inFlight.maxBytes)
        consumerConfiguration.headerLimits = configuration.relay.headerLimits
        consumerConfiguration.additionalProperties = prefetch
            .merging(connection) { $1 }
            .merging(configuration.kafka.properties) { $1 }
            .merging(configuration.kafka.consumerProperties) { $1 }
        consumerConfiguration.statisticsInterval = configuration.kafka.statisticsInterval > .zero ? configuration.kafka.statisticsInterval : nil
        consumerConfiguration.autoCommitInterval = configuration.kafka.autoCommitInterval
        // Exactly-once: offsets are committed only in the transactions that carry their records.
        consumerConfiguration.autoCommit = configuration.relay.exactlyOnce == nil
        consumerConfiguration.statisticsHandler = ConsumerLagGauges.handler()
        return consumerConfiguration
    }

    /// The settings every Kafka client of the relay connects with: `kafka.sasl.*` and `kafka.tls.*` (the
    /// secrets read from their files), then `kafka.properties`, which may not set what those keys decide.
    /// - Throws: `RelayError` naming the key and file of a secret that cannot be read.
    package static func connectionProperties(_ kafka: RelayAppConfiguration.Kafka) throws -> [String: String] {
        try kafka.security.librdkafkaProperties().merging(kafka.properties) { $1 }
    }

    /// A watcher for `kafka.sasl.passwordFile`, when there is one to watch.
    static func passwordWatcher(
        _ security: RelayAppConfiguration.KafkaSecurity, connection: [String: String], consumer: KafkaConsumer, producer: KafkaProducer, logger: Logger
    ) -> KafkaPasswordWatcher? {
        guard let interval = security.passwordReloadInterval, let sasl = security.sasl, let username = sasl.username,
              let passwordFile = sasl.passwordFile, let password = connection["sasl.password"] else { return nil }
        return KafkaPasswordWatcher(
            username: username, passwordFile: passwordFile, password: password,
            clients: [
                { username, password in try consumer.setSASLCredentials(username: username, password: password) },
                { username, password in try producer.setSASLCredentials(username: username, password: password) },
            ],
            interval: interval, logger: logger)
    }

    /// The services in start order: the APNs event loops, the span exporter, the APNs clients, the key
    /// watcher, `extra` (e.g. the admin server), then the relay. A `ServiceGroup` stops them in reverse: the
    /// relay drains first, the APNs connections close, the exporter sends the last spans, and the loops'
    /// threads end.
    package func services(adding extra: [any Service] = []) -> [any Service] {
        [eventLoops] + (tracingExporter.map { [$0] } ?? []) + [APNsClientService(clients: clients)] + (keyWatcher.map { [$0] } ?? []) + (certificateWatcher.map { [$0] } ?? []) + (passwordWatcher.map { [$0] } ?? []) + extra + [relay]
    }

    /// A group running `services(adding:)`. It installs no signal handlers: the caller decides how a
    /// shutdown is triggered.
    package func serviceGroup(adding extra: [any Service] = [], logger: Logger) -> ServiceGroup {
        ServiceGroup(configuration: ServiceGroupConfiguration(
            services: services(adding: extra).map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
            logger: logger
        ))
    }
}

/// Closes the APNs clients' connections when the service group shuts down (after the relay drained).
package struct APNsClientService: Service {
    let clients: [APNsClient]

    package init(clients: [APNsClient]) {
        self.clients = clients
    }

    package func run() async throws {
        try? await gracefulShutdown()
        await withDiscardingTaskGroup { group in
            for client in clients {
                group.addTask { await client.shutdown(deadline: .now + .seconds(5)) }
            }
        }
    }
}
