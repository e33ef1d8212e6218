import CRdKafka
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import ServiceSupport
import Synchronization

/// State shared by the application side of a consumer, its poll thread and librdkafka's rebalance
/// callback. Holds no reference to the `rd_kafka_t` (callers pass it in), so the client can own this object
/// through its callback context without a retain cycle.
final class KafkaConsumerShared: KafkaRebalanceHandling {
    let logger: Logger
    let isCooperative: Bool
    let revocationDrainTimeout: Duration
    let pollTimeoutMilliseconds: Int32
    let errorHandler: (@Sendable (KafkaError) -> Void)?

    let state: BlockingMutex<KafkaConsumerStateMachine>
    /// Set once close begins: the poll loop stops and revocations are no longer waited for.
    let isClosing = Atomic<Bool>(false)
    /// The lists `KafkaConsumer.storeOffset` reuses; dropped after each rebalance and at close.
    let offsetStoreLists = OffsetStoreLists()
    /// The revocation the poll thread is waiting on, so that close can release it.
    let pendingRevocation = BlockingMutex<KafkaPartitionRevocation?>(nil)
    let closed = Latch<Void>()
    let closeResult = BlockingMutex<KafkaError?>(nil)
    /// Set by the first fatal error (see ``KafkaConsumer/fatalError``).
    let fatalError = Latch<KafkaError>()
    /// Set by the first refusal of the client's credentials (see ``KafkaConsumer/credentialsRefused``).
    let credentialsRefused = Latch<KafkaError>()
    /// Whether the member has joined its group: set by an assignment (even an empty one), cleared when the
    /// assignment is lost (the member was dropped from the group) or could not be applied.
    let isJoined = Atomic<Bool>(false)
    /// Kafka is unreachable: librdkafka said every broker is down (`_ALL_BROKERS_DOWN`), or no broker answered
    /// the reachability probe; cleared once a metadata request succeeds (`KafkaConsumerShared+Reachability`).
    let brokersDown = Atomic<Bool>(false)
    /// The reachability probe runs (one at a time).
    let isProbing = Atomic<Bool>(false)
    /// The poll thread sleeps on the read end; librdkafka (a queue became non-empty) and the application
    /// (room in the buffer, close) write to the write end.
    private let wakePipe: (read: Int32, write: Int32)
    /// The queues assigned partitions' records are forwarded to (see `runPollLoop`); the lock is uncontended.
    private let recordQueues = BlockingMutex(RecordQueues())
    /// Topics whose records go to the urgent lane.
    let urgentTopics: Set<String>
    /// How much of a record's headers is copied (``KafkaConsumerConfiguration/headerLimits``).
    let headerLimits: KafkaConsumerConfiguration.HeaderLimits
    /// A topic queue's limits and state, copied per queue by the poll thread (see `FetchNudger`).
    private let fetchQueue: FetchQueueWatch
    /// Whether the poll thread nudges drained queues' fetchers (librdkafka before 2.3).
    private let wakesFetcher: Bool
    /// Wakes the fetcher of a topic queue the poll thread drained (on a thread of its own, from `runPollLoop`).
    let nudger: FetchNudger

    init(configuration: KafkaConsumerConfiguration, fetchQueue: FetchQueueWatch, logger: Logger) {
        self.logger = logger
        self.fetchQueue = fetchQueue
        // librdkafka 2.3+ refills a drained queue by itself (`fetch.queue.backoff.ms`, set by the configuration).
        self.wakesFetcher = configuration.wakesFetcher && !KafkaLibrary.hasFetchQueueBackoff
        self.nudger = FetchNudger(logger: logger)
        self.isCooperative = configuration.partitionAssignmentStrategy.isCooperative
        self.revocationDrainTimeout = configuration.revocationDrainTimeout
        self.pollTimeoutMilliseconds = Int32(clamping: configuration.pollTimeout.kafkaMilliseconds)
        self.errorHandler = configuration.errorHandler
        self.urgentTopics = configuration.urgentTopics
        self.headerLimits = configuration.headerLimits
        self.state = BlockingMutex(KafkaConsumerStateMachine(capacity: configuration.bufferCapacity, byteCapacity: configuration.bufferBytes))
        var fds: [Int32] = [-1, -1]
        // A socket pair rather than pipe2 (not visible to Swift without _GNU_SOURCE): created non-blocking
        // and close-on-exec in one call.
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let rc = socketpair(AF_UNIX, type, 0, &fds)
        precondition(rc == 0, "socketpair failed: errno \(errno)")
        self.wakePipe = (fds[0], fds[1])
    }

