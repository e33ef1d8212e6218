import APNsCore
import Kafka
import Synchronization

/// Where the in-flight gate acts, per lane: held, the consumer hands out none of the lane's records (its
/// bounded buffer then fills and fetching stops in librdkafka), while the other lane and rebalances go on;
/// resumed, the lane's records come again, those that waited first.
///
/// Why not pause the partitions in librdkafka: a pause discards what librdkafka has prefetched and a resume
/// fetches it again, so every hold/resume cycle left the relay idle while the fetcher refilled (measured:
/// throughput capped near 12k events/s with the CPU half idle). Held in the consumer's buffer instead, the
/// records are ready the moment the gate opens.
final class LaneIntake: Sendable {
    private let consumer: KafkaConsumer
    private let urgentHeld = Atomic<Bool>(false)
    private let bulkHeld = Atomic<Bool>(false)

    init(consumer: KafkaConsumer) {
        self.consumer = consumer
    }

    /// The lane `topic`'s events travel in (the consumer's, from `kafka.topics.urgent`).
    func lane(of topic: String) -> DeliveryLane {
        DeliveryLane(consumer.lane(of: topic))
    }

    func isHeld(_ lane: DeliveryLane) -> Bool {
        lane == .urgent ? urgentHeld.load(ordering: .acquiring) : bulkHeld.load(ordering: .acquiring)
    }

    /// Holds or resumes `lane` (the flag first: the consumer loop reads it to put back the rest of a batch).
    func set(_ lane: DeliveryLane, held: Bool) {
        if lane == .urgent { urgentHeld.store(held, ordering: .releasing) } else { bulkHeld.store(held, ordering: .releasing) }
        let kafkaLane: KafkaConsumerLane = lane == .urgent ? .urgent : .bulk
        if held { consumer.hold(kafkaLane) } else { consumer.release(kafkaLane) }
    }
}

extension DeliveryLane {
    /// The lane of a record the consumer read in `lane`.
    init(_ lane: KafkaConsumerLane) {
        self = lane == .urgent ? .urgent : .bulk
    }
}
