import CRdKafka

/// Owns one `rd_kafka_topic_partition_list_t` built from Swift values; destroyed in `deinit`.
// @unchecked Sendable: only `OffsetStoreLists` shares a list between threads, and uses it under its lock.
final class TopicPartitionList: @unchecked Sendable {
    private let list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init(_ partitions: [KafkaTopicPartition], offsets: [Int64]? = nil) {
        list = rd_kafka_topic_partition_list_new(Int32(max(partitions.count, 1)))
        for (index, entry) in partitions.enumerated() {
            let element = rd_kafka_topic_partition_list_add(list, entry.topic, entry.partition)
            if let offsets { element?.pointee.offset = offsets[index] }
        }
    }

    deinit { rd_kafka_topic_partition_list_destroy(list) }

    func withList<T, E: Error>(_ body: (UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) throws(E) -> T) throws(E) -> T {
        try body(list)
    }

    /// Reads a librdkafka-owned list without taking ownership.
    static func partitions(in list: UnsafePointer<rd_kafka_topic_partition_list_t>) -> [KafkaTopicPartition] {
        entries(in: list).map(\.partition)
    }

    static func entries(in list: UnsafePointer<rd_kafka_topic_partition_list_t>)
        -> [(partition: KafkaTopicPartition, offset: Int64, error: rd_kafka_resp_err_t)]
    {
        let count = Int(list.pointee.cnt)
        guard count > 0, let elements = list.pointee.elems else { return [] }
        return (0..<count).map { index in
            let element = elements[index]
            return (KafkaTopicPartition(topic: String(cString: element.topic), partition: element.partition),
                    element.offset, element.err)
        }
    }
}
