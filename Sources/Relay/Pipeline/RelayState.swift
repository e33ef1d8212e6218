import APNsCore
import Kafka
import ServiceSupport
import Synchronization

/// The relay's shared bookkeeping: offsets in flight, the in-flight gate, the assignment, and tasks
/// waiting for partitions to drain. One lock. It is also the one place a partition's frontier is stored
/// (`storeFrontier`, when an event's finish advances it).
///
/// Holds and resumptions of a lane's intake (in the consumer; Kafka partitions are not paused) are carried
/// out *under* the lock (through `laneControl`), in the order the gate decides them: a finishing event's
/// resume must never land after a later hold (or the other way round), or intake would stay held while the
/// gate is open. `laneControl` never calls back into the relay, so this cannot deadlock.
final class RelayState: Sendable {
    /// Holds (`true`) or resumes (`false`) a lane's intake; `assigned` is every partition assigned here.
    typealias LaneControl = @Sendable (_ lane: DeliveryLane, _ hold: Bool, _ assigned: Set<KafkaTopicPartition>) -> Void
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
    private let laneControl: LaneControl
    private let storeFrontier: FrontierStore

    init(limits: InFlightGate.Limits, storeFrontier: @escaping FrontierStore, laneControl: @escaping LaneControl) {
        state = BlockingMutex(State(gate: InFlightGate(limits: limits)))
        self.storeFrontier = storeFrontier
        self.laneControl = laneControl
    }

    enum Admission {
        /// Not assigned here (any more) or already seen: skip the event.
        case skip
        case admitted
        /// Admitted, though it came after later offsets of its partition (see `OffsetLedger.Begin.late`).
        case admittedLate
    }

    /// What is in flight, read under the lock a change took anyway (for the gauges, without another lock).
    struct InFlightCounts {
        var events = 0
        var bytes = 0
        /// Events in flight in the lane of the event that changed them.
        var laneEvents = 0

        init(_ gate: InFlightGate, _ lane: DeliveryLane) {
            events = gate.events
            bytes = gate.bytes
            laneEvents = gate.events(in: lane)
        }
    }

    /// Starts tracking an event of `lane`; holds intake when the gate says so.
    func admit(_ partition: KafkaTopicPartition, offset: Int64, bytes: Int, lane: DeliveryLane = .bulk) -> Admission {
        admitCounting(partition, offset: offset, bytes: bytes, lane: lane).admission
    }

    /// `admit`, with what is in flight afterwards.
    func admitCounting(
        _ partition: KafkaTopicPartition, offset: Int64, bytes: Int, lane: DeliveryLane
    ) -> (admission: Admission, counts: InFlightCounts?) {
        state.withLock { state in
            guard state.assigned.contains(partition) else {
                state.skippedUnassigned += 1
                return (.skip, nil)
            }
            let begin = state.ledger.begin(partition, offset: offset)
            guard begin != .seen else { return (.skip, nil) }
            apply(state.gate.admit(bytes: bytes, lane: lane), state)
            return (begin == .late ? .admittedLate : .admitted, InFlightCounts(state.gate, lane))
        }
    }

    /// Marks an event's results durable. Stores the partition's new frontier (`storeFrontier`) while still
    /// holding the lock, so concurrent finishes can never store frontiers out of order; resumes intake when
    /// the gate opens.
    @discardableResult
    func finish(_ partition: KafkaTopicPartition, offset: Int64, bytes: Int, lane: DeliveryLane = .bulk) -> InFlightCounts {
        state.withLock { state in
            if let frontier = state.ledger.finish(partition, offset: offset) {
                storeFrontier(partition, frontier - 1)
            }
            apply(state.gate.release(bytes: bytes, lane: lane), state)
            Self.resolveDrained(&state)
            return InFlightCounts(state.gate, lane)
        }
    }

    /// Exactly-once mode: holds an event's records for a transaction (`hold`, under the lock, before the
    /// frontier that passes the event is stored: a transaction that commits that frontier must carry them)
    /// and finishes the event in the ledger only; it stays in the gate until `release`.
    /// - Returns: `false` when the partition is no longer assigned here (nothing held: give the event up).
    func finishHeld(_ partition: KafkaTopicPartition, offset: Int64, hold: () -> Void) -> Bool {
        state.withLock { state in
            guard state.assigned.contains(partition) else { return false }
            hold()
            if let frontier = state.ledger.finish(partition, offset: offset) {
                storeFrontier(partition, frontier - 1)
            }
            Self.resolveDrained(&state)
            return true
        }
    }

    /// Exactly-once mode, a held event's transaction committed: it leaves the gate.
    @discardableResult
    func release(bytes: Int, lane: DeliveryLane) -> InFlightCounts {
        state.withLock { state in
            apply(state.gate.release(bytes: bytes, lane: lane), state)
            Self.resolveDrained(&state)
            return InFlightCounts(state.gate, lane)
        }
    }

    /// Gives up an event without a result (shutdown or revoke deadline passed): its offset is never stored.
    @discardableResult
    func abandon(bytes: Int, lane: DeliveryLane = .bulk) -> InFlightCounts {
        state.withLock { state in
            state.givenUp += 1
            apply(state.gate.release(bytes: bytes, lane: lane), state)
            Self.resolveDrained(&state)
            return InFlightCounts(state.gate, lane)
        }
    }

    /// Carries out the gate's holds and resumptions (under the lock: see the type's comment).
    private func apply(_ changes: InFlightGate.Changes, _ state: State) {
        guard !changes.isEmpty else { return }
        for lane in DeliveryLane.allCases { if let hold = changes[lane] { laneControl(lane, hold, state.assigned) } }
    }

    /// Adds partitions (a held lane's intake holds theirs, too: the hold is per lane, in the consumer).
    /// - Returns: every assigned partition.
    func assign(_ partitions: [KafkaTopicPartition]) -> [KafkaTopicPartition] {
        state.withLock { state in
            state.assigned.formUnion(partitions)
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
    func isHeld(_ lane: DeliveryLane) -> Bool { state.withLock { $0.gate.isHeld(lane) } }
    var inFlightEvents: Int { state.withLock { $0.gate.events } }
    func inFlightEvents(in lane: DeliveryLane) -> Int { state.withLock { $0.gate.events(in: lane) } }
    /// The most events in flight at once, per lane, since the start.
    var peakInFlight: RelayService.LanePeaks {
        state.withLock { RelayService.LanePeaks(urgent: $0.gate.peakUrgentEvents, bulk: $0.gate.peakBulkEvents) }
    }
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
