import CRdKafka
import Synchronization

/// One reusable one-entry `rd_kafka_topic_partition_list_t` per partition, for `rd_kafka_offsets_store`.
///
/// Stores happen for almost every event (each time a partition's contiguous frontier moves). Building a list
/// per call cost seven allocations (the list, its entries, the topic's copies, the Swift wrapper, the read-back).
/// A cached list costs none. librdkafka also caches the partition's handle in the entry (`_private`) on
/// the first store, so later stores skip the lookup by name.
///
/// That cached handle is a reference on the partition. `reset()` drops every list, and with it those
/// references: the consumer calls it after each rebalance, so a revoked partition is not kept alive, and
/// at close, before the handle is destroyed. After `close()` no new list is made.
final class OffsetStoreLists: Sendable {
    private struct State: ~Copyable {
        var lists: [KafkaTopicPartition: TopicPartitionList] = [:]
        var closed = false
    }

    private let state = Mutex(State())

    /// Stores `offset` (the next offset to read) for `partition`: librdkafka's overall and per-entry error.
    func store(handle: OpaquePointer, _ partition: KafkaTopicPartition, nextOffset offset: Int64) -> rd_kafka_resp_err_t {
        state.withLock { state in
            let list: TopicPartitionList
            if let cached = state.lists[partition] {
                list = cached
            } else {
                list = TopicPartitionList([partition])
                if !state.closed { state.lists[partition] = list }
            }
            return list.withList { list in
                list.pointee.elems[0].offset = offset
                list.pointee.elems[0].err = RD_KAFKA_RESP_ERR_NO_ERROR
                let error = rd_kafka_offsets_store(handle, list)
                return error != RD_KAFKA_RESP_ERR_NO_ERROR ? error : list.pointee.elems[0].err
            }
        }
    }

    /// Drops every list (and librdkafka's partition references they hold).
    func reset() {
        let dropped = state.withLock { state in
            let lists = state.lists
            state.lists = [:]
            return lists
        }
        _ = dropped  // destroyed here, outside the lock
    }

    /// As `reset()`, and makes no more lists: the handle is about to be destroyed.
    func close() {
        state.withLock { $0.closed = true }
        reset()
    }
}
