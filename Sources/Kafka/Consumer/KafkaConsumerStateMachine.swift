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
/// Partitions the application pauses are paused in librdkafka. The machine knows which partitions
/// librdkafka holds paused (`pausedInClient`) and only ever asks to resume one of those: resuming a
/// partition that is not paused makes librdkafka (up to 2.3, Debian 12 has 2.0.2) restart its fetcher from
/// an earlier offset and deliver records again (confluentinc/librdkafka#4686), which showed as duplicate
/// results.
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
        var pause: [KafkaTopicPartition] = []
        var resume: [KafkaTopicPartition] = []
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
    /// Partitions whose pause flag is set in librdkafka. It outlives a revocation there (a partition paused
    /// when revoked comes back paused), so entries stay when partitions are removed.
    private(set) var pausedInClient: Set<KafkaTopicPartition> = []
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
        var action = pushControl(.partitionsAssigned(partitions))
        // One that was paused when it was revoked comes back paused in librdkafka and is resumed here (unless
        // the application paused it again), or nobody would resume it; the others are left alone (see
        // `pausedInClient`).
        reconcile(partitions, into: &action)
        return action
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

    /// - Returns: the partitions to pause in librdkafka: those assigned and not paused already. Others are
    ///   ignored (a partition's pause ends with its assignment).
    mutating func pauseByApplication(_ partitions: [KafkaTopicPartition]) -> [KafkaTopicPartition] {
        pausedByApplication.formUnion(partitions.filter(assigned.contains))
        var action = Action()
        reconcile(partitions, into: &action)
        return action.pause
    }

    /// - Returns: the partitions to resume now: assigned ones paused in librdkafka.
    mutating func resumeByApplication(_ partitions: [KafkaTopicPartition]) -> [KafkaTopicPartition] {
        pausedByApplication.subtract(partitions)
        var action = Action()
        reconcile(partitions, into: &action)
        return action.resume
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

    /// Adds to `action` the pauses and resumes that make librdkafka's pause flags of the assigned ones among
    /// `partitions` what the application wants, and records them in `pausedInClient`.
    private mutating func reconcile(_ partitions: some Sequence<KafkaTopicPartition>, into action: inout Action) {
        for partition in partitions where assigned.contains(partition) {
            let wanted = pausedByApplication.contains(partition)
            if wanted, pausedInClient.insert(partition).inserted {
                action.pause.append(partition)
            } else if !wanted, pausedInClient.remove(partition) != nil {
                action.resume.append(partition)
            }
        }
        action.pause.sort()
        action.resume.sort()
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
