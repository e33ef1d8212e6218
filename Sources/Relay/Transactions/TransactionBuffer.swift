import Kafka

/// Exactly-once mode's bookkeeping, without I/O: finished events' records held until a Kafka transaction
/// commits them together with their partitions' offsets.
///
/// Why held, and not produced as each event finishes: offsets are committed as a contiguous prefix, so an
/// event that finished behind one still at APNs cannot have its offset in the transaction its records are
/// in. Were its records produced anyway and the relay then crashed, they would be visible once from the
/// committed transaction and again when the next owner redoes the event. So a transaction takes, per
/// partition, only the records of events below the ledger's frontier (every offset there finished), and
/// commits exactly that frontier as the partition's offset.
///
/// The transaction loop asks for the next batch (`begin`), produces it, sends its offsets and commits; then
/// tells the buffer `committed` (the events' completions run) or `aborted` (the batch comes back, whole,
/// for the next transaction: nothing is redone, nothing was visible). Not thread-safe: the owner locks it.
struct TransactionBuffer<Completion> {
    /// One event's records, waiting for a transaction.
    struct Held {
        var offset: Int64
        var records: [OutgoingRecord]
        var completion: Completion
    }

    /// What one transaction carries: each partition's events below its frontier, in offset order, and the
    /// offset to commit per partition (the frontier: the next one to read).
    struct Batch {
        var events: [KafkaTopicPartition: [Held]] = [:]
        var offsets: [KafkaTopicPartition: Int64] = [:]
        var recordCount: Int { events.values.reduce(0) { $0 + $1.reduce(0) { $0 + $1.records.count } } }
        var eventCount: Int { events.values.reduce(0) { $0 + $1.count } }
        var isEmpty: Bool { offsets.isEmpty }
    }

    private var held: [KafkaTopicPartition: [Held]] = [:]
    /// Per partition, the ledger's frontier: every offset below it has finished (its records are held here
    /// or already committed).
    private var frontiers: [KafkaTopicPartition: Int64] = [:]
    /// Per partition, the offset the last committed transaction stored.
    private var committedOffsets: [KafkaTopicPartition: Int64] = [:]
    /// Whether a batch is out (between `begin` and `committed`/`aborted`).
    private var batchOut = false

    init() {}

    /// Events held (in the buffer or in the batch out).
    private(set) var heldEvents = 0

    /// Keeps an event's records until a transaction takes them. Call before the ledger reports the
    /// frontier that passes `offset` (`advance`).
    mutating func hold(_ partition: KafkaTopicPartition, offset: Int64, records: [OutgoingRecord], completion: Completion) {
        held[partition, default: []].append(Held(offset: offset, records: records, completion: completion))
        heldEvents += 1
    }

    /// The ledger's frontier of `partition` moved to `frontier` (the next offset to read).
    mutating func advance(_ partition: KafkaTopicPartition, to frontier: Int64) {
        frontiers[partition] = max(frontiers[partition] ?? frontier, frontier)
    }

    /// Takes the next transaction's batch (`nil` when nothing is due or a batch is already out), restricted
    /// to `partitions` when given.
    mutating func begin(only partitions: Set<KafkaTopicPartition>? = nil) -> Batch? {
        guard !batchOut else { return nil }
        var batch = Batch()
        for (partition, frontier) in frontiers where frontier > (committedOffsets[partition] ?? Int64.min) {
            if let partitions, !partitions.contains(partition) { continue }
            var waiting = held[partition] ?? []
            waiting.sort { $0.offset < $1.offset }
            let split = waiting.firstIndex { $0.offset >= frontier } ?? waiting.count
            batch.events[partition] = Array(waiting[..<split])
            held[partition] = Array(waiting[split...])
            batch.offsets[partition] = frontier
        }
        guard !batch.isEmpty else { return nil }
        batchOut = true
        return batch
    }

    /// The batch's transaction committed: its offsets are the partitions' committed offsets now.
    /// - Returns: the completions of its events (run them: the events are done).
    mutating func committed(_ batch: Batch) -> [Completion] {
        batchOut = false
        for (partition, offset) in batch.offsets where frontiers[partition] != nil {
            committedOffsets[partition] = max(committedOffsets[partition] ?? offset, offset)
        }
        heldEvents -= batch.eventCount
        return batch.events.values.flatMap { $0.map(\.completion) }
    }

    /// The batch's transaction was aborted: its events go back, for the next transaction (with any record
    /// the batch replaced, e.g. by its smaller form). Partitions dropped meanwhile are not taken back.
    /// - Returns: the completions of events whose partitions were dropped meanwhile (given up).
    mutating func aborted(_ batch: Batch) -> [Completion] {
        batchOut = false
        var givenUp: [Completion] = []
        for (partition, events) in batch.events {
            if frontiers[partition] == nil {
                givenUp += events.map(\.completion)
                heldEvents -= events.count
            } else {
                held[partition, default: []].append(contentsOf: events)
            }
        }
        return givenUp
    }

    /// Forgets partitions (revoked or lost): their held records are never produced; the next owner redoes
    /// their events from the committed offset, and nothing of them was ever visible.
    /// - Returns: the completions of the events given up. Events in a batch out are given up when it ends.
    mutating func drop(_ partitions: some Sequence<KafkaTopicPartition>) -> [Completion] {
        var givenUp: [Completion] = []
        for partition in partitions {
            let events = held.removeValue(forKey: partition) ?? []
            givenUp += events.map(\.completion)
            heldEvents -= events.count
            frontiers.removeValue(forKey: partition)
            committedOffsets.removeValue(forKey: partition)
        }
        return givenUp
    }

    /// Forgets everything (the relay gives its in-flight events up).
    mutating func dropAll() -> [Completion] {
        drop(Array(Set(held.keys).union(frontiers.keys)))
    }
}

extension TransactionBuffer: Sendable where Completion: Sendable {}
extension TransactionBuffer.Held: Sendable where Completion: Sendable {}
extension TransactionBuffer.Batch: Sendable where Completion: Sendable {}
