import Kafka
import ServiceSupport
import Synchronization

/// The relay's shared bookkeeping: offsets in flight, the in-flight gate, the assignment, and tasks
/// waiting for partitions to drain. One lock. It is also the one place a partition's frontier is stored
/// (`storeFrontier`, when an event's finish advances it).
///
/// Pauses and resumes (closing and opening the intake valve; Kafka partitions are not paused) are carried
/// out *under* the lock (through `partitionControl`), in the order the gate decides them: a finishing
/// event's resume must never land after a later pause (or the other way round), or intake would stay closed
/// while the gate is open. `partitionControl` never calls back into the relay, so this cannot deadlock.
final class RelayState: Sendable {
    /// Pauses (`true`) or resumes (`false`) partitions in the consumer.
    typealias PartitionControl = @Sendable (_ pause: Bool, _ partitions: [KafkaTopicPartition]) -> Void
    /// Stores a partition's new frontier: every offset up to `processedOffset` has its records in Kafka.
    typealias FrontierStore = @Sendable (_ partition: KafkaTopicPartition, _ processedOffset: Int64) -> Void

    private struct State {
        var ledger = OffsetLedger<KafkaTopicPartition>()
        var gate: InFlightGate
        var assigned: Set<KafkaTopicPartition> = []
        var drainWaiters: [DrainWaiter] = []
        var skippedUnassigned = 0
        var givenUp = 0
    }

    private struct DrainWaiter {
        let partitions: Set<KafkaTopicPartition>?
        let waiter: DeadlineWaiter<Bool>
    }

    private let state: BlockingMutex<State>
    private let partitionControl: PartitionControl
    private let storeFrontier: FrontierStore

    init(limits: InFlightGate.Limits, storeFrontier: @escaping FrontierStore, partitionControl: @escaping PartitionControl) {
        state = BlockingMutex(State(gate: InFlightGate(limits: limits)))
        self.storeFrontier = storeFrontier
        self.partitionControl = partitionControl
    }

    enum Admission {
        /// Not assigned here (any more) or already seen: skip the event.
        case skip
        case admitted
        /// Admitted, though it came after later offsets of its partition (see `OffsetLedger.Begin.late`).
        case admittedLate
    }

    /// Starts tracking an event; pauses every assigned partition when the gate closes.
    func admit(_ partition: KafkaTopicPartition, offset: Int64, bytes: Int) -> Admission {
        state.withLock { state in
            guard state.assigned.contains(partition) else {
                state.skippedUnassigned += 1
                return .skip
            }
            let begin = state.ledger.begin(partition, offset: offset)
            guard begin != .seen else { return .skip }
            if state.gate.admit(bytes: bytes) == .pause { partitionControl(true, Array(state.assigned)) }
            return begin == .late ? .admittedLate : .admitted
        }
    }

    /// Marks an event's results durable. Stores the partition's new frontier (`storeFrontier`) while still
    /// holding the lock, so concurrent finishes can never store frontiers out of order; resumes the
    /// assigned partitions when the gate opens.
    func finish(_ partition: KafkaTopicPartition, offset: Int64, bytes: Int) {
        state.withLock { state in
            if let frontier = state.ledger.finish(partition, offset: offset) {
                storeFrontier(partition, frontier - 1)
            }
            release(bytes: bytes, &state)
            Self.resolveDrained(&state)
        }
    }

    /// Gives up an event without a result (shutdown or revoke deadline passed): its offset is never stored.
    func abandon(bytes: Int) {
        state.withLock { state in
            state.givenUp += 1
            release(bytes: bytes, &state)
            Self.resolveDrained(&state)
        }
    }

    private func release(bytes: Int, _ state: inout State) {
        if state.gate.release(bytes: bytes) == .resume { partitionControl(false, Array(state.assigned)) }
    }

    /// Adds partitions; they join the pause while the gate is closed (the consumer hands them over
    /// unpaused).
    /// - Returns: every assigned partition.
    func assign(_ partitions: [KafkaTopicPartition]) -> [KafkaTopicPartition] {
        state.withLock { state in
            state.assigned.formUnion(partitions)
            if state.gate.isPaused, !partitions.isEmpty { partitionControl(true, partitions) }
            return Array(state.assigned)
        }
    }

    /// Forgets partitions (after a drain or a loss): unfinished events there are never stored.
    func release(_ partitions: [KafkaTopicPartition]) {
        state.withLock { state in
            for partition in partitions {
                state.assigned.remove(partition)
                state.ledger.release(partition)
            }
            Self.resolveDrained(&state)
        }
    }

    var assignedPartitions: [KafkaTopicPartition] { state.withLock { Array($0.assigned) } }
    var isPaused: Bool { state.withLock { $0.gate.isPaused } }
    var inFlightEvents: Int { state.withLock { $0.gate.events } }
    var inFlightBytes: Int { state.withLock { $0.gate.bytes } }
    /// See `OffsetLedger.gapsSteppedOver`.
    var offsetGapsSteppedOver: Int { state.withLock { $0.ledger.gapsSteppedOver } }
    /// See `OffsetLedger.seenBelowFrontier`.
    var offsetsSeenBelowFrontier: Int { state.withLock { $0.ledger.seenBelowFrontier } }
    /// Events skipped because their partition was not assigned here (any more).
    var skippedUnassigned: Int { state.withLock { $0.skippedUnassigned } }
    /// Events given up without a result (`abandon`).
    var givenUp: Int { state.withLock { $0.givenUp } }
    /// Events the ledger holds unfinished (the gate's count excludes those given up).
    var ledgerInFlight: Int { state.withLock { $0.ledger.totalInFlight } }

    /// Waits until no event of `partitions` (all partitions when `nil`) is in flight, or `timeout` passes.
    /// - Returns: `true` when drained, `false` on timeout (or cancellation).
    func waitUntilDrained(_ partitions: [KafkaTopicPartition]?, timeout: Duration) async -> Bool {
        let wanted = partitions.map(Set.init)
        return await DeadlineWaiter.wait(timeout: timeout, timedOut: false, cancelled: false) { waiter in
            state.withLock { state in
                if Self.isDrained(state, wanted) {
                    waiter.resolve(true)
                } else {
                    state.drainWaiters.removeAll { $0.waiter.isResolved }  // earlier waits that timed out
                    state.drainWaiters.append(DrainWaiter(partitions: wanted, waiter: waiter))
                }
            }
        }
    }

    private static func isDrained(_ state: State, _ partitions: Set<KafkaTopicPartition>?) -> Bool {
        guard let partitions else { return state.gate.events == 0 }
        return partitions.allSatisfy { state.ledger.inFlight($0) == 0 }
    }

    /// Resolving a waiter only enqueues its task, so it is done under the lock.
    private static func resolveDrained(_ state: inout State) {
        guard !state.drainWaiters.isEmpty else { return }
        let snapshot = state
        state.drainWaiters.removeAll { drain in
            guard drain.waiter.isResolved || isDrained(snapshot, drain.partitions) else { return false }
            drain.waiter.resolve(true)
            return true
        }
    }
}
