import Dispatch
import Synchronization

/// What a ``KafkaConsumer`` hands to the application, in order.
///
/// Rebalance events overtake buffered messages: the iterator returns a pending assignment change before
/// any message still in the buffer, and messages of revoked or lost partitions are dropped from the buffer
/// (they were not processed, so their offsets were not stored; the next owner reads them again).
package enum KafkaConsumerEvent: Sendable {
    case message(KafkaConsumerMessage)
    /// Partitions added to this member's assignment. Messages for them may follow.
    case partitionsAssigned([KafkaTopicPartition])
    /// Partitions about to be taken away. librdkafka still owns them until the revocation is acknowledged
    /// (or its drain timeout passes): finish in-flight work, store offsets, then call `acknowledge()`.
    case partitionsRevoked(KafkaPartitionRevocation)
    /// Partitions already taken away without a clean revocation (session timeout, fencing): offsets can no
    /// longer be committed for them and another member may be processing them. Stop work on them.
    case partitionsLost([KafkaTopicPartition])

    /// A message's lane; `nil` for the other events.
    package var messageLane: KafkaConsumerLane? {
        if case .message(let message) = self { message.lane } else { nil }
    }
}

/// A pending revocation. The poll thread holds the partitions until ``acknowledge()`` is called or the
/// consumer's `revocationDrainTimeout` passes, so the application can drain and store final offsets.
package final class KafkaPartitionRevocation: Sendable, CustomStringConvertible {
    package let partitions: [KafkaTopicPartition]
    private let acknowledged = Atomic<Bool>(false)
    private let semaphore = DispatchSemaphore(value: 0)

    init(partitions: [KafkaTopicPartition]) {
        self.partitions = partitions
    }

    /// Releases the partitions to the group. Idempotent; safe from any thread.
    package func acknowledge() {
        if !acknowledged.exchange(true, ordering: .acquiringAndReleasing) {
            semaphore.signal()
        }
    }

    package var isAcknowledged: Bool { acknowledged.load(ordering: .acquiring) }

    /// Blocks the calling (poll) thread. - Returns: false if the timeout passed first.
    func waitForAcknowledgement(timeout: Duration) -> Bool {
        semaphore.wait(timeout: .now() + .milliseconds(timeout.kafkaMilliseconds)) == .success
    }

    package var description: String { "revocation of \(partitions)" }
}