    deinit {
        close(wakePipe.read)
        close(wakePipe.write)
    }

    /// Wakes the poll thread if it sleeps (a full pipe means a wake-up is pending already).
    func wakePollThread() {
        var byte: UInt8 = 1
        _ = write(wakePipe.write, &byte, 1)
    }

    /// Runs a state machine transition under the lock, then the side effects it asks for. A parked iterator
    /// is resolved under the lock (resolving only enqueues its task).
    func update(_ transition: (inout KafkaConsumerStateMachine) -> KafkaConsumerStateMachine.Action) {
        let action = state.withLock { transition(&$0) }
        if action.droppedMessages > 0 {
            logger.debug("dropped unprocessed buffered messages", metadata: ["count": "\(action.droppedMessages)"])
        }
        if action.wakePoller { wakePollThread() }
    }

    /// The lane `topic`'s records are read in.
    func lane(of topic: String) -> KafkaConsumerLane {
        urgentTopics.contains(topic) ? .urgent : .bulk
    }

    /// Points the partitions' fetch queues at their topic's record queue (or at nothing: their records then
    /// wait in librdkafka). Forwarding again moves what waited, in order.
    func setForwarding(_ forwarded: Bool, _ partitions: [KafkaTopicPartition], handle: OpaquePointer) {
        for partition in partitions {
            let queue = recordQueues.withLock { queues in
                queues.isOpen ? queues.queue(for: partition.topic, lane: lane(of: partition.topic), handle: handle, wake: wakePipe.write) : nil
            }
            guard let records = queue else { return }
            guard let queue = rd_kafka_queue_get_partition(handle, partition.topic, partition.partition) else {
                // Only a producer handle has no partition queues; this would leave the partition unread.
                report(KafkaError(code: .rebalance, message: "no fetch queue for \(partition); its records would not be read"))
                continue
            }
            rd_kafka_queue_forward(queue, forwarded ? records : nil)
            rd_kafka_queue_destroy(queue)
        }
    }

    /// Forwards every assigned partition again. librdkafka clears a partition's forward when it
    /// stops the partition's fetcher, asynchronously: a stop left over from a revocation can land after the
    /// next assignment forwarded the partition again, and its records would then wait in librdkafka unread.
    /// Forwarding a forwarded queue changes nothing, so the poll thread simply does this now and then.
    func refreshForwarding(handle: OpaquePointer) {
        state.withLock { machine in
            setForwarding(true, machine.forwardedPartitions, handle: handle)
        }
    }

    func report(_ error: KafkaError) {
        logger.error("consumer error", metadata: ["error": "\(error)"])
        if error.isFatal { fatalError.set(error) }
        errorHandler?(error)
    }

    // MARK: rebalance (runs on the thread serving rd_kafka_consumer_poll or rd_kafka_consumer_close)

