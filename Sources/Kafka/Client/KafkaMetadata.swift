import CRdKafka

extension rd_kafka_metadata {
    /// Each topic in the answer: its partition count and the error the cluster reported for it.
    var topicsByName: [String: (partitions: Int, error: rd_kafka_resp_err_t)] {
        var found: [String: (partitions: Int, error: rd_kafka_resp_err_t)] = [:]
        for index in 0..<Int(topic_cnt) {
            found[String(cString: topics[index].topic)] = (Int(topics[index].partition_cnt), topics[index].err)
        }
        return found
    }
}
