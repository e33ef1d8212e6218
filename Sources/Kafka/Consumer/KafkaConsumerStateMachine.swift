import DequeModule
import ServiceSupport

/// The consumer's buffer and flow control, as a value type; ``KafkaConsumerShared`` keeps it behind a lock
/// and performs the returned actions outside the lock.
///
/// Two lanes: rebalance events (few, never dropped, always first) and messages (bounded by `capacity`).
/// While the message lane is full the poll thread stops taking records out of librdkafka
/// (``hasRoom()`` says no), so they wait in librdkafka's own prefetch, which stops fetching at
/// `queued.min.messages` / `queued.max.messages.kbytes`; the poll thread keeps serving rebalance events.
/// When the application has taken the lane down to half, the machine asks for the poll thread to be woken
/// (``Action/wakePoller``). Nothing is paused for backpressure: a pause in librdkafka 2.0.2 throws away
/// its prefetch and fetching restarted ~0.7 s after the resume, which idled the relay for most of each
/// cycle at full speed (Benchmarks/README.md).
///
/// A partition the application pauses is not paused in librdkafka: its fetch queue stops being forwarded to
/// the record queue (``Action/unforward``), so its records wait there, bounded by the same prefetch limits,
/// and resuming forwards it again (``Action/forward``), which moves what waited to the record queue in order.
/// librdkafka 2.0.2's own pause and resume are operations with a version barrier that is taken before the
/// operation is queued: one issued by the application while librdkafka's main thread starts or stops the
/// same partition's fetcher (right after an assignment) can be queued behind a newer one and then dropped
/// as outdated. A dropped resume left the partition paused for good (a flaky test showed it: fetch state
/// active, never fetched). Forwarding has no such barrier. A pause ends with the partition's assignment.
struct KafkaConsumerStateMachine {
    enum WaitOutcome: Sendable {
        case event(KafkaConsumerEvent)
        case finished
        case timedOut
    }

    /// The parked iterator. Resolved here, under the caller's lock: a waiter its deadline or cancellation
    /// resolved first refuses the event (`resolve` returns `false`), which then stays in the buffer.
    typealias Waiter = DeadlineWaiter<WaitOutcome>

    /// Side effects for the caller to perform after releasing the lock.
    struct Action {
        /// Stop forwarding these partitions' records (the application paused them).
        var unforward: [KafkaTopicPartition] = []
        /// Forward these partitions' records again (resumed).
        var forward: [KafkaTopicPartition] = []
        var droppedMessages = 0
        /// The poll thread waits for room in the buffer, and there is room now.
        var wakePoller = false
    }

    enum Next {
        case event(KafkaConsumerEvent, wakePoller: Bool)
        case finished
        case empty
    }

    let capacity: Int
    private(set) var isFinished = false
    /// The poll thread found the buffer full and sleeps until it is woken.
    private(set) var pollerWaitsForRoom = false
    private(set) var assigned: Set<KafkaTopicPartition> = []
    private(set) var pausedByApplication: Set<KafkaTopicPartition> = []
    private var control: [KafkaConsumerEvent] = []
    private var messages = MessageQueue()
    private var waiter: Waiter?
    /// Someone waiting for rebalance events only (``KafkaConsumerEvents/nextRebalanceEvents()``).
    private var controlWaiter: DeadlineWaiter<Bool>?

    init(capacity: Int) {
        self.capacity = capacity
    }

    var bufferedMessageCount: Int { messages.count }

    // MARK: poll thread

    /// Records polled in one go, in order. One call per batch keeps lock and wake-up costs per batch.
    mutating func received(_ batch: [KafkaConsumerMessage]) -> Action {
        var action = Action()
        guard !isFinished else {
            action.droppedMessages = batch.count
            return action
        }
        var rest = batch[...]
        if control.isEmpty, messages.isEmpty, let first = rest.first, hand(.message(first)) {
            rest = rest.dropFirst()
        }
        for message in rest { messages.append(message) }
        return action
    }

    /// Asked by the poll thread before it takes records out of librdkafka: whether the message lane has
    /// room. When it has none, the application's taking it down to half wakes the poll thread.
    mutating func hasRoom() -> Bool {
        if messages.count < capacity { return true }
        pollerWaitsForRoom = true
        return false
    }

    mutating func received(_ message: KafkaConsumerMessage) -> Action {
        received([message])
    }

    mutating func partitionsAssigned(_ partitions: [KafkaTopicPartition]) -> Action {
        assigned.formUnion(partitions)
        return pushControl(.partitionsAssigned(partitions))
    }

    /// The assigned partitions whose records should be forwarded to the record queue (not paused).
    var forwardedPartitions: [KafkaTopicPartition] {
        assigned.subtracting(pausedByApplication).sorted()
    }

    /// For both a revocation and a loss: forget the partitions and drop their unprocessed messages.
    mutating func partitionsRemoved(_ partitions: [KafkaTopicPartition], event: KafkaConsumerEvent) -> Action {
        let removed = Set(partitions)
        assigned.subtract(removed)
        pausedByApplication.subtract(removed)
        let before = messages.count
        messages.removeAll { removed.contains($0.topicPartition) }
        var action = pushControl(event)
        action.droppedMessages = before - messages.count
        action.wakePoller = wakePollerIfDrained()
        return action
    }