    func handleRebalance(
        handle: OpaquePointer, error: rd_kafka_resp_err_t,
        partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) {
        let topicPartitions = TopicPartitionList.partitions(in: partitions)
        // After the drain: a revoked partition's list (and librdkafka's reference on it) goes with it.
        defer { offsetStoreLists.reset() }
        flushPolledBatch(handle: handle)
        switch error {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            logger.info("partitions assigned", metadata: ["partitions": "\(topicPartitions)"])
            // Before they are assigned: librdkafka then keeps the forward when it starts fetching (it
            // forwards to the consumer queue only where the application set none).
            setForwarding(true, topicPartitions, handle: handle)
            applyAssignment(handle: handle, partitions: partitions, assign: true)
            update { $0.partitionsAssigned(topicPartitions) }
            isJoined.store(true, ordering: .releasing)

        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            if rd_kafka_assignment_lost(handle) != 0 {
                // Already gone from the group: nothing to drain into, commits would fail.
                logger.warning("partitions lost", metadata: ["partitions": "\(topicPartitions)"])
                isJoined.store(false, ordering: .releasing)
                update {
                    $0.partitionsRemoved(topicPartitions, event: .partitionsLost(topicPartitions))
                }
            } else {
                revoke(topicPartitions, handle: handle)
            }
            applyAssignment(handle: handle, partitions: partitions, assign: false)

        default:
            // librdkafka hands over an assignment error (e.g. all assignors failed): drop the assignment, as
            // librdkafka's documentation prescribes, and tell the application.
            let failure = KafkaError(code: .rebalance, rawResponse: error)
            report(failure)
            isJoined.store(false, ordering: .releasing)
            update { state in
                state.partitionsRemoved(Array(state.assigned), event: .partitionsLost(Array(state.assigned)))
            }
            if isCooperative {
                // The cooperative protocol forbids rd_kafka_assign; give up the current assignment instead.
                var current: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
                if rd_kafka_assignment(handle, &current) == RD_KAFKA_RESP_ERR_NO_ERROR, let current {
                    defer { rd_kafka_topic_partition_list_destroy(current) }
                    applyAssignment(handle: handle, partitions: current, assign: false)
                }
            } else {
                applyAssignment(handle: handle, partitions: nil, assign: false)
            }
        }
    }

    /// Hands the revocation to the application and holds the partitions until it acknowledges or the
    /// drain timeout passes. Blocking here is what keeps librdkafka from forgetting the partitions (it is
    /// inside rd_kafka_consumer_poll, so max.poll.interval.ms is not running).
    private func revoke(_ partitions: [KafkaTopicPartition], handle: OpaquePointer) {
        let revocation = KafkaPartitionRevocation(partitions: partitions)
        logger.info("partitions revoked, waiting for the application to drain",
                    metadata: ["partitions": "\(partitions)"])
        update { $0.partitionsRemoved(partitions, event: .partitionsRevoked(revocation)) }
        guard !isClosing.load(ordering: .acquiring) else {
            // Closing: the application asked to leave and has drained already; don't hold the group up.
            return
        }
        pendingRevocation.withLock { $0 = revocation }
        defer { pendingRevocation.withLock { $0 = nil } }
        if isClosing.load(ordering: .acquiring) { return }
        if !revocation.waitForAcknowledgement(timeout: revocationDrainTimeout) {
            logger.warning("revocation not acknowledged within the drain timeout; releasing the partitions",
                           metadata: ["partitions": "\(partitions)", "timeout": "\(revocationDrainTimeout)"])
        }
    }

    private func applyAssignment(
        handle: OpaquePointer, partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?, assign: Bool
    ) {
        if isCooperative, let partitions {
            let error = assign ? rd_kafka_incremental_assign(handle, partitions) : rd_kafka_incremental_unassign(handle, partitions)
            if let error { report(KafkaError(code: .rebalance, consuming: error)) }
        } else {
            let code = rd_kafka_assign(handle, assign ? partitions : nil)
            if code != RD_KAFKA_RESP_ERR_NO_ERROR { report(KafkaError(code: .rebalance, rawResponse: code)) }
        }
    }

    // MARK: poll loop (dedicated thread)

