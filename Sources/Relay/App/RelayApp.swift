import APNsClient
import APNsCore
import Foundation
import Kafka
import Logging
import ServiceLifecycle

extension APNsClient: NotificationSender {}
extension APNsClientError: TransportFailureError {}

/// Builds the running parts of the relay from its configuration: the Kafka clients, the APNs client and
/// the `RelayService`, ready to run in a `ServiceGroup`.
public struct RelayApp: Sendable {
    public let relay: RelayService
    public let apns: APNsClient
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
        consumerConfiguration.additionalProperties = configuration.kafka.properties.merging(configuration.kafka.consumerProperties) { $1 }
        consumerConfiguration.statisticsInterval = configuration.kafka.statisticsInterval > .zero ? configuration.kafka.statisticsInterval : nil
        consumerConfiguration.autoCommitInterval = configuration.kafka.autoCommitInterval
        consumerConfiguration.statisticsHandler = ConsumerLagGauges.handler()

        var producerConfiguration = KafkaProducerConfiguration(bootstrapServers: configuration.kafka.bootstrapServers)
        producerConfiguration.clientID = configuration.kafka.clientID
        producerConfiguration.additionalProperties = configuration.kafka.properties.merging(configuration.kafka.producerProperties) { $1 }

        consumer = try KafkaConsumer(configuration: consumerConfiguration, logger: logger)
        producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)
        apns = try APNsClient(configuration: try Self.clientConfiguration(configuration.apns, logger: logger), logger: logger)
        relay = RelayService(configuration: configuration.relay, consumer: consumer, producer: producer, sender: apns, logger: logger)
    }

    /// The APNs client's configuration; reads the key or certificate files.
    public static func clientConfiguration(_ apns: RelayAppConfiguration.APNs, logger: Logger) throws -> APNsClientConfiguration {
        let credential: APNsClientConfiguration.Credential
        switch apns.auth {
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

/// Closes the APNs client's connections when the service group shuts down (after the relay drained).
public struct APNsClientService: Service {
    let client: APNsClient

    public init(client: APNsClient) {
        self.client = client
    }

    public func run() async throws {
        try? await gracefulShutdown()
        await client.shutdown(deadline: .now + .seconds(5))
    }
}
