import CRdKafka
import Logging
import ServiceSupport

/// What a cluster says of some topics' settings, asked through the admin API and never by producing a record:
/// each topic's configuration (`DescribeConfigs`), its replication factor (metadata) and, where librdkafka and
/// the broker can say, the operations this client's principal may perform on it (`DescribeTopics`, librdkafka
/// 2.3 and later). For `apns-relay check`.
package struct KafkaTopicConfigurations: Sendable {
    /// Each topic's configuration entries by name, as the broker reports them (its defaults included).
    package var configurations: [String: [String: String]] = [:]
    /// Topics whose configuration could not be read, with why (the request's reason, or the topic's own).
    package var unreadable: [String: String] = [:]
    /// The fewest replicas among each topic's partitions, from the metadata.
    package var replicationFactors: [String: Int] = [:]
    /// The operations the broker allows this client's principal on each topic, as librdkafka names them
    /// (`READ`, `WRITE`, `DESCRIBE`, …).
    package var authorizedOperations: [String: Set<String>] = [:]
    /// Topics whose authorized operations are unknown, with why (a librdkafka before 2.3, a broker that does
    /// not say).
    package var operationsUnknown: [String: String] = [:]

    package init() {}

    /// Whether this client's principal may produce to `topic`; `nil` when unknown (see ``operationsUnknown``).
    package func mayWrite(_ topic: String) -> Bool? {
        authorizedOperations[topic].map { $0.contains("WRITE") || $0.contains("ALL") }
    }

    /// Asks the cluster about `topics`, on a dedicated thread (the librdkafka calls block, together up to
    /// about three times `timeout`). Topics the metadata lacks are left out of every answer.
    ///
    /// A configuration or operation set that cannot be read is not an error: it lands in ``unreadable`` or
    /// ``operationsUnknown`` with the reason. librdkafka sends both requests to the cluster's controller; a
    /// cluster whose metadata names a controller that is not among its brokers (librdkafka's mock cluster does)
    /// is not asked, as librdkafka would only wait for that controller until the deadline.
    /// - Parameter properties: librdkafka properties for the connection (security settings).
    /// - Throws: ``KafkaError`` when no broker answered the metadata request within `timeout`, or when
    ///   `properties` are refused.
    package static func describe(
        _ topics: [String], bootstrapServers: [String], properties: [String: String] = [:],
        timeout: Duration = .seconds(10), logger: Logger
    ) async throws(KafkaError) -> KafkaTopicConfigurations {
        try await DedicatedThread.run(name: "kafka-describe-topics") {
            Result { () throws(KafkaError) in
                try describeBlocking(
                    topics, bootstrapServers: bootstrapServers, properties: properties, timeout: timeout, logger: logger
                )
            }
        }.get()
    }

    private static func describeBlocking(
        _ topics: [String], bootstrapServers: [String], properties: [String: String], timeout: Duration, logger: Logger
    ) throws(KafkaError) -> KafkaTopicConfigurations {
        let context = KafkaClientContext(
            logger: logger, statisticsHandler: nil, errorHandler: nil, rebalanceHandler: nil)
        var settings = properties
        settings["bootstrap.servers"] = bootstrapServers.joined(separator: ",")
        let client = try KafkaClient(kind: .producer(deliveryReport: false), properties: settings, context: context)
        let milliseconds = Int32(clamping: timeout.kafkaMilliseconds)
        return try client.withHandle { handle throws(KafkaError) -> KafkaTopicConfigurations in
            var described = KafkaTopicConfigurations()
            var metadata: UnsafePointer<rd_kafka_metadata>?
            let code = rd_kafka_metadata(handle, 1, nil, &metadata, milliseconds)
            guard code == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
                throw KafkaError(
                    code: .broker, rawResponse: code,
                    message: "no metadata from \(bootstrapServers.joined(separator: ",")) within \(timeout)")
            }
            defer { rd_kafka_metadata_destroy(metadata) }
            let brokers = (0..<Int(metadata.pointee.broker_cnt)).map { metadata.pointee.brokers[$0].id }
            let wanted = Set(topics)
            var present: [String] = []
            for index in 0..<Int(metadata.pointee.topic_cnt) {
                let topic = metadata.pointee.topics[index]
                let name = String(cString: topic.topic)
                guard wanted.contains(name), topic.err == RD_KAFKA_RESP_ERR_NO_ERROR else { continue }
                present.append(name)
                let replicas = (0..<Int(topic.partition_cnt)).map { Int(topic.partitions[$0].replica_cnt) }
                if let fewest = replicas.min() { described.replicationFactors[name] = fewest }
            }
            present.sort()
            guard !present.isEmpty else { return described }

            let controller = rd_kafka_controllerid(handle, milliseconds)
            let unreachable: String? =
                if controller < 0 {
                    "the cluster named no controller within \(timeout) (librdkafka sends these requests to the controller)"
                } else if !brokers.contains(controller) {
                    "the cluster's metadata names broker \(controller) as its controller, which is not one of its brokers "
                        + "(\(brokers.sorted().map(String.init).joined(separator: ", "))): librdkafka sends these requests to "
                        + "the controller and would wait for it until the deadline"
                } else {
                    nil
                }
            if let unreachable {
                for topic in present { described.unreadable[topic] = unreachable }
            } else {
                readConfigurations(
                    present, handle: handle, milliseconds: milliseconds, timeout: timeout, into: &described)
            }
            readAuthorizedOperations(
                present, unreachable: unreachable, handle: handle, milliseconds: milliseconds, timeout: timeout,
                into: &described)
            return described
        }
    }

    /// Waits for an admin request's answer on `queue`: the event (the caller destroys it), or why there is none
    /// (no answer in time, or the request's own error). The request's timeout ends it; the poll waits a little
    /// longer for that answer.
    static func adminAnswer(on queue: OpaquePointer, to request: String, milliseconds: Int32, timeout: Duration) -> (OpaquePointer?, String?) {
        guard let event = rd_kafka_queue_poll(queue, milliseconds + 1000) else {
            return (nil, "no answer to \(request) within \(timeout)")
        }
        let eventError = rd_kafka_event_error(event)
        guard eventError == RD_KAFKA_RESP_ERR_NO_ERROR else {
            let reason = rd_kafka_event_error_string(event).map { String(cString: $0) } ?? String(cString: rd_kafka_err2str(eventError))
            rd_kafka_event_destroy(event)
            return (nil, "\(request): \(reason)")
        }
        return (event, nil)
    }

    /// `DescribeConfigs` for `topics`: the entries of each into ``configurations``, or why not into ``unreadable``.
    private static func readConfigurations(
        _ topics: [String], handle: OpaquePointer, milliseconds: Int32, timeout: Duration,
        into described: inout KafkaTopicConfigurations
    ) {
        func unreadable(_ reason: String) {
            for topic in topics where described.configurations[topic] == nil && described.unreadable[topic] == nil {
                described.unreadable[topic] = reason
            }
        }
        // Owned here: DescribeConfigs copies the resources, so they are destroyed after the call.
        var resources = topics.map { rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, $0) }
        defer { resources.forEach { rd_kafka_ConfigResource_destroy($0) } }
        guard let queue = rd_kafka_queue_new(handle) else {
            return unreadable("no queue for the DescribeConfigs answer")
        }
        defer { rd_kafka_queue_destroy(queue) }
        let options = rd_kafka_AdminOptions_new(handle, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS)
        defer { rd_kafka_AdminOptions_destroy(options) }
        var errorText = [CChar](repeating: 0, count: 512)
        _ = rd_kafka_AdminOptions_set_request_timeout(options, milliseconds, &errorText, errorText.count)
        resources.withUnsafeMutableBufferPointer { buffer in
            rd_kafka_DescribeConfigs(handle, buffer.baseAddress, buffer.count, options, queue)
        }
        let (answer, failure) = adminAnswer(on: queue, to: "DescribeConfigs", milliseconds: milliseconds, timeout: timeout)
        guard let event = answer else { return unreadable(failure ?? "DescribeConfigs: no answer") }
        defer { rd_kafka_event_destroy(event) }
        guard let result = rd_kafka_event_DescribeConfigs_result(event) else {
            return unreadable("DescribeConfigs answered with another event")
        }
        var count = 0
        guard let answered = rd_kafka_DescribeConfigs_result_resources(result, &count) else {
            return unreadable("DescribeConfigs answered with no topic")
        }
        for index in 0..<count {
            let resource = answered[index]
            let name = String(cString: rd_kafka_ConfigResource_name(resource))
            let error = rd_kafka_ConfigResource_error(resource)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                let reason = rd_kafka_ConfigResource_error_string(resource).map { String(cString: $0) } ?? ""
                described.unreadable[name] = reason.isEmpty ? String(cString: rd_kafka_err2str(error)) : reason
                continue
            }
            var entryCount = 0
            var entries: [String: String] = [:]
            if let list = rd_kafka_ConfigResource_configs(resource, &entryCount) {
                for entryIndex in 0..<entryCount {
                    // A NULL value is a sensitive or unset entry: not reported.
                    guard let entry = list[entryIndex], let value = rd_kafka_ConfigEntry_value(entry) else { continue }
                    entries[String(cString: rd_kafka_ConfigEntry_name(entry))] = String(cString: value)
                }
            }
            described.configurations[name] = entries
        }
        unreadable("DescribeConfigs answered without it")
    }
}
