import Kafka
import Logging
import ServiceSupport
import Synchronization

/// Exactly-once mode's publisher: each finished event's records are held (`TransactionBuffer`) and a loop
/// commits them every `interval` in one Kafka transaction with the offsets they complete, so that a
/// `read_committed` reader sees each event's records once, whatever crashes in between.
///
/// One transaction at a time, from `run()` (the calls that block run on the producer's one transaction
/// thread): begin; produce the batch; send the offsets with the consumer's group metadata (KIP-447: the
/// group refuses them from a member of an older generation); commit. An error that calls for an abort aborts, and the same batch goes
/// into the next transaction (its records are still held: nothing is redone, and nothing of it was
/// visible). A record Kafka refuses for good is replaced by its smaller form for that next transaction. A
/// fatal error — this producer was fenced by a newer one with the same transactional id, i.e. another
/// instance took this one's place — sets `failure`: the relay stops and exits non-zero. It does not make a
/// new producer and go on: the instance that fenced it owns the transactional id now, and two relays with
/// one id would fence each other in turn.
package final class TransactionalPublisher: Sendable {
    package typealias Completion = @Sendable (_ committed: Bool) -> Void

    private struct State {
        var buffer = TransactionBuffer<Completion>()
        /// `flush` callers, resolved by the next transaction that commits (or `true` when none is due).
        var flushWaiters: [DeadlineWaiter<Bool>] = []
        var wake: AsyncStream<Void>.Continuation?
        var stopRequested = false
        /// When a transaction last committed, or the buffer went from empty to holding (for `stall`).
        var progress = ContinuousClock.now
        /// Counts assignments and drops: a `confirm` asked for before the latest one is stale.
        var assignments: UInt64 = 0
    }

    private let producer: KafkaProducer
    private let groupMetadata: @Sendable () throws(KafkaError) -> KafkaConsumerGroupMetadata
    private let interval: Duration
    /// How long one transaction call (send offsets, commit, abort) may wait for the broker.
    private let callTimeout: Duration
    private let failure: Latch<String>
    private let metrics: TransactionMetrics
    private let logger: Logger
    private let state = BlockingMutex(State())
    /// Where results' JSON is written as they are produced.
    private let buffers = ByteBufferPool.forRecords()
    /// Set when `run()` returns: no transaction is under way any more (each one it began ended in a commit
    /// or an abort), so the producer may be closed without leaving one open.
    private let finished = Latch<Void>()

    package init(
        producer: KafkaProducer, groupMetadata: @escaping @Sendable () throws(KafkaError) -> KafkaConsumerGroupMetadata,
        interval: Duration, callTimeout: Duration, failure: Latch<String>, logger: Logger
    ) {
        self.producer = producer
        self.groupMetadata = groupMetadata
        self.interval = interval
        self.callTimeout = callTimeout
        self.failure = failure
        self.metrics = TransactionMetrics()
        self.logger = logger
    }

    // MARK: What the pipeline and the ledger tell it

    /// Holds an event's records until a transaction commits them with its offset; `completion` runs once:
    /// `true` after that commit, `false` when the event is given up (revoked, lost, shutdown).
    func hold(_ partition: KafkaTopicPartition, offset: Int64, records: [OutgoingRecord], completion: @escaping Completion) {
        state.withLock { state in
            if state.buffer.heldEvents == 0 { state.progress = .now }
            state.buffer.hold(partition, offset: offset, records: records, completion: completion)
        }
    }

    /// The ledger's frontier of `partition` moved: every offset up to `processedOffset` has finished.
    func advance(_ partition: KafkaTopicPartition, processedOffset: Int64) {
        state.withLock { $0.buffer.advance(partition, to: processedOffset + 1) }
    }

    /// Gives up the held events of `partitions` (revoked or lost): never produced, redone by the next owner.
    func drop(_ partitions: [KafkaTopicPartition]) {
        let givenUp = state.withLock { state in
            state.assignments &+= 1
            return state.buffer.drop(partitions)
        }
        for completion in givenUp { completion(false) }
    }

    /// Partitions were assigned. - Returns: the token for `confirm`.
    func assigned() -> UInt64 {
        state.withLock { state in
            state.assignments &+= 1
            return state.assignments
        }
    }

    /// Commits, in the next transaction, the offsets the group has already committed for newly assigned
    /// partitions (unless the assignment changed since `assignment`): committing them again changes
    /// nothing, but it asks the transaction coordinator whether this producer may still commit. A relay
    /// that another with the same transactional id fenced (a zombie, say, that was paused while its
    /// replacement started, then won its group membership back) finds out at once, and stops, instead of
    /// holding partitions it can never commit. A partition that already has a later frontier keeps it.
    func confirm(_ offsets: [KafkaTopicPartition: Int64], assignment: UInt64) {
        state.withLock { state in
            guard state.assignments == assignment, !offsets.isEmpty else { return }
            for (partition, offset) in offsets { state.buffer.advance(partition, to: offset) }
            state.wake?.yield()
        }
    }

    /// Gives up every held event (the relay abandons what is in flight) and ends `run()` after the
    /// transaction under way, if any.
    func abandon() {
        let givenUp = state.withLock { state in
            state.stopRequested = true
            state.wake?.yield()
            return state.buffer.dropAll()
        }
        for completion in givenUp { completion(false) }
    }

    /// Waits (at most `timeout`) until `run()` has returned, after `abandon()`: a producer closed while a
    /// transaction is open leaves it open on the broker, and `read_committed` readers of every partition it
    /// wrote to wait behind it until `kafka.transactionTimeoutMs`. - Returns: `false` at the timeout.
    func waitUntilFinished(timeout: Duration) async -> Bool {
        await finished.wait(timeout: timeout, ignoringCancellation: true) != nil
    }

    /// How long events have been held with no transaction committed; `nil` while none is held.
    var stall: (duration: Duration, waiting: Int)? {
        state.withLock { state in
            state.buffer.heldEvents == 0 ? nil : (ContinuousClock.now - state.progress, state.buffer.heldEvents)
        }
    }

    /// Commits what is due now (e.g. the finished events of partitions being revoked) without waiting for
    /// the interval. - Returns: `true` once a transaction that began after this call committed (or nothing
    /// was due), `false` at `timeout` or when the loop stopped.
    func flush(timeout: Duration) async -> Bool {
        await DeadlineWaiter.wait(timeout: timeout, timedOut: false, cancelled: false) { waiter in
            state.withLock { state in
                guard !state.stopRequested else {
                    waiter.resolve(false)
                    return
                }
                state.flushWaiters.removeAll { $0.isResolved }
                state.flushWaiters.append(waiter)
                state.wake?.yield()
            }
        }
    }

    // MARK: The loop

    /// Commits a transaction every `interval` (and when `flush` asks) until `abandon()` or cancellation.
    package func run() async {
        let (signals, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let stopped = state.withLock { state in
            state.wake = wake
            return state.stopRequested
        }
        guard !stopped else {
            finished.set()
            return
        }
        let ticker = Task { [interval] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                wake.yield()
            }
        }
        defer {
            ticker.cancel()
            wake.finish()
            let waiters = state.withLock { state in
                state.stopRequested = true
                defer { state.flushWaiters = [] }
                return state.flushWaiters
            }
            for waiter in waiters { waiter.resolve(false) }
            finished.set()
        }
        for await _ in signals {
            if state.withLock({ $0.stopRequested }) || failure.isSet { return }
            await commitDue()
        }
    }

    /// One transaction of everything due, if anything is.
    private func commitDue() async {
        let (taken, waiters) = state.withLock { state in
            defer { state.flushWaiters = [] }
            return (state.buffer.begin(), state.flushWaiters)
        }
        guard var batch = taken else {
            for waiter in waiters { waiter.resolve(true) }
            return
        }
        let started = ContinuousClock.now
        let rejected = RejectedRecords()
        do throws(KafkaError) {
            try await transact(&batch, rejected: rejected)
        } catch {
            await failed(batch, error, rejected: rejected, waiters: waiters)
            return
        }
        let completions = state.withLock { state in
            state.progress = .now
            return state.buffer.committed(batch)
        }
        metrics.committed.increment()
        metrics.duration.recordNanoseconds((ContinuousClock.now - started).nanoseconds)
        metrics.records.increment(by: batch.recordCount)
        for completion in completions { completion(true) }
        for waiter in waiters { waiter.resolve(true) }
    }

    /// Begin, produce, send the offsets, commit.
    private func transact(_ batch: inout TransactionBuffer<Completion>.Batch, rejected: RejectedRecords) async throws(KafkaError) {
        try producer.beginTransaction()
        for partition in batch.events.keys {
            for event in batch.events[partition]!.indices {
                for record in batch.events[partition]![event].records.indices {
                    let position = RecordPosition(partition: partition, event: event, record: record)
                    try produce(&batch.events[partition]![event].records[record], at: position, rejected: rejected)
                }
            }
        }
        let metadata = try groupMetadata()
        try await producer.sendOffsetsToTransaction(batch.offsets, groupMetadata: metadata, timeout: callTimeout)
        // A retriable error leaves the outcome unknown: committing again is how librdkafka finds it out.
        var attempts = 0
        while true {
            do {
                return try await producer.commitTransaction(timeout: callTimeout)
            } catch where error.isRetriable && !error.requiresAbort && !error.isFatal && attempts < 3 {
                attempts += 1
                logger.warning("transaction commit did not finish; asking again", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Hands one record to the transaction; a record librdkafka refuses at once for good (too large) is
    /// replaced by its smaller form in place.
    private func produce(_ record: inout OutgoingRecord, at position: RecordPosition, rejected: RejectedRecords) throws(KafkaError) {
        let onDelivery: KafkaProducer.DeliveryHandler = { report in
            if case .failure(let error) = report, error.sendFailure == .recordRejected { rejected.add(position) }
        }
        func send(_ record: OutgoingRecord) throws(KafkaError) {
            try record.withValue(buffers) { (value) throws(KafkaError) in
                try producer.produce(topic: record.topic, key: record.key, value: value, headers: record.headers, onDelivery: onDelivery)
            }
        }
        do {
            try send(record)
        } catch where error.sendFailure == .recordRejected {
            guard let smaller = record.smallerForm() else { throw error }
            logger.error("Kafka refused a record for good; publishing its smaller form instead", metadata: ["topic": "\(record.topic)", "error": "\(error)"])
            record = smaller
            try send(record)
        }
    }

    /// The transaction failed: abort it and keep the batch for the next one, or stop the relay when the
    /// producer cannot go on.
    private func failed(
        _ batch: TransactionBuffer<Completion>.Batch, _ error: KafkaError, rejected: RejectedRecords, waiters: [DeadlineWaiter<Bool>]
    ) async {
        var batch = batch
        if !error.isFatal {
            do {
                try await producer.abortTransaction(timeout: callTimeout)
                // The abort purged what was not sent; the records the broker refused have their reports by now.
                for position in rejected.all {
                    guard let smaller = batch.events[position.partition]?[position.event].records[position.record].smallerForm() else {
                        failure.set("Kafka refuses even the smallest form of a record for \(batch.events[position.partition]![position.event].records[position.record].topic) (check the topic's configuration)")
                        break
                    }
                    metrics.recordsReplaced.increment()
                    batch.events[position.partition]![position.event].records[position.record] = smaller
                }
                metrics.aborted.increment()
                logger.warning("transaction aborted; its records go into the next one", metadata: [
                    "error": "\(error)", "events": "\(batch.eventCount)",
                ])
                let givenUp = state.withLock { state in
                    // Waiters stay for the next transaction (they have their own deadlines).
                    state.flushWaiters += waiters
                    return state.buffer.aborted(batch)
                }
                for completion in givenUp { completion(false) }
                return
            } catch let abortError {
                if !abortError.isFatal {
                    failure.set("a Kafka transaction could not be aborted (\(abortError)) after it failed: \(error)")
                } else {
                    return fenced(abortError, batch, waiters)
                }
            }
        } else {
            return fenced(error, batch, waiters)
        }
        let givenUp = state.withLock { $0.buffer.aborted(batch) + $0.buffer.dropAll() }
        for completion in givenUp { completion(false) }
        for waiter in waiters { waiter.resolve(false) }
    }

    private func fenced(_ error: KafkaError, _ batch: TransactionBuffer<Completion>.Batch, _ waiters: [DeadlineWaiter<Bool>]) {
        metrics.fenced.increment()
        failure.set(
            "the transactional producer can no longer commit (\(error)); most likely another relay with the same kafka.transactionalId started and fenced this one: each replica needs its own id, stable across its restarts"
        )
        let givenUp = state.withLock { $0.buffer.aborted(batch) + $0.buffer.dropAll() }
        for completion in givenUp { completion(false) }
        for waiter in waiters { waiter.resolve(false) }
    }
}

/// Where a record sits in a batch.
private struct RecordPosition: Hashable, Sendable {
    let partition: KafkaTopicPartition
    let event: Int
    let record: Int
}

/// Records the broker refused for good during one transaction (reported on the producer's thread).
private final class RejectedRecords: Sendable {
    private let positions = Mutex<Set<RecordPosition>>([])
    func add(_ position: RecordPosition) { positions.withLock { _ = $0.insert(position) } }
    var all: Set<RecordPosition> { positions.withLock { $0 } }
}

