import CRdKafka
import Logging
import ServiceSupport
import Synchronization

/// A consumer group member over librdkafka.
///
/// - A dedicated thread polls librdkafka continuously (``start()``) and feeds ``events``; it never runs
///   on Swift's cooperative pool. Polling continues while partitions are paused, so a slow application is
///   not evicted by `max.poll.interval.ms`.
/// - ``events`` buffers at most about `bufferCapacity` messages; while it is full, records stay in
///   librdkafka's prefetch (bounded by `queued.min.messages` and `queued.max.messages.kbytes`) and the poll
///   thread goes on serving rebalances.
/// - Rebalances go through our callback: a revocation reaches the application as
///   ``KafkaConsumerEvent/partitionsRevoked(_:)`` *before* librdkafka lets go of the partitions; it lets go
///   once the application acknowledges (or after `revocationDrainTimeout`). Works with eager and
///   cooperative-sticky assignors.
/// - Offsets are never stored automatically. ``storeOffset(topic:partition:offset:)`` stores the offset
///   of a *processed* message; auto commit and ``close(timeout:)`` commit what was stored.
package final class KafkaConsumer: Sendable {
    /// The consumer's events (messages and rebalances). Iterate it from one task at a time.
    package let events: KafkaConsumerEvents

    let client: KafkaClient
    let shared: KafkaConsumerShared
    private let logger: Logger
    private let lifecycle = Mutex<Lifecycle>(.created)

    private enum Lifecycle: Equatable {
        case created, polling, closing, closed
    }

    /// Creates the librdkafka consumer. Nothing is fetched until ``subscribe(topics:)`` and ``start()``.
    /// - Throws: ``KafkaError`` with code `configuration` for contradictory or rejected settings (carrying
    ///   librdkafka's message), `clientCreation` if librdkafka refuses to create the handle.
    package init(configuration: KafkaConsumerConfiguration, logger: Logger) throws {
        let properties = try configuration.librdkafkaProperties()
        // What librdkafka lets a topic's queue hold before it stops fetching (its defaults otherwise).
        let fetchQueue = FetchQueueWatch(
            maxRecords: properties["queued.min.messages"].flatMap { Int($0) } ?? 100_000,
            maxBytes: (properties["queued.max.messages.kbytes"].flatMap { Int($0) } ?? 65_536) * 1024)
        let shared = KafkaConsumerShared(configuration: configuration, fetchQueue: fetchQueue, logger: logger)
        let errorHandler = configuration.errorHandler
        // Weak: the client owns the context that owns this closure.
        let weakClient = WeakClient()
        let context = KafkaClientContext(
            logger: logger, statisticsHandler: configuration.statisticsHandler,
            errorHandler: { error in
                shared.noteError(error, client: weakClient.client)
                errorHandler?(error)
            },
            rebalanceHandler: shared)
        let client = try KafkaClient(kind: .consumer, properties: properties, context: context)
        weakClient.client = client
        // Route the main queue to the consumer queue so rd_kafka_consumer_poll serves every callback
        // (errors, statistics, rebalances) on the poll thread.
        client.withHandle { _ = rd_kafka_poll_set_consumer($0) }
        // Until start() runs the close sequence, destroying the handle must not run a consumer close.
        client.destroyWithoutConsumerClose.store(true, ordering: .releasing)
        self.client = client
        self.shared = shared
        self.logger = logger
        self.events = KafkaConsumerEvents(client: client, shared: shared)
    }

    /// Set once, when librdkafka reports a fatal error: e.g. a static member (`group.instance.id`) fenced
    /// by a newer one with the same id. The consumer then fetches nothing more and must be recreated (for
    /// the relay: the process restarts). Await it with `fatalError.wait()`.
    package var fatalError: Latch<KafkaError> { shared.fatalError }

    /// Set once, at the first refusal of the client's SASL credentials or TLS certificate by a broker
    /// (librdkafka goes on retrying with the same secret).
    package var credentialsRefused: Latch<KafkaError> { shared.credentialsRefused }

    /// The SASL user and password for connections made from now on (PLAIN and SCRAM).
    package func setSASLCredentials(username: String, password: String) throws(KafkaError) {
        try client.setSASLCredentials(username: username, password: password)
    }

    /// What a readiness probe needs to know about this member.
    package struct Health: Sendable, Hashable {
        /// The member has joined its group (it has an assignment, possibly empty) and has not lost it since.
        package var isJoined: Bool
        /// No "all brokers down" from librdkafka since the last successful request to a broker.
        package var isKafkaReachable: Bool
    }

    package var health: Health {
        Health(isJoined: shared.isJoined.load(ordering: .acquiring),
               isKafkaReachable: !shared.brokersDown.load(ordering: .acquiring))
    }

    /// Subscribes to `topics` (replacing any previous subscription). The group join happens while polling.
    package func subscribe(topics: [String]) throws {
        let list = TopicPartitionList(topics.map { KafkaTopicPartition(topic: $0, partition: crdkafka_partition_unassigned()) })
        let error = client.withHandle { handle in list.withList { rd_kafka_subscribe(handle, $0) } }
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(code: .subscription, rawResponse: error)
        }
    }

    /// Starts the poll thread (the group join happens there). Call once; ``close(timeout:)`` stops it. The
    /// consumer's one lifecycle: an application that runs it as a service starts it in its `run()`, as
    /// `RelayService` does.
    package func start() throws {
        try lifecycle.withLock { state throws(KafkaError) in
            guard case .created = state else { throw KafkaError.closed("KafkaConsumer.start() called twice or after close") }
            state = .polling
        }
        client.destroyWithoutConsumerClose.store(false, ordering: .releasing)
        let client = self.client
        let shared = self.shared
        do {
            try DedicatedThread.start(name: "kafka-consumer") { shared.runPollLoop(client: client) }
        } catch {
            throw KafkaError(code: .clientCreation, message: "\(error)")
        }
    }

    /// The synchronous part of closing: stop the poll loop and release a revocation waiting for the app.
    private func beginClose() {
        shared.isClosing.store(true, ordering: .releasing)
        shared.wakePollThread()
        shared.pendingRevocation.withLock { $0 }?.acknowledge()
    }

    /// Stores the offset of a message the application has finished with; the group's committed offset
    /// becomes `offset + 1` (the next message to read) at the next auto commit or at close.
    ///
    /// Store offsets in order per partition (the caller decides what "finished" means; apns-relay stores the
    /// contiguous frontier). Safe from any thread.
    /// - Parameter offset: the offset of the processed message, **not** the next one.
    /// - Throws: ``KafkaError`` `offsetStore` if the partition is not assigned to this member (any more).
    package func storeOffset(topic: String, partition: Int32, offset: Int64) throws {
        let failure = client.withHandle { handle in
            shared.offsetStoreLists.store(handle: handle, KafkaTopicPartition(topic: topic, partition: partition), nextOffset: offset + 1)
        }
        if failure != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(code: .offsetStore, rawResponse: failure,
                             message: "\(topic)[\(partition)]@\(offset): \(KafkaResponseCode(failure).explanation)")
        }
    }

    /// Stores `message`'s offset as processed (see ``storeOffset(topic:partition:offset:)``).
    package func storeOffset(for message: KafkaConsumerMessage) throws {
        try storeOffset(topic: message.topic, partition: message.partition, offset: message.offset)
    }

    /// Holds `lane`: the iterator hands out none of its records (the other lane's and rebalance events go on)
    /// until ``release(_:)``. What is buffered stays; once the lane's buffer is full its records wait in
    /// librdkafka's prefetch. For an application's own backpressure per lane. Safe from any thread.
    package func hold(_ lane: KafkaConsumerLane) {
        shared.update { $0.setHeld(lane, true) }
    }

    /// Hands out `lane`'s records again, those that waited first.
    package func release(_ lane: KafkaConsumerLane) {
        shared.update { $0.setHeld(lane, false) }
    }

    /// Messages taken from ``events`` but not processed, back at the front of their lanes in their order: the
    /// iterator hands them out again first (after a ``hold(_:)``, once released). For the rest of a batch
    /// taken just before the application held a lane. Messages of partitions no longer assigned are dropped.
    package func putBack(_ messages: [KafkaConsumerMessage]) {
        guard !messages.isEmpty else { return }
        shared.update { $0.putBack(messages) }
    }

    /// The lane `topic`'s records are read in (``KafkaConsumerConfiguration/urgentTopics``).
    package func lane(of topic: String) -> KafkaConsumerLane {
        shared.lane(of: topic)
    }

    /// Messages received and not yet handed to the application, in `lane`.
    package func bufferedMessageCount(_ lane: KafkaConsumerLane) -> Int {
        shared.state.withLock { $0.bufferedMessageCount(lane) }
    }

    /// The partitions currently assigned to this member, as librdkafka sees them.
    package func assignment() throws -> [KafkaTopicPartition] {
        try client.withHandle { handle throws(KafkaError) in
            var list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
            let error = rd_kafka_assignment(handle, &list)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR, let list else {
                throw KafkaError(code: .rebalance, rawResponse: error)
            }
            // Ownership: rd_kafka_assignment hands us a new list.
            defer { rd_kafka_topic_partition_list_destroy(list) }
            return TopicPartitionList.partitions(in: list).sorted()
        }
    }

    /// The group's committed offsets (next offset to read; `nil` when none), asked of the coordinator
    /// on a dedicated thread.
    package func committedOffsets(
        for partitions: [KafkaTopicPartition], timeout: Duration = .seconds(10)
    ) async throws -> [KafkaTopicPartition: Int64?] {
        let client = self.client
        let result: Result<[KafkaTopicPartition: Int64?], KafkaError> = await DedicatedThread.run(name: "kafka-committed") {
            let list = TopicPartitionList(partitions)
            return client.withHandle { handle in
                list.withList { list in
                    let error = rd_kafka_committed(handle, list, Int32(clamping: timeout.kafkaMilliseconds))
                    if error != RD_KAFKA_RESP_ERR_NO_ERROR {
                        return .failure(KafkaError(code: .offsetCommit, rawResponse: error))
                    }
                    var offsets: [KafkaTopicPartition: Int64?] = [:]
                    for entry in TopicPartitionList.entries(in: list) {
                        offsets[entry.partition] = entry.offset < 0 ? nil : entry.offset
                    }
                    return .success(offsets)
                }
            }
        }
        return try result.get()
    }

    /// Commits stored offsets, leaves the group (revocations are delivered but not waited for) and stops
    /// the poll thread; ``events`` then finishes. Buffered, unprocessed messages are dropped.
    /// - Throws: ``KafkaError`` `timedOut` if librdkafka's close did not finish within `timeout` (it goes on
    ///   in the background), or `closed` with librdkafka's code if the close reported an error.
    package func close(timeout: Duration = .seconds(30)) async throws {
        let previous = lifecycle.withLock { state -> Lifecycle in
            let previous = state
            if state == .created { state = .closed } else if state == .polling { state = .closing }
            return previous
        }
        beginClose()
        if previous == .created {
            // Never started: no poll thread runs the close sequence and the handle never joined a group.
            shared.update { $0.finish() }
            shared.closed.set()
        }
        guard await shared.closed.wait(timeout: timeout, ignoringCancellation: true) != nil else {
            throw KafkaError(code: .timedOut, message: "consumer close did not finish within \(timeout)")
        }
        lifecycle.withLock { $0 = .closed }
        if let error = shared.closeResult.withLock({ $0 }) { throw error }
    }

    deinit {
        if lifecycle.withLock({ $0 == .polling }) {
            // The poll thread holds the handle, so it outlives this object: tell it to run the close
            // sequence (commit, leave the group) on its own.
            logger.warning("KafkaConsumer released without close(); closing in the background")
            beginClose()
        }
    }
}

