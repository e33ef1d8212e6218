import DequeModule
import ServiceSupport

/// The consumer's buffer and flow control, as a value type; ``KafkaConsumerShared`` keeps it behind a lock
/// and performs the returned actions outside the lock.
///
/// Rebalance events (few, never dropped, always first), then two lanes of messages, urgent before bulk
/// (``KafkaConsumerLane``), each bounded by `capacity` messages and `byteCapacity` bytes of their footprint. While a lane is full the poll thread stops taking
/// that lane's records out of librdkafka (``hasRoom(_:)`` says no), so they wait in librdkafka's own
/// prefetch, which stops fetching at `queued.min.messages` / `queued.max.messages.kbytes`; the other lane
/// and rebalance events keep flowing. When the application has taken a lane down to half, the machine asks
/// for the poll thread to be woken (``Action/wakePoller``). The application may hold a lane
/// (``setHeld(_:_:)``, its own backpressure): the iterator then hands out only the other lane and
/// rebalance events. Nothing is paused in librdkafka for backpressure: a pause in librdkafka 2.0.2 throws
/// away its prefetch and fetching restarted ~0.7 s after the resume, which idled the relay for most of each
/// cycle at full speed (Benchmarks/README.md).
///
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
        var droppedMessages = 0
        /// The poll thread waits for room in the buffer, and there is room now.
        var wakePoller = false
    }

    enum Next {
        case event(KafkaConsumerEvent, wakePoller: Bool)
        case finished
        case empty
    }

    /// One lane's buffered messages and flow control.
    private struct Lane {
        var messages = MessageQueue()
        /// The poll thread found this lane full and takes none of its records until it is woken.
        var pollerWaitsForRoom = false
        /// The application holds the lane (``KafkaConsumer/hold(_:)``): its messages stay buffered.
        var isHeld = false
    }

    /// Messages per lane (each bounded by `capacity`).
    let capacity: Int
    /// Bytes per lane (their ``KafkaConsumerMessage/footprint``), each bounded by this too.
    let byteCapacity: Int
    private(set) var isFinished = false
    private(set) var assigned: Set<KafkaTopicPartition> = []
    private var control: [KafkaConsumerEvent] = []
    /// Each assigned partition's assignment, numbered: received messages carry it, so that `putBack` can
    /// tell a message of an earlier assignment of the same partition (lost, then assigned again).
    private var epochs: [KafkaTopicPartition: UInt32] = [:]
    private var nextEpoch: UInt32 = 1
    /// Indexed by `KafkaConsumerLane.rawValue`: urgent first.
    private var lanes = [Lane(), Lane()]
    private var waiter: Waiter?
    /// Someone waiting for rebalance events only (``KafkaConsumerEvents/nextRebalanceEvents()``).
    private var controlWaiter: DeadlineWaiter<Bool>?

    init(capacity: Int, byteCapacity: Int = .max) {
        self.capacity = capacity
        self.byteCapacity = byteCapacity
    }

    var bufferedMessageCount: Int { lanes[0].messages.count + lanes[1].messages.count }

    func bufferedMessageCount(_ lane: KafkaConsumerLane) -> Int { lanes[lane.rawValue].messages.count }

    /// The footprint of `lane`'s buffered messages.
    func bufferedBytes(_ lane: KafkaConsumerLane) -> Int { lanes[lane.rawValue].messages.bytes }

    func isHeld(_ lane: KafkaConsumerLane) -> Bool { lanes[lane.rawValue].isHeld }

    /// Whether the poll thread waits for room in `lane`.
    func pollerWaitsForRoom(_ lane: KafkaConsumerLane = .bulk) -> Bool { lanes[lane.rawValue].pollerWaitsForRoom }

    // MARK: poll thread

    /// Records polled in one go, in order (each goes to its `lane`). One call per batch keeps lock and
    /// wake-up costs per batch.
    mutating func received(_ batch: [KafkaConsumerMessage]) -> Action {
        var batch = batch
        return received(taking: &batch)
    }

    /// As ``received(_:)``, moving the records out of `batch` (left empty, with its capacity): iterating would
    /// copy each record, a retain and a release for each of its buffers.
    mutating func received(taking batch: inout [KafkaConsumerMessage]) -> Action {
        var action = Action()
        guard !isFinished else {
            action.droppedMessages = batch.count
            batch.removeAll(keepingCapacity: true)
            return action
        }
        // A batch holds runs of one partition: its epoch is looked up once per run.
        var current: (partition: KafkaTopicPartition, epoch: UInt32)?
        defer { batch.removeAll(keepingCapacity: true) }
        for index in batch.indices {
            // Moved out, an empty record left in its place (a copy would retain each of its buffers).
            var message = KafkaConsumerMessage(topic: "", partition: 0, offset: 0, key: nil, value: nil)
            swap(&message, &batch[index])
            let partition = message.topicPartition
            if current?.partition != partition { current = (partition, epochs[partition] ?? 0) }
            message.assignmentEpoch = current!.epoch
            let lane = message.lane.rawValue
            // A parked iterator means nothing it may take is buffered: the first message of a lane that is
            // not held goes to it (whatever came before it in a held lane).
            if waiter != nil, !lanes[lane].isHeld, lanes[lane].messages.isEmpty, hand(.message(message)) { continue }
            lanes[lane].messages.append(consume message)
        }
        return action
    }

    /// Asked by the poll thread before it takes `lane`'s records out of librdkafka: whether that lane has
    /// room. When it has none, the application's taking it down to half wakes the poll thread.
    mutating func hasRoom(_ lane: KafkaConsumerLane = .bulk) -> Bool {
        let messages = lanes[lane.rawValue].messages
        if messages.count < capacity && messages.bytes < byteCapacity { return true }
        lanes[lane.rawValue].pollerWaitsForRoom = true
        return false
    }

    mutating func received(_ message: KafkaConsumerMessage) -> Action {
        received([message])
    }

    mutating func partitionsAssigned(_ partitions: [KafkaTopicPartition]) -> Action {
        assigned.formUnion(partitions)
        for partition in partitions {
            epochs[partition] = nextEpoch
            nextEpoch &+= 1
        }
        return pushControl(.partitionsAssigned(partitions))
    }

    /// The assigned partitions, whose records are forwarded to the record queues.
    var forwardedPartitions: [KafkaTopicPartition] { assigned.sorted() }

    /// For both a revocation and a loss: forget the partitions and drop their unprocessed messages.
    mutating func partitionsRemoved(_ partitions: [KafkaTopicPartition], event: KafkaConsumerEvent) -> Action {
        let removed = Set(partitions)
        assigned.subtract(removed)
        for partition in removed { epochs[partition] = nil }
        let before = bufferedMessageCount
        for lane in lanes.indices { lanes[lane].messages.removeAll { removed.contains($0.topicPartition) } }
        var action = pushControl(event)
        action.droppedMessages = before - bufferedMessageCount
        action.wakePoller = wakePollerIfDrained()
        return action
    }

    mutating func finish() -> Action {
        var action = Action()
        guard !isFinished else { return action }
        isFinished = true
        action.droppedMessages = bufferedMessageCount
        for lane in lanes.indices { lanes[lane].messages = MessageQueue() }
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

    /// The next event: rebalance events first, then urgent messages, then bulk ones (a held lane's are
    /// skipped).
    mutating func next() -> Next {
        if !control.isEmpty {
            return .event(control.removeFirst(), wakePoller: false)
        }
        if let lane = firstReadyLane, let message = lanes[lane].messages.popFirst() {
            return .event(.message(message), wakePoller: wakePollerIfDrained(lane))
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
        } else if let lane = firstReadyLane {
            if newWaiter.resolve(.event(.message(lanes[lane].messages.first!))) {
                _ = lanes[lane].messages.popFirst()
                action.wakePoller = wakePollerIfDrained(lane)
            }
        } else if isFinished {
            newWaiter.resolve(.finished)
        } else {
            waiter = newWaiter
        }
        return action
    }

    /// Holds (`true`) or releases `lane`: a held lane's messages stay buffered, and its records in
    /// librdkafka once the buffer is full, while the other lane and rebalance events flow. Releasing hands
    /// a parked iterator the lane's first message.
    mutating func setHeld(_ lane: KafkaConsumerLane, _ held: Bool) -> Action {
        var action = Action()
        guard lanes[lane.rawValue].isHeld != held else { return action }
        lanes[lane.rawValue].isHeld = held
        if !held, waiter != nil, let message = lanes[lane.rawValue].messages.first, hand(.message(message)) {
            _ = lanes[lane.rawValue].messages.popFirst()
            action.wakePoller = wakePollerIfDrained(lane.rawValue)
        }
        return action
    }

    /// Puts messages the application took but will not process yet back at the front of their lanes, in
    /// their order: they come out again first. For the rest of a batch taken just before the application held
    /// a lane. Messages of partitions no longer assigned, or assigned again since (lost, then assigned: the
    /// new assignment fetches from the committed offset, before them), are dropped.
    mutating func putBack(_ messages: [KafkaConsumerMessage]) -> Action {
        var action = Action()
        guard !isFinished else {
            action.droppedMessages = messages.count
            return action
        }
        var kept = 0
        for message in messages.reversed() where epochs[message.topicPartition] == message.assignmentEpoch {
            lanes[message.lane.rawValue].messages.prepend(message)
            kept += 1
        }
        action.droppedMessages = messages.count - kept
        if let waiter, waiter.isResolved { self.waiter = nil }
        if waiter != nil, let lane = firstReadyLane,
            hand(.message(lanes[lane].messages.first!))
        {
            _ = lanes[lane].messages.popFirst()
        }
        return action
    }

    // MARK: private

    /// The first lane, urgent first, that is not held and has a message.
    private var firstReadyLane: Int? {
        lanes.indices.first { !lanes[$0].isHeld && !lanes[$0].messages.isEmpty }
    }

    private mutating func pushControl(_ event: KafkaConsumerEvent) -> Action {
        // A parked iterator means nothing it may take is buffered.
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

    /// Whether to wake a poll thread that waits for room in a lane: once that lane is down to half (not at
    /// the first free slot, so that it takes a batch per wake-up).
    private mutating func wakePollerIfDrained(_ lane: Int) -> Bool {
        guard lanes[lane].pollerWaitsForRoom, lanes[lane].messages.count <= capacity / 2,
              lanes[lane].messages.bytes <= byteCapacity / 2 else { return false }
        lanes[lane].pollerWaitsForRoom = false
        return true
    }

    /// As `wakePollerIfDrained(_:)`, for any lane.
    private mutating func wakePollerIfDrained() -> Bool {
        var wake = false
        for lane in lanes.indices where wakePollerIfDrained(lane) { wake = true }
        return wake
    }
}

/// FIFO of messages (a `Deque`: popping moves a record out, O(1)), with their footprint's sum.
struct MessageQueue {
    private var storage = Deque<KafkaConsumerMessage>()
    /// The sum of the messages' ``KafkaConsumerMessage/footprint``.
    private(set) var bytes = 0

    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }
    var first: KafkaConsumerMessage? { storage.first }

    mutating func append(_ message: consuming KafkaConsumerMessage) {
        bytes += message.footprint
        storage.append(message)
    }

    mutating func prepend(_ message: consuming KafkaConsumerMessage) {
        bytes += message.footprint
        storage.prepend(message)
    }

    mutating func popFirst() -> KafkaConsumerMessage? {
        guard let message = storage.popFirst() else { return nil }
        bytes -= message.footprint
        return message
    }

    mutating func removeAll(where shouldRemove: (KafkaConsumerMessage) -> Bool) {
        storage.removeAll(where: shouldRemove)
        bytes = storage.reduce(0) { $0 + $1.footprint }
    }
}
