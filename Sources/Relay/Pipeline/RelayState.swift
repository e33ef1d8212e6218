import Kafka
import Synchronization

/// The relay's shared bookkeeping: offsets in flight, the in-flight gate, the assignment, and tasks
/// waiting for partitions to drain. One lock; methods return what to do and the caller does it outside.
final class RelayState: Sendable {
    private struct State {
        var ledger = OffsetLedger<KafkaTopicPartition>()
        var gate: InFlightGate
        var assigned: Set<KafkaTopicPartition> = []
        var drainWaiters: [DrainWaiter] = []
    }

    private struct DrainWaiter {
        let id: Int
        let partitions: Set<KafkaTopicPartition>?
        let continuation: CheckedContinuation<Void, Never>
    }

    private let state: Mutex<State>
    private let waiterIDs = Atomic<Int>(0)

    init(limits: InFlightGate.Limits) {
        state = Mutex(State(gate: InFlightGate(limits: limits)))
    }

    enum Admission {
        /// Not assigned here (any more) or already seen: skip the event.
        case skip
        case admitted(InFlightGate.Transition)
    }

    /// Starts tracking an event.
    func admit(_ partition: KafkaTopicPartition, offset: Int64, bytes: Int) -> Admission {
        state.withLock { state in
            guard state.assigned.contains(partition), state.ledger.begin(partition, offset: offset) else { return .skip }
            return .admitted(state.gate.admit(bytes: bytes))
        }
    }

    /// Marks an event's results durable. Stores the partition's new frontier through `store` while still
    /// holding the lock, so concurrent finishes can never store frontiers out of order.
    ///
    /// - Returns: whether the gate now says resume.
    func finish(
        _ partition: KafkaTopicPartition, offset: Int64, bytes: Int,
        store: (_ processedOffset: Int64) -> Void
    ) -> InFlightGate.Transition {
        let (transition, resumed) = state.withLock { state -> (InFlightGate.Transition, [CheckedContinuation<Void, Never>]) in
            if let frontier = state.ledger.finish(partition, offset: offset) {
                store(frontier - 1)
            }
            let transition = state.gate.release(bytes: bytes)
            return (transition, Self.takeDrained(&state))
        }
        resumed.forEach { $0.resume() }
        return transition
    }

    /// Gives up an event without a result (shutdown or revoke deadline passed): its offset is never stored.
    func abandon(bytes: Int) -> InFlightGate.Transition {
        state.withLock { $0.gate.release(bytes: bytes) }
    }

    func assign(_ partitions: [KafkaTopicPartition]) -> (paused: Bool, all: [KafkaTopicPartition]) {
        state.withLock { state in
            state.assigned.formUnion(partitions)
            return (state.gate.isPaused, Array(state.assigned))
        }
    }

    /// Forgets partitions (after a drain or a loss): unfinished events there are never stored.
    func release(_ partitions: [KafkaTopicPartition]) {
        let resumed = state.withLock { state in
            for partition in partitions {
                state.assigned.remove(partition)
                state.ledger.release(partition)
            }
            return Self.takeDrained(&state)
        }
        resumed.forEach { $0.resume() }
    }

    var assignedPartitions: [KafkaTopicPartition] { state.withLock { Array($0.assigned) } }
    var isPaused: Bool { state.withLock { $0.gate.isPaused } }
    var inFlightEvents: Int { state.withLock { $0.gate.events } }
    var inFlightBytes: Int { state.withLock { $0.gate.bytes } }

    /// Waits until no event of `partitions` (all partitions when `nil`) is in flight, or `timeout` passes.
    /// - Returns: `true` when drained, `false` on timeout.
    func waitUntilDrained(_ partitions: [KafkaTopicPartition]?, timeout: Duration) async -> Bool {
        let id = waiterIDs.add(1, ordering: .relaxed).newValue
        let wanted = partitions.map(Set.init)
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let drainedAlready = self.state.withLock { state in
                        if Self.isDrained(state, wanted) { return true }
                        state.drainWaiters.append(DrainWaiter(id: id, partitions: wanted, continuation: continuation))
                        return false
                    }
                    if drainedAlready { continuation.resume() }
                }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            // Whoever lost: wake the waiter if it is still parked, stop the timer.
            let parked = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let index = state.drainWaiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.drainWaiters.remove(at: index).continuation
            }
            parked?.resume()
            group.cancelAll()
            return first
        }
    }

    private static func isDrained(_ state: State, _ partitions: Set<KafkaTopicPartition>?) -> Bool {
        guard let partitions else { return state.gate.events == 0 }
        return partitions.allSatisfy { state.ledger.inFlight($0) == 0 }
    }

    private static func takeDrained(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        guard !state.drainWaiters.isEmpty else { return [] }
        var drained: [CheckedContinuation<Void, Never>] = []
        var waiting: [DrainWaiter] = []
        for waiter in state.drainWaiters {
            if isDrained(state, waiter.partitions) { drained.append(waiter.continuation) } else { waiting.append(waiter) }
        }
        state.drainWaiters = waiting
        return drained
    }
}