    /// Records polled but not yet handed to the state machine. Touched only on the poll thread (the poll
    /// loop, and the rebalance callback that runs inside its rd_kafka_consumer_poll); the lock is
    /// uncontended and only satisfies Sendable.
    private let polledBatch = BlockingMutex<[KafkaConsumerMessage]>([])
    static let maximumBatch = 512
    /// How often every assigned partition is forwarded again (``refreshForwarding(handle:)``): the longest a
    /// partition's records can wait after librdkafka dropped its forward.
    static let forwardingRefreshInterval: Duration = .milliseconds(500)

    /// Hands the polled records to the state machine. Called before a rebalance is applied, so records
    /// polled before a revocation are in the buffer (and dropped with it), never behind it.
    func flushPolledBatch(handle: OpaquePointer) {
        // The records move on: the batch is taken whole, emptied into the state machine's buffers, and its
        // buffer (with its capacity) given back for the next.
        var batch = polledBatch.withLock { batch in
            defer { batch = [] }
            return batch
        }
        guard !batch.isEmpty else { return }
        update { $0.received(taking: &batch) }
        polledBatch.withLock { if $0.isEmpty { $0 = batch } }
    }

    /// Polls until close, then closes the librdkafka consumer.
    ///
    /// Records do not come through the consumer queue: every assigned partition's fetch queue is forwarded
    /// to its topic's record queue (``setForwarding(_:_:handle:)``), which this thread reads, urgent lane
    /// first, each lane only while its buffer has room, and within a lane its topics in turn, a share of a
    /// batch each. While a lane's buffer is full, its records stay in librdkafka, whose prefetch stops at
    /// `queued.min.messages` / `queued.max.messages.kbytes` — counted per record queue, since librdkafka
    /// measures a forwarded partition queue by the queue it forwards to. So a bulk backlog never stops
    /// urgent partitions' fetching, and one topic's backlog never stops another's: a topic's new records
    /// do not wait behind everything another topic has prefetched (with one queue per lane they waited
    /// behind a whole backlog and reached the relay all at once). The consumer queue (rebalances, errors) is
    /// still served, so the member stays in the group. Every queue and the application wake this thread
    /// through `wakePipe`.
    func runPollLoop(client: KafkaClient) {
        // Saves a String allocation per record for topic names too long to be stored inline. Checked with
        // strcmp in case librdkafka ever reuses a topic handle's address for another topic.
        var topicNames: [OpaquePointer: String] = [:]
        func topicName(_ topic: OpaquePointer) -> String {
            let cName = rd_kafka_topic_name(topic)!
            if let name = topicNames[topic], name.withCString({ strcmp($0, cName) == 0 }) { return name }
            let name = String(cString: cName)
            topicNames[topic] = name
            return name
        }
        func take(_ message: UnsafeMutablePointer<rd_kafka_message_t>, lane: KafkaConsumerLane) {
            defer { rd_kafka_message_destroy(message) }
            if message.pointee.err != RD_KAFKA_RESP_ERR_NO_ERROR {
                let detail = message.pointee.payload.map {
                    String(decoding: UnsafeRawBufferPointer(start: $0, count: message.pointee.len), as: UTF8.self)
                }
                report(KafkaError(code: .broker, rawResponse: message.pointee.err, message: detail))
                return
            }
            // Moved into the batch (captured as it is, it would be copied).
            var received = Optional(KafkaConsumerMessage(copying: message, lane: lane, headerLimits: headerLimits, topicName: topicName))
            polledBatch.withLock { $0.append(received.take()!) }
        }
        if wakesFetcher {
            nudger.start(client: client, isClosing: { [self] in isClosing.load(ordering: .acquiring) }) { [self] topic in
                state.withLock { $0.forwardedPartitions }.compactMap { $0.topic == topic ? $0.partition : nil }
            }
        }
        var watches = FetchQueueWatches(fetchQueue)
        client.withHandle { handle in
            let consumerQueue = rd_kafka_queue_get_consumer(handle)!
            recordQueues.withLock { $0.isOpen = true }
            var wakeByte: UInt8 = 1
            rd_kafka_queue_io_event_enable(consumerQueue, wakePipe.write, &wakeByte, 1)
            /// Per lane, the topic read first in the next round.
            var firstTopic = KafkaConsumerLane.allCases.map { _ in 0 }
            var batch = [UnsafeMutablePointer<rd_kafka_message_t>?](repeating: nil, count: Self.maximumBatch)
            var nextRefresh = ContinuousClock.now + Self.forwardingRefreshInterval
            while !isClosing.load(ordering: .acquiring) {
                // The consumer queue first (rebalance callbacks run in here), without waiting.
                var served = 0
                while served < Self.maximumBatch, let message = rd_kafka_consumer_poll(handle, 0) {
                    served += 1
                    // A partition whose forward librdkafka dropped (see `refreshForwarding`) delivers here for a
                    // while: its records keep their lane, or they would wait behind the other lane's and come
                    // after later ones of their partition.
                    take(message, lane: message.pointee.rkt.map { lane(of: topicName($0)) } ?? .bulk)
                }
                flushPolledBatch(handle: handle)
                // Records, urgent first, each lane while its buffer has room; a lane's topics in turn.
                var taken = 0
                let lanes = recordQueues.withLock { $0.byLane }
                for lane in KafkaConsumerLane.allCases where !lanes[lane.rawValue].isEmpty && state.withLock({ $0.hasRoom(lane) }) {
                    let topics = lanes[lane.rawValue]
                    let share = max(1, Self.maximumBatch / topics.count)
                    let first = firstTopic[lane.rawValue] % topics.count
                    firstTopic[lane.rawValue] = first + 1
                    for turn in 0..<topics.count {
                        let topic = topics[(first + turn) % topics.count]
                        let count = batch.withUnsafeMutableBufferPointer { buffer in
                            rd_kafka_consume_batch_queue(topic.queue, 0, buffer.baseAddress, share)
                        }
                        var bytes = 0
                        for index in 0..<max(0, count) {
                            bytes += batch[index]!.pointee.len
                            take(batch[index]!, lane: lane)
                        }
                        taken += max(0, count)
                        if wakesFetcher, watches.took(max(0, count), bytes: bytes, from: topic) { nudger.request(topic.topic) }
                    }
                    flushPolledBatch(handle: handle)
                }
                if ContinuousClock.now >= nextRefresh {
                    refreshForwarding(handle: handle)
                    nextRefresh = .now + Self.forwardingRefreshInterval
                }
                if served == 0 && taken == 0 { sleepUntilWoken(timeoutMilliseconds: pollTimeoutMilliseconds) }
            }
            nudger.stop()
            logger.debug("closing consumer: committing stored offsets and leaving the group")
            // Serves the final revocation through our callback (not waited for: isClosing is set) and commits
            // the stored offsets, since auto commit is on.
            let error = rd_kafka_consumer_close(handle)
            offsetStoreLists.close()
            client.destroyWithoutConsumerClose.store(true, ordering: .releasing)
            if error != RD_KAFKA_RESP_ERR_NO_ERROR {
                closeResult.withLock { $0 = KafkaError(code: .closed, rawResponse: error) }
            }
            update { $0.finish() }
            rd_kafka_queue_io_event_enable(consumerQueue, -1, nil, 0)
            recordQueues.withLock { $0.close() }
            rd_kafka_queue_destroy(consumerQueue)
        }
        logger.debug("consumer closed")
        closed.set()
    }

    /// Waits for a byte on the wake pipe (or the timeout), then empties it.
    private func sleepUntilWoken(timeoutMilliseconds: Int32) {
        var descriptor = pollfd(fd: wakePipe.read, events: Int16(POLLIN), revents: 0)
        _ = poll(&descriptor, 1, timeoutMilliseconds)
        var sink = [UInt8](repeating: 0, count: 64)
        while read(wakePipe.read, &sink, sink.count) > 0 {}
    }
}
