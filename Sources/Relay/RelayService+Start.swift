import Kafka
import ServiceSupport

/// The steps of `run()` before the first event is taken, besides starting the clients.
extension RelayService {
    /// Exactly-once mode: registers the transactional id (InitProducerId), which fences an older instance
    /// with the same id and aborts its open transaction. Does nothing otherwise.
    func registerTransactionalID() async throws {
        guard let exactlyOnce = configuration.exactlyOnce else { return }
        do {
            try await producer.initTransactions(timeout: Self.initTransactionsTimeout)
        } catch {
            throw RelayError("exactly-once: Kafka did not register the transactional id '\(exactlyOnce.transactionalID)' (InitProducerId): \(error)")
        }
        logger.info("exactly-once results: transactional producer ready", metadata: ["transactionalId": "\(exactlyOnce.transactionalID)"])
    }

    /// Fails the start when a broker has already refused the relay's SASL credentials or TLS certificate.
    func refuseStartWithRefusedCredentials() throws {
        let refusal = producer.credentialsRefused.value ?? consumer.credentialsRefused.value
        if let error = refusal {
            throw RelayError(Self.credentialsRefusedMessage(configuration.kafkaIdentity, error))
        }
    }

    /// Waits for a broker's first refusal of the relay's credentials. Before the group was joined the credential
    /// never worked: retrying cannot help, and a restart (Kubernetes' back-off) reads the files again, so the
    /// relay stops. Once it has worked, a refusal is a rotation under way: librdkafka retries, and the password
    /// file is read again.
    func actOnRefusedCredentials(_ refused: Latch<KafkaError>, failure: Latch<String>) async {
        guard let error = await refused.wait() else { return }
        if !consumer.health.isJoined {
            failure.set(Self.credentialsRefusedMessage(configuration.kafkaIdentity, error))
        } else {
            logger.error("Kafka refused the relay's credentials after they had worked; retrying (a rotated password file is read again)",
                         metadata: ["kafka.identity": "\(configuration.kafkaIdentity.summary)", "error": "\(error)"])
        }
    }

    /// What the relay says when Kafka refuses it: who it said it was and where that is configured.
    static func credentialsRefusedMessage(_ identity: RelayConfiguration.KafkaIdentity, _ error: KafkaError) -> String {
        "Kafka refused the relay's credentials (\(identity.summary)): \(error.message). Check \(identity.keys)"
    }

    /// How long the start waits for the cluster's answer about the results topic.
    static let resultsTopicTimeout: Duration = .seconds(5)

    /// Has the producer look the results topic up before the first event is taken (``KafkaProducer/learnTopics(_:timeout:)``):
    /// otherwise librdkafka asks about it only after the first result, at its next once-a-second topic scan,
    /// and every event of the first second waits for that. Only the results topic, which every event writes
    /// to at once: the others may stay unused for long (removed channels), and a broker that creates topics on
    /// demand would create them now. Neither outcome stops the start: a topic that is not usable yet may be
    /// created by an operator, or get its leader, and an unreachable cluster shows in the consumer's errors.
    func learnResultsTopic() async {
        let topic = configuration.topics.results
        do {
            guard let code = try await producer.learnTopics([topic], timeout: Self.resultsTopicTimeout)[topic] else { return }
            let why = switch code {
            case .unknownTopicOrPartition: "Kafka does not have it; create it, or fix kafka.topics.results"
            case .leaderNotAvailable: "it has no leader yet (just created, or its brokers are down)"
            case .topicAuthorizationFailed: "this principal may not describe it (Kafka ACLs)"
            default: code.explanation
            }
            logger.warning("results topic not usable at start: results wait until it is (retried, nothing is lost)",
                           metadata: ["topic": "\(topic)", "reason": "\(why)", "error": "\(code)"])
        } catch {
            logger.warning("could not look the results topic up at start; the first results may wait up to a second longer",
                           metadata: ["topic": "\(topic)", "error": "\(error)"])
        }
    }
}