    mutating func finish() -> Action {
        var action = Action()
        guard !isFinished else { return action }
        isFinished = true
        action.droppedMessages = messages.count
        messages = MessageQueue()
        if let controlWaiter {
            self.controlWaiter = nil
            controlWaiter.resolve(true)
        }
        if let waiter {
            self.waiter = nil
            if control.isEmpty {
                waiter.resolve(.finished)
            } else if waiter.resolve(.event(control[0])) {
                control.removeFirst()
            }
        }
        return action
    }

    // MARK: application

    mutating func next() -> Next {
        if !control.isEmpty {
            return .event(control.removeFirst(), wakePoller: false)
        }
        if let message = messages.popFirst() {
            return .event(.message(message), wakePoller: wakePollerIfDrained())
        }
        return isFinished ? .finished : .empty
    }

    /// Resolves `newWaiter` once a rebalance event is buffered (at once if one is) or the consumer finished.
    mutating func waitForControl(_ newWaiter: DeadlineWaiter<Bool>) {
        if let controlWaiter, controlWaiter.isResolved { self.controlWaiter = nil }
        precondition(controlWaiter == nil, "one nextRebalanceEvents() at a time")
        if !control.isEmpty || isFinished {
            newWaiter.resolve(true)
        } else {
            controlWaiter = newWaiter
        }
    }

    /// Takes every buffered rebalance event, leaving the messages.
    mutating func takeControl() -> [KafkaConsumerEvent] {
        defer { control.removeAll() }
        return control
    }

    /// Parks the single iterator until something arrives, or hands it what has arrived already.
    mutating func wait(_ newWaiter: Waiter) -> Action {
        var action = Action()
        // A parked waiter that its deadline or cancellation resolved is no longer waiting.
        if let waiter, waiter.isResolved { self.waiter = nil }
        precondition(waiter == nil, "KafkaConsumer.events supports a single iterator at a time")
        if !control.isEmpty {
            if newWaiter.resolve(.event(control[0])) { control.removeFirst() }
        } else if let message = messages.first {
            if newWaiter.resolve(.event(.message(message))) {
                _ = messages.popFirst()
                action.wakePoller = wakePollerIfDrained()
            }
        } else if isFinished {
            newWaiter.resolve(.finished)
        } else {
            waiter = newWaiter
        }
        return action
    }

    /// - Returns: what to stop forwarding: the partitions that are assigned and were not paused already.
    ///   Others are ignored (a partition's pause ends with its assignment).
    mutating func pauseByApplication(_ partitions: [KafkaTopicPartition]) -> Action {
        var action = Action()
        for partition in Set(partitions) where assigned.contains(partition) && pausedByApplication.insert(partition).inserted {
            action.unforward.append(partition)
        }
        action.unforward.sort()
        return action
    }

    /// - Returns: what to forward again: the assigned partitions among `partitions` that were paused; and a
    ///   wake-up for the poll thread, which may sleep with nothing to read.
    mutating func resumeByApplication(_ partitions: [KafkaTopicPartition]) -> Action {
        var action = Action()
        for partition in Set(partitions) where pausedByApplication.remove(partition) != nil && assigned.contains(partition) {
            action.forward.append(partition)
        }
        action.forward.sort()
        action.wakePoller = !action.forward.isEmpty
        return action
    }

    // MARK: private

    private mutating func pushControl(_ event: KafkaConsumerEvent) -> Action {
        // A parked iterator means both lanes are empty.
        if !hand(event) {
            control.append(event)
            if let controlWaiter {
                self.controlWaiter = nil
                controlWaiter.resolve(true)
            }
        }
        return Action()
    }

    /// Gives `event` to the parked iterator, if one is parked and still waiting.
    /// - Returns: `false` when nobody took it (the caller buffers it).
    private mutating func hand(_ event: KafkaConsumerEvent) -> Bool {
        guard let waiter else { return false }
        self.waiter = nil
        return waiter.resolve(.event(event))
    }

    /// Whether to wake a poll thread that waits for room: once the buffer is down to half (not at the first
    /// free slot, so that it takes a batch per wake-up).
    private mutating func wakePollerIfDrained() -> Bool {
        guard pollerWaitsForRoom, messages.count <= capacity / 2 else { return false }
        pollerWaitsForRoom = false
        return true
    }
}

/// FIFO of messages (a `Deque`: popping moves a record out, O(1)).
struct MessageQueue {
    private var storage = Deque<KafkaConsumerMessage>()

    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }
    var first: KafkaConsumerMessage? { storage.first }

    mutating func append(_ message: KafkaConsumerMessage) { storage.append(message) }
    mutating func popFirst() -> KafkaConsumerMessage? { storage.popFirst() }
    mutating func removeAll(where shouldRemove: (KafkaConsumerMessage) -> Bool) { storage.removeAll(where: shouldRemove) }
}
