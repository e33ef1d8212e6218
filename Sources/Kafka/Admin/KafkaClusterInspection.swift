import CRdKafka
import Logging
import ServiceSupport

/// What a cluster says about some topics and a consumer group, read without joining the group (joining
/// would make every running member rebalance): for `apns-relay check`.
package struct KafkaClusterInspection: Sendable {
    /// Brokers in the cluster's metadata, as `host:port`.
    package var brokers: [String]
    /// Partition count of each asked-for topic that exists.
    package var partitions: [String: Int]
    /// Asked-for topics the cluster does not have (or reported an error for), with the error.
    package var missingTopics: [String: String]
    /// The group's state as its coordinator reports it (`Stable`, `Empty`, …; `Dead` when it never existed),
    /// its member count, or why the coordinator could not be asked.
    package var groupState: String?
    package var groupMembers: Int
    package var groupError: String?

    /// Asks the cluster, on a dedicated thread (the librdkafka calls block up to about twice `timeout`).
    /// - Parameter properties: librdkafka properties for the connection (security settings).
    /// - Throws: ``KafkaError`` when no broker answered the metadata request within `timeout` (its message
    ///   says why, e.g. every broker down), or when `properties` are refused.
    package static func inspect(
        bootstrapServers: [String], topics: [String], groupID: String, properties: [String: String] = [:],
        timeout: Duration = .seconds(10), logger: Logger
    ) async throws(KafkaError) -> KafkaClusterInspection {
        try await DedicatedThread.run(name: "kafka-inspect") {
            Result { () throws(KafkaError) in
                try inspectBlocking(bootstrapServers: bootstrapServers, topics: topics, groupID: groupID,
                                    properties: properties, timeout: timeout, logger: logger)
            }
        }.get()
    }

    private static func inspectBlocking(
        bootstrapServers: [String], topics: [String], groupID: String, properties: [String: String],
        timeout: Duration, logger: Logger
    ) throws(KafkaError) -> KafkaClusterInspection {
        let context = KafkaClientContext(logger: logger, statisticsHandler: nil, errorHandler: nil, rebalanceHandler: nil)
        var settings = properties
        settings["bootstrap.servers"] = bootstrapServers.joined(separator: ",")
        let client = try KafkaClient(kind: .producer(deliveryReport: false), properties: settings, context: context)
        let milliseconds = Int32(clamping: timeout.kafkaMilliseconds)
        return try client.withHandle { handle throws(KafkaError) -> KafkaClusterInspection in
            var metadata: UnsafePointer<rd_kafka_metadata>?
            let code = rd_kafka_metadata(handle, 1, nil, &metadata, milliseconds)
            guard code == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
                throw KafkaError(code: .broker, rawResponse: code, message: "no metadata from \(bootstrapServers.joined(separator: ",")) within \(timeout)")
            }
            defer { rd_kafka_metadata_destroy(metadata) }
            var inspection = KafkaClusterInspection(brokers: [], partitions: [:], missingTopics: [:], groupState: nil, groupMembers: 0, groupError: nil)
            for index in 0..<Int(metadata.pointee.broker_cnt) {
                let broker = metadata.pointee.brokers[index]
                inspection.brokers.append("\(String(cString: broker.host)):\(broker.port)")
            }
            let found = metadata.pointee.topicsByName
            for topic in topics {
                if let entry = found[topic], entry.error == RD_KAFKA_RESP_ERR_NO_ERROR {
                    inspection.partitions[topic] = entry.partitions
                } else {
                    let error = found[topic]?.error ?? RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART
                    inspection.missingTopics[topic] = String(cString: rd_kafka_err2str(error))
                }
            }
            var groups: UnsafePointer<rd_kafka_group_list>?
            let groupCode = rd_kafka_list_groups(handle, groupID, &groups, milliseconds)
            if groupCode == RD_KAFKA_RESP_ERR_NO_ERROR, let groups {
                defer { rd_kafka_group_list_destroy(groups) }
                if groups.pointee.group_cnt > 0 {
                    let group = groups.pointee.groups[0]
                    if group.err == RD_KAFKA_RESP_ERR_NO_ERROR {
                        inspection.groupState = group.state.map { String(cString: $0) } ?? "?"
                        inspection.groupMembers = Int(group.member_cnt)
                    } else {
                        inspection.groupError = String(cString: rd_kafka_err2str(group.err))
                    }
                } else {
                    inspection.groupState = "Dead"
                }
            } else {
                inspection.groupError = String(cString: rd_kafka_err2str(groupCode))
            }
            return inspection
        }
    }

    /// Each partition's low and high watermark (the first offset and the offset after the last record) of
    /// `topic`, as the partition leaders say now; asked on a dedicated thread.
    /// - Throws: ``KafkaError`` when the metadata or a leader does not answer within `timeout`.
    package static func watermarks(
        bootstrapServers: [String], topic: String, properties: [String: String] = [:],
        timeout: Duration = .seconds(10), logger: Logger
    ) async throws(KafkaError) -> [Int32: (low: Int64, high: Int64)] {
        try await DedicatedThread.run(name: "kafka-inspect") {
            Result { () throws(KafkaError) in
                try watermarksBlocking(bootstrapServers: bootstrapServers, topic: topic, properties: properties,
                                       timeout: timeout, logger: logger)
            }
        }.get()
    }

    private static func watermarksBlocking(
        bootstrapServers: [String], topic: String, properties: [String: String], timeout: Duration, logger: Logger
    ) throws(KafkaError) -> [Int32: (low: Int64, high: Int64)] {
        let context = KafkaClientContext(logger: logger, statisticsHandler: nil, errorHandler: nil, rebalanceHandler: nil)
        var settings = properties
        settings["bootstrap.servers"] = bootstrapServers.joined(separator: ",")
        let client = try KafkaClient(kind: .producer(deliveryReport: false), properties: settings, context: context)
        let milliseconds = Int32(clamping: timeout.kafkaMilliseconds)
        return try client.withHandle { handle throws(KafkaError) -> [Int32: (low: Int64, high: Int64)] in
            var metadata: UnsafePointer<rd_kafka_metadata>?
            let topicHandle = rd_kafka_topic_new(handle, topic, nil)
            defer { if let topicHandle { rd_kafka_topic_destroy(topicHandle) } }
            let code = rd_kafka_metadata(handle, 0, topicHandle, &metadata, milliseconds)
            guard code == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
                throw KafkaError(code: .broker, rawResponse: code, message: "no metadata for \(topic) within \(timeout)")
            }
            defer { rd_kafka_metadata_destroy(metadata) }
            guard metadata.pointee.topic_cnt == 1, metadata.pointee.topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR else {
                let error = metadata.pointee.topic_cnt == 1 ? metadata.pointee.topics[0].err : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART
                throw KafkaError(code: .broker, rawResponse: error, message: "topic \(topic)")
            }
            var result: [Int32: (low: Int64, high: Int64)] = [:]
            for index in 0..<Int(metadata.pointee.topics[0].partition_cnt) {
                let partition = metadata.pointee.topics[0].partitions[index].id
                var low: Int64 = 0
                var high: Int64 = 0
                let error = rd_kafka_query_watermark_offsets(handle, topic, partition, &low, &high, milliseconds)
                guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                    throw KafkaError(code: .broker, rawResponse: error, message: "watermarks of \(topic)[\(partition)]")
                }
                result[partition] = (low, high)
            }
            return result
        }
    }
}