/// Lets the error callback reach the client without keeping it alive.
// @unchecked Sendable: `client` is written once, right after the client is created and before librdkafka
// can call back (no poll has run yet); only read afterwards.
private final class WeakClient: @unchecked Sendable {
    weak var client: KafkaClient?
}

/// The events of a ``KafkaConsumer``: one iterator at a time.
package struct KafkaConsumerEvents: AsyncSequence, Sendable {
    package typealias Element = KafkaConsumerEvent
    let client: KafkaClient
    let shared: KafkaConsumerShared

    package func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(client: client, shared: shared)
    }

    /// The same events in batches of at most `maxCount`: each element is what had arrived by then (at
    /// least one event), taken under one lock. For consumers that hand events on through anything with a
    /// cost per element (a task hop, a merge with another sequence): they pay it once per batch.
    package func batches(maxCount: Int = 512) -> Batches {
        Batches(events: self, maxCount: Swift.max(1, maxCount))
    }

    /// Waits until a rebalance event is buffered and takes every buffered one, leaving messages where they
    /// are: for an application that holds back messages (its own backpressure) but must still answer
    /// rebalances. Rebalance events come before messages anyway, so the order the application sees is the
    /// same as through the iterator. Do not call it while the iterator is parked in `next()`.
    /// - Returns: the events; empty once the consumer is closed, or when the task is cancelled.
    package func nextRebalanceEvents() async -> [KafkaConsumerEvent] {
        let ready = await DeadlineWaiter.wait(timeout: nil, timedOut: false, cancelled: false) { waiter in
            shared.update { machine in
                machine.waitForControl(waiter)
                return .init()
            }
        }
        guard ready else { return [] }
        return shared.state.withLock { $0.takeControl() }
    }

    /// ``KafkaConsumerEvents/batches(maxCount:)``: one iterator at a time, like the events themselves.
    package struct Batches: AsyncSequence, Sendable {
        package typealias Element = [KafkaConsumerEvent]
        let events: KafkaConsumerEvents
        let maxCount: Int

        package func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(events: events.makeAsyncIterator(), maxCount: maxCount)
        }

        package struct AsyncIterator: AsyncIteratorProtocol {
            var events: KafkaConsumerEvents.AsyncIterator
            let maxCount: Int

            /// The next batch (never empty), or `nil` once the consumer is closed or the task is cancelled.
            package mutating func next() async -> [KafkaConsumerEvent]? {
                var batch = events.available(maxCount: maxCount)
                if batch.isEmpty {
                    guard let first = await events.next() else { return nil }
                    batch = [first] + events.available(maxCount: maxCount - 1)
                }
                return batch
            }
        }
    }

    package struct AsyncIterator: AsyncIteratorProtocol {
        let client: KafkaClient
        let shared: KafkaConsumerShared

        /// The next event, or `nil` once the consumer is closed or the task is cancelled.
        package mutating func next() async -> KafkaConsumerEvent? {
            switch await next(deadline: nil) {
            case .event(let event): return event
            case .finished, .timedOut: return nil
            }
        }

        /// The next event, waiting at most `timeout`.
        /// - Returns: `nil` once the consumer is closed or the task is cancelled.
        /// - Throws: ``KafkaError`` `timedOut` if nothing arrived in time.
        package mutating func next(within timeout: Duration) async throws -> KafkaConsumerEvent? {
            switch await next(deadline: timeout) {
            case .event(let event): return event
            case .finished: return nil
            case .timedOut: throw KafkaError(code: .timedOut, message: "no consumer event within \(timeout)", isRetriable: true)
            }
        }

        /// What has arrived already, at most `maxCount` events, without waiting.
        func available(maxCount: Int) -> [KafkaConsumerEvent] {
            guard maxCount > 0 else { return [] }
            var wake = false
            let batch = shared.state.withLock { state -> [KafkaConsumerEvent] in
                var batch: [KafkaConsumerEvent] = []
                while batch.count < maxCount, case .event(let event, let wakePoller) = state.next() {
                    wake = wake || wakePoller
                    batch.append(event)
                }
                return batch
            }
            if wake { shared.wakePollThread() }
            return batch
        }

        private func next(deadline timeout: Duration?) async -> KafkaConsumerStateMachine.WaitOutcome {
            // Fast path: no continuation while the buffer has something.
            switch shared.state.withLock({ $0.next() }) {
            case .event(let event, let wakePoller):
                if wakePoller { shared.wakePollThread() }
                return .event(event)
            case .finished:
                return .finished
            case .empty:
                break
            }
            let shared = self.shared
            return await DeadlineWaiter.wait(timeout: timeout, timedOut: .timedOut, cancelled: .finished) { waiter in
                shared.update { $0.wait(waiter) }
            }
        }
    }
}
