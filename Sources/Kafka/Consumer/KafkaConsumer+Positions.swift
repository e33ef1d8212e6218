import CRdKafka

extension KafkaConsumer {
    /// Where librdkafka would go on reading each partition (the offset after the last record it handed
    /// out, past any transaction marker after it; `nil` before the first): local, no broker asked.
    ///
    /// A topic written in transactions ends in a commit marker, which no reader is given: its high watermark
    /// is one past the marker, so a reader waiting for the record before the watermark waits forever. The
    /// position passes the marker once librdkafka has read it.
    package func positions(of partitions: [KafkaTopicPartition]) throws(KafkaError) -> [KafkaTopicPartition: Int64?] {
        let list = TopicPartitionList(partitions)
        return try client.withHandle { handle throws(KafkaError) in
            try list.withList { list throws(KafkaError) in
                let error = rd_kafka_position(handle, list)
                guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                    throw KafkaError(code: .broker, rawResponse: error)
                }
                var positions: [KafkaTopicPartition: Int64?] = [:]
                for entry in TopicPartitionList.entries(in: list) {
                    positions[entry.partition] = entry.offset < 0 ? nil : entry.offset
                }
                return positions
            }
        }
    }
}
