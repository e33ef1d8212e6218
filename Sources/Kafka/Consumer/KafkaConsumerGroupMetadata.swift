import CRdKafka

/// The consumer group's identity at one moment (group id, generation, member id: KIP-447), owned here and
/// freed in `deinit`. A transactional producer sends it with the offsets it commits, so that the group
/// coordinator refuses the commit of a member that has lost its partitions to a newer generation.
// @unchecked Sendable: the pointer is only read (lent to librdkafka calls that copy it) and freed once, in deinit.
package final class KafkaConsumerGroupMetadata: @unchecked Sendable {
    private let metadata: OpaquePointer

    /// Takes ownership of a metadata handle from `rd_kafka_consumer_group_metadata`.
    init(owning metadata: OpaquePointer) { self.metadata = metadata }

    deinit { rd_kafka_consumer_group_metadata_destroy(metadata) }

    func withHandle<T, E: Error>(_ body: (OpaquePointer) throws(E) -> T) throws(E) -> T { try body(metadata) }
}

extension KafkaConsumer {
    /// The group metadata as of now, for ``KafkaProducer/sendOffsetsToTransaction(_:groupMetadata:timeout:)``.
    /// - Throws: ``KafkaError`` `transaction` when the consumer has none (not a group consumer, or closed).
    package func groupMetadata() throws(KafkaError) -> KafkaConsumerGroupMetadata {
        try client.withHandle { handle throws(KafkaError) in
            guard let metadata = rd_kafka_consumer_group_metadata(handle) else {
                throw KafkaError(code: .transaction, message: "the consumer has no group metadata")
            }
            return KafkaConsumerGroupMetadata(owning: metadata)
        }
    }
}
