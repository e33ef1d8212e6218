import CRdKafka

/// The queues assigned partitions' records are forwarded to: one per topic, made when the topic's first
/// partition is forwarded, each in its lane's list in the order made. Opened and closed by the poll thread;
/// the rebalance callback (on the poll thread) and the application (holding a lane) forward partitions.
struct RecordQueues {
    /// One topic's queue.
    struct TopicQueue {
        let topic: String
        let queue: OpaquePointer
    }

    private var byTopic: [String: OpaquePointer] = [:]
    /// Each lane's topic queues, indexed by `KafkaConsumerLane.rawValue`.
    private(set) var byLane: [[TopicQueue]] = KafkaConsumerLane.allCases.map { _ in [] }
    var isOpen = false

    /// `topic`'s queue, made (and set to wake the poll thread through `wake`) on first use.
    mutating func queue(for topic: String, lane: KafkaConsumerLane, handle: OpaquePointer, wake: Int32) -> OpaquePointer {
        if let queue = byTopic[topic] { return queue }
        let queue = rd_kafka_queue_new(handle)!
        var wakeByte: UInt8 = 1
        rd_kafka_queue_io_event_enable(queue, wake, &wakeByte, 1)
        byTopic[topic] = queue
        byLane[lane.rawValue].append(TopicQueue(topic: topic, queue: queue))
        return queue
    }

    /// Destroys every queue (the consumer is closed: nothing is forwarded to them any more).
    mutating func close() {
        isOpen = false
        for queue in byTopic.values {
            rd_kafka_queue_io_event_enable(queue, -1, nil, 0)
            rd_kafka_queue_destroy(queue)
        }
        byTopic = [:]
        byLane = KafkaConsumerLane.allCases.map { _ in [] }
    }
}
