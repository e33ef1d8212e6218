import CRdKafka
import ServiceSupport

/// Transactions (KIP-98; KIP-447 for consume-transform-produce): records and consumed offsets committed
/// together, so that `read_committed` readers see each transaction's records once, or never.
///
/// Only for a producer configured with ``KafkaProducerConfiguration/transactionalID``. The calls that wait
/// for the broker run on the producer's transaction thread, one after another. librdkafka's rules apply: ``initTransactions(timeout:)`` once,
/// then per transaction ``beginTransaction()``, records, ``sendOffsetsToTransaction(_:groupMetadata:timeout:)``,
/// then ``commitTransaction(timeout:)`` or ``abortTransaction(timeout:)``. An error with `requiresAbort`
/// calls for an abort (the records of the transaction are discarded) and a new transaction; a fatal one (a
/// newer producer with the same transactional id fenced this one) ends the producer for good.
extension KafkaProducer {
    /// Registers the transactional id with its coordinator, fencing any older producer with the same id and
    /// aborting (or completing) its open transaction.
    /// - Throws: ``KafkaError`` `transaction` (retriable on a timeout: call again).
    package func initTransactions(timeout: Duration) async throws(KafkaError) {
        try await transactionCall("init transactions") { handle in
            rd_kafka_init_transactions(handle, Int32(clamping: timeout.kafkaMilliseconds))
        }
    }

    /// Starts a transaction: every record produced from now until commit or abort belongs to it. Local (no
    /// broker round trip).
    package func beginTransaction() throws(KafkaError) {
        let failure = client.withHandle { rd_kafka_begin_transaction($0) }
        if let failure { throw KafkaError(code: .transaction, consuming: failure) }
    }

    /// Adds consumed offsets (the next offset to read, per partition) to the transaction, with the group's
    /// metadata: the group commits them only if the transaction commits, and refuses them from a member of
    /// an older generation.
    package func sendOffsetsToTransaction(
        _ offsets: [KafkaTopicPartition: Int64], groupMetadata: KafkaConsumerGroupMetadata, timeout: Duration
    ) async throws(KafkaError) {
        guard !offsets.isEmpty else { return }
        let partitions = offsets.keys.sorted()
        let positions = partitions.map { offsets[$0]! }
        try await transactionCall("send offsets to the transaction") { handle in
            TopicPartitionList(partitions, offsets: positions).withList { list in
                groupMetadata.withHandle { metadata in
                    rd_kafka_send_offsets_to_transaction(handle, list, metadata, Int32(clamping: timeout.kafkaMilliseconds))
                }
            }
        }
    }

    /// Flushes the transaction's records and commits it with its offsets.
    /// - Throws: ``KafkaError`` `transaction`: `requiresAbort` (abort, then redo the work in a new
    ///   transaction), retriable (call again: the outcome is not known yet), or fatal.
    package func commitTransaction(timeout: Duration) async throws(KafkaError) {
        try await transactionCall("commit the transaction") { handle in
            rd_kafka_commit_transaction(handle, Int32(clamping: timeout.kafkaMilliseconds))
        }
    }

    /// Aborts the transaction: its records are never shown to `read_committed` readers, its offsets never
    /// committed. Records not yet sent are purged (their delivery reports fail).
    package func abortTransaction(timeout: Duration) async throws(KafkaError) {
        try await transactionCall("abort the transaction") { handle in
            rd_kafka_abort_transaction(handle, Int32(clamping: timeout.kafkaMilliseconds))
        }
    }

    /// Runs a blocking transaction call on the producer's transaction thread (one for all its transactions);
    /// its `rd_kafka_error_t` (owned) becomes the error.
    private func transactionCall(
        _ what: String, _ call: @escaping @Sendable (OpaquePointer) -> OpaquePointer?
    ) async throws(KafkaError) {
        let client = self.client
        let failure: KafkaError? = await transactionThread.run {
            client.withHandle { handle in call(handle).map { KafkaError(code: .transaction, consuming: $0) } }
        }
        if var failure {
            failure.message = "\(what): \(failure.message)"
            throw failure
        }
    }
}
