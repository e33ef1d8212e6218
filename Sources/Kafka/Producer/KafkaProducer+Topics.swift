import CRdKafka
import ServiceSupport

extension KafkaProducer {
    /// Looks `topics` up now (their partitions and leaders), so that the first records to each go out at once.
    ///
    /// librdkafka 2.0 learns about a topic named in a record only when the first such record is produced, and
    /// asks the cluster about it only at its next topic scan (once a second): after a start, the first
    /// results — and every event waiting for them — waited up to a second (0.84 s in the 40 ms RTT benchmark,
    /// Benchmarks/README.md session 30). Blocks a dedicated thread for up to `timeout`. A topic handle makes a
    /// topic one librdkafka knows locally (and sends its own leader query); one metadata request then asks
    /// about every such topic. librdkafka keeps every local topic for the client's life, and updates them
    /// from the answer before the call returns.
    ///
    /// The request is the producer's own: with `allow.auto.create.topics` (librdkafka's default for a
    /// producer) a broker that creates topics on demand creates them now, as the first record would have.
    /// - Returns: each topic the cluster reported an error for (unknown, no leader yet, not authorized).
    ///   Records for such a topic wait in librdkafka until it is usable, or are refused after
    ///   `topic.metadata.propagation.max.ms` if it never appears.
    /// - Throws: ``KafkaError`` `broker` when no broker answered within `timeout`.
    package func learnTopics(_ topics: [String], timeout: Duration) async throws(KafkaError) -> [String: KafkaResponseCode] {
        let client = self.client
        return try await DedicatedThread.run(name: "kafka-topics") {
            Result { () throws(KafkaError) in
                try client.withHandle { handle throws(KafkaError) in
                    try Self.learnTopicsBlocking(handle: handle, topics: topics, timeout: timeout)
                }
            }
        }.get()
    }

    private static func learnTopicsBlocking(
        handle: OpaquePointer, topics: [String], timeout: Duration
    ) throws(KafkaError) -> [String: KafkaResponseCode] {
        let handles = topics.compactMap { rd_kafka_topic_new(handle, $0, nil) }
        defer { handles.forEach { rd_kafka_topic_destroy($0) } }
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let code = rd_kafka_metadata(handle, 0, nil, &metadata, Int32(clamping: timeout.kafkaMilliseconds))
        guard code == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
            throw KafkaError(code: .broker, rawResponse: code, message: "no metadata for \(topics.joined(separator: ", ")) within \(timeout)")
        }
        defer { rd_kafka_metadata_destroy(metadata) }
        let found = metadata.pointee.topicsByName
        var failed: [String: KafkaResponseCode] = [:]
        for topic in topics where found[topic]?.error != RD_KAFKA_RESP_ERR_NO_ERROR {
            failed[topic] = KafkaResponseCode(found[topic]?.error ?? RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
        }
        return failed
    }
}
