/// The consumer's buffer and flow control, as a value type; ``KafkaConsumerShared`` keeps it behind a lock
/// and performs the returned actions outside the lock.
///
/// Two lanes: rebalance events (few, never dropped, always first) and messages (bounded by `capacity`).
/// When the message lane reaches `capacity` the machine asks for every assigned partition to be paused;
/// when the application has taken it down to half, it asks to resume those the application did not pause
/// itself. Polling never stops, so the member stays in the group while paused.
struct KafkaConsumerStateMachine {
    enum WaitOutcome: Sendable {
        case event(KafkaConsumerEvent)
        case finished
        case timedOut
    }

    typealias Waiter = CheckedContinuation<WaitOutcome, Never>

    /// Side effects for the caller to perform after releasing the lock.
    struct Action {
        var resumeWaiter: (Waiter, WaitOutcome)?
        var pause: [KafkaTopicPartition] = []
        var resume: [KafkaTopicPartition] = []
        var droppedMessages = 0
    }

    enum Next {
        case event(KafkaConsumerEvent, resume: [KafkaTopicPartition])
        case finished
        case empty
    }

    let capacity: Int
    private(set) var isFinished = false
    private(set) var isAutoPaused = false
    private(set) var assigned: Set<KafkaTopicPartition> = []
    private(set) var pausedByApplication: Set<KafkaTopicPartition> = []
    private var control: [KafkaConsumerEvent] = []
    private var messages = MessageQueue()
    private var waiter: (id: Int, continuation: Waiter)?

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
        if let waiter, control.isEmpty, messages.isEmpty, let first = rest.popFirst() {
            self.waiter = nil
            action.resumeWaiter = (waiter.continuation, .event(.message(first)))
        }
        for message in rest { messages.append(message) }
        if !isAutoPaused && messages.count >= capacity {
            isAutoPaused = true
            action.pause = assigned.sorted()
        }
        return action
    }

    mutating func received(_ message: KafkaConsumerMessage) -> Action {
        received([message])
    }

    mutating func partitionsAssigned(_ partitions: [KafkaTopicPartition]) -> Action {
        assigned.formUnion(partitions)
        var action = pushControl(.partitionsAssigned(partitions))
        // New partitions join the pause while the buffer is full.
        if isAutoPaused { action.pause = partitions }
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
        action.resume = resumeIfDrained()
        return action
    }

    mutating func finish() -> Action {
        var action = Action()
        guard !isFinished else { return action }
        isFinished = true
        action.droppedMessages = messages.count
        messages = MessageQueue()
        if let waiter {
            self.waiter = nil
            if control.isEmpty {
                action.resumeWaiter = (waiter.continuation, .finished)
            } else {
                action.resumeWaiter = (waiter.continuation, .event(control.removeFirst()))
            }
        }
        return action
    }

    // MARK: application

    mutating func next() -> Next {
        if !control.isEmpty {
            return .event(control.removeFirst(), resume: [])
        }
        if let message = messages.popFirst() {
            return .event(.message(message), resume: resumeIfDrained())
        }
        return isFinished ? .finished : .empty
    }

    /// Parks the single iterator until something arrives. Returns an action if something already had.
    mutating func wait(id: Int, _ continuation: Waiter) -> Action {
        var action = Action()
        switch next() {
        case .event(let event, let resume):
            action.resumeWaiter = (continuation, .event(event))
            action.resume = resume
        case .finished:
            action.resumeWaiter = (continuation, .finished)
        case .empty:
            precondition(waiter == nil, "KafkaConsumer.events supports a single iterator at a time")
            waiter = (id, continuation)
        }
        return action
    }

    /// Takes the parked iterator back (timeout or cancellation), if it is still parked.
    mutating func cancelWait(id: Int) -> Waiter? {
        guard let waiter, waiter.id == id else { return nil }
        self.waiter = nil
        return waiter.continuation
    }

    /// - Returns: the partitions to pause in librdkafka (those assigned; others are ignored by librdkafka).
    mutating func pauseByApplication(_ partitions: [KafkaTopicPartition]) -> [KafkaTopicPartition] {
        pausedByApplication.formUnion(partitions)
        return partitions
    }

    /// - Returns: the partitions to resume now; while the buffer keeps everything paused, none.
    mutating func resumeByApplication(_ partitions: [KafkaTopicPartition]) -> [KafkaTopicPartition] {
        pausedByApplication.subtract(partitions)
        return isAutoPaused ? [] : partitions
    }

    // MARK: private

    private mutating func pushControl(_ event: KafkaConsumerEvent) -> Action {
        var action = Action()
        if let waiter {
            // A parked iterator means both lanes are empty.
            self.waiter = nil
            action.resumeWaiter = (waiter.continuation, .event(event))
        } else {
            control.append(event)
        }
        return action
    }

    private mutating func resumeIfDrained() -> [KafkaTopicPartition] {
        guard isAutoPaused, messages.count <= capacity / 2 else { return [] }
        isAutoPaused = false
        return assigned.subtracting(pausedByApplication).sorted()
    }
}

/// FIFO of messages: an array with a moving head, compacted now and then (amortised O(1)). Slots are
/// optional so that popping moves a record out instead of copying it (no retain/release per field).
struct MessageQueue {
    private var storage: [KafkaConsumerMessage?] = []
    private var head = 0

    var count: Int { storage.count - head }
    var isEmpty: Bool { count == 0 }

    mutating func append(_ message: KafkaConsumerMessage) { storage.append(message) }

    mutating func popFirst() -> KafkaConsumerMessage? {
        guard head < storage.count else { return nil }
        let message = storage[head].take()
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 4096 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return message
    }

    mutating func removeAll(where shouldRemove: (KafkaConsumerMessage) -> Bool) {
        storage.removeFirst(head)
        head = 0
        storage.removeAll { $0.map(shouldRemove) ?? true }
    }
}
