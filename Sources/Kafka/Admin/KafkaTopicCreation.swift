import CRdKafka
import Logging
import ServiceSupport

/// Creates topics through the Kafka admin API (`CreateTopics`), for environments that start empty: the
/// sandbox on a broker other than librdkafka's mock cluster (whose topics are made through its own API).
package enum KafkaTopicCreation {
    /// Creates each topic with its partition count (replication factor 1); a topic that already exists is
    /// left as it is. Runs on a dedicated thread (the librdkafka calls block).
    /// - Throws: ``KafkaError`` `broker` naming the topic and the broker's reason when one is refused, or
    ///   when no answer came within `timeout`.
    package static func create(
        _ topics: [String: Int], bootstrapServers: [String], properties: [String: String] = [:],
        timeout: Duration = .seconds(10), logger: Logger
    ) async throws(KafkaError) {
        try await DedicatedThread.run(name: "kafka-create-topics") {
            Result { () throws(KafkaError) in
                try createBlocking(topics, bootstrapServers: bootstrapServers, properties: properties, timeout: timeout, logger: logger)
            }
        }.get()
    }

    private static func createBlocking(
        _ topics: [String: Int], bootstrapServers: [String], properties: [String: String], timeout: Duration, logger: Logger
    ) throws(KafkaError) {
        guard !topics.isEmpty else { return }
        let context = KafkaClientContext(logger: logger, statisticsHandler: nil, errorHandler: nil, rebalanceHandler: nil)
        var settings = properties
        settings["bootstrap.servers"] = bootstrapServers.joined(separator: ",")
        let client = try KafkaClient(kind: .producer(deliveryReport: false), properties: settings, context: context)
        let milliseconds = Int32(clamping: timeout.kafkaMilliseconds)
        try client.withHandle { handle throws(KafkaError) in
            // Owned here: each NewTopic is destroyed after the request (CreateTopics copies them).
            var newTopics: [OpaquePointer?] = []
            defer { newTopics.forEach { rd_kafka_NewTopic_destroy($0) } }
            var errorText = [CChar](repeating: 0, count: 512)
            for (name, partitions) in topics.sorted(by: { $0.key < $1.key }) {
                guard let topic = rd_kafka_NewTopic_new(name, Int32(partitions), 1, &errorText, errorText.count) else {
                    throw KafkaError(code: .configuration, message: "topic \(name): \(String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
                }
                newTopics.append(topic)
            }
            guard let queue = rd_kafka_queue_new(handle) else {
                throw KafkaError(code: .clientCreation, message: "no queue for the CreateTopics answer")
            }
            defer { rd_kafka_queue_destroy(queue) }
            let options = rd_kafka_AdminOptions_new(handle, RD_KAFKA_ADMIN_OP_CREATETOPICS)
            defer { rd_kafka_AdminOptions_destroy(options) }
            _ = rd_kafka_AdminOptions_set_operation_timeout(options, milliseconds, &errorText, errorText.count)
            _ = rd_kafka_AdminOptions_set_request_timeout(options, milliseconds, &errorText, errorText.count)
            newTopics.withUnsafeMutableBufferPointer { buffer in
                rd_kafka_CreateTopics(handle, buffer.baseAddress, buffer.count, options, queue)
            }
            // The request's own timeouts end it; the poll waits a little longer for that answer.
            guard let event = rd_kafka_queue_poll(queue, milliseconds + 1000) else {
                throw KafkaError(code: .timedOut, message: "no answer to CreateTopics within \(timeout)")
            }
            defer { rd_kafka_event_destroy(event) }
            let eventError = rd_kafka_event_error(event)
            guard eventError == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(code: .broker, rawResponse: eventError, message: "CreateTopics: \(String(cString: rd_kafka_event_error_string(event)))")
            }
            guard let result = rd_kafka_event_CreateTopics_result(event) else {
                throw KafkaError(code: .broker, message: "CreateTopics answered with another event")
            }
            var count = 0
            guard let results = rd_kafka_CreateTopics_result_topics(result, &count) else { return }
            for index in 0..<count {
                let topicResult = results[index]
                let error = rd_kafka_topic_result_error(topicResult)
                guard error != RD_KAFKA_RESP_ERR_NO_ERROR, error != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS else { continue }
                let name = String(cString: rd_kafka_topic_result_name(topicResult))
                let reason = rd_kafka_topic_result_error_string(topicResult).map { String(cString: $0) } ?? ""
                throw KafkaError(code: .broker, rawResponse: error, message: "creating topic \(name): \(reason)")
            }
        }
    }
}
