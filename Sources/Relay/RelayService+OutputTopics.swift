extension RelayService {
    /// How long the start waits for the cluster's answer about the output topics.
    static let outputTopicsTimeout: Duration = .seconds(5)

    /// Has the producer look the output topics up before the first event is taken (``KafkaProducer/learnTopics(_:timeout:)``):
    /// otherwise librdkafka asks about each only after its first record, at its next once-a-second topic
    /// scan, and the first results of a start wait up to a second. Neither outcome stops the start: a topic
    /// the cluster does not have yet may be created by an operator (or by the broker on the first record),
    /// and an unreachable cluster shows in the consumer's own errors.
    func learnOutputTopics() async {
        let topics = configuration.topics.outputs
        do {
            let missing = try await producer.learnTopics(topics, timeout: Self.outputTopicsTimeout)
            for (topic, error) in missing.sorted(by: { $0.key < $1.key }) {
                logger.warning("output topic not found in Kafka: records for it wait until it exists (or fail after message.timeout.ms)",
                               metadata: ["topic": "\(topic)", "error": "\(error)"])
            }
        } catch {
            logger.warning("could not look the output topics up at start; the first records to each may wait up to a second longer",
                           metadata: ["topics": "\(topics)", "error": "\(error)"])
        }
    }
}
