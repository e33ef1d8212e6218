import APNsClient
import APNsCore
import Foundation
import Kafka
import Logging
import ServiceLifecycle

extension APNsClient: NotificationSender {
    public func authentication(forTopic topic: String) -> AuthenticationKind? {
        switch configuration.credential {
        case .token: .token
        case .certificate: .certificate
        }
    }
}

extension APNsClientError: TransportFailureError {}

/// Builds the running parts of the relay from its configuration: the Kafka clients, the APNs client and
/// the `RelayService`, ready to run in a `ServiceGroup`.
public struct RelayApp: Sendable {
    public let relay: RelayService
    /// One client per configured credential, in configuration order.
    public let clients: [APNsClient]
    public let consumer: KafkaConsumer
    public let producer: KafkaProducer

    /// - Throws: a clear error for an unreadable key or certificate, or Kafka settings librdkafka refuses.
    public init(configuration: RelayAppConfiguration, logger: Logger) throws {
        var consumerConfiguration = KafkaConsumerConfiguration(
            bootstrapServers: configuration.kafka.bootstrapServers, groupID: configuration.kafka.groupID
        )
        consumerConfiguration.clientID = configuration.kafka.clientID
        consumerConfiguration.sessionTimeout = configuration.kafka.sessionTimeout
        consumerConfiguration.maxPollInterval = configuration.kafka.maxPollInterval
        consumerConfiguration.partitionAssignmentStrategy = configuration.kafka.assignmentStrategy
        // The consumer holds revoked partitions a little longer than the relay drains them.
        consumerConfiguration.revocationDrainTimeout = configuration.relay.revocationDrainTimeout + .seconds(5)
        // librdkafka prefetches up to 64 MB and 100k messages per partition by default; the relay already
        // buffers and bounds its own work, so a smaller prefetch keeps memory small with many partitions.
        let prefetch = ["queued.max.messages.kbytes": "8192", "queued.min.messages": "10000"]
        consumerConfiguration.additionalProperties = prefetch
            .merging(configuration.kafka.properties) { $1 }
            .merging(configuration.kafka.consumerProperties) { $1 }
        consumerConfiguration.statisticsInterval = configuration.kafka.statisticsInterval > .zero ? configuration.kafka.statisticsInterval : nil
        consumerConfiguration.autoCommitInterval = configuration.kafka.autoCommitInterval
        consumerConfiguration.statisticsHandler = ConsumerLagGauges.handler()

        var producerConfiguration = KafkaProducerConfiguration(bootstrapServers: configuration.kafka.bootstrapServers)
        producerConfiguration.clientID = configuration.kafka.clientID
        producerConfiguration.additionalProperties = configuration.kafka.properties.merging(configuration.kafka.producerProperties) { $1 }

        consumer = try KafkaConsumer(configuration: consumerConfiguration, logger: logger)
        producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)
        var routes: [CredentialRouter.Route] = []
        var clients: [APNsClient] = []
        for credential in configuration.apns.credentials {
            var credentialLogger = logger
            credentialLogger[metadataKey: "credential"] = "\(credential.name)"
            let client = try APNsClient(
                configuration: try Self.clientConfiguration(configuration.apns, credential: credential, logger: logger),
                logger: credentialLogger
            )
            clients.append(client)
            routes.append(CredentialRouter.Route(name: credential.name, patterns: credential.topics, authentication: client.authentication(forTopic: "") ?? .token, sender: client))
        }
        self.clients = clients
        relay = RelayService(
            configuration: configuration.relay, consumer: consumer, producer: producer,
            sender: CredentialRouter(routes: routes), logger: logger
        )
    }

    /// The APNs client's configuration; reads the key or certificate files.
    public static func clientConfiguration(
        _ apns: RelayAppConfiguration.APNs, credential configured: RelayAppConfiguration.APNs.Credential, logger: Logger
    ) throws -> APNsClientConfiguration {
        let credential: APNsClientConfiguration.Credential
        switch configured.auth {
        case .token(let keyID, let teamID, let keyFile, let epoch):
            let pem: String
            do {
                pem = try String(contentsOfFile: keyFile, encoding: .utf8)
            } catch {
                throw RelayError("cannot read the APNs signing key file '\(keyFile)': \(error.localizedDescription)")
            }
            credential = .token(try ProviderTokenSigner(pem: pem, keyID: keyID, teamID: teamID, rotationEpoch: epoch))
        case .certificate(.pem(let certificateFile, let privateKeyFile)):
            credential = .certificate(.pem(certificateFile: certificateFile, privateKeyFile: privateKeyFile))
        case .certificate(.pkcs12(let file, let passphraseFile)):
            var passphrase = ""
            if let passphraseFile {
                do {
                    passphrase = try String(contentsOfFile: passphraseFile, encoding: .utf8).trimmingCharacters(in: .newlines)
                } catch {
                    throw RelayError("cannot read the certificate passphrase file '\(passphraseFile)'")
                }
            }
            credential = .certificate(.pkcs12(file: file, passphrase: passphrase))
        }
        let trust: ServerTrust
        if apns.insecureSkipVerify {
            logger.critical("APNs server certificate verification is OFF (apns.insecureSkipVerify); never do this in production")
            trust = .insecureNoVerification
        } else if let caFile = apns.caFile {
            trust = .caFile(caFile)
        } else {
            trust = .systemTrustStore
        }
        var client = APNsClientConfiguration(credential: credential, trust: trust)
        client.endpoints = apns.endpoints
        client.pool.minConnections = apns.minConnections
        client.pool.maxConnections = apns.maxConnections
        client.connection.connectTimeout = apns.connectTimeout
        return client
    }
}

/// Closes the APNs clients' connections when the service group shuts down (after the relay drained).
public struct APNsClientService: Service {
    let clients: [APNsClient]

    public init(clients: [APNsClient]) {
        self.clients = clients
    }

    public func run() async throws {
        try? await gracefulShutdown()
        await withDiscardingTaskGroup { group in
            for client in clients {
                group.addTask { await client.shutdown(deadline: .now + .seconds(5)) }
            }
        }
    }
}
