import APNsCore
import Kafka
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The pipeline: consume → triage (size, schema, APNs rules) → deliver → publish results → store offsets.
///
/// At least once: an event's offset is stored only when its result (and removed-token or dead-letter
/// record) is acknowledged by Kafka *and* every earlier event of its partition is, too (`OffsetLedger`).
/// A crash redoes at most the events in flight; nothing is skipped.
///
/// Runs as a swift-service-lifecycle `Service`: on graceful shutdown it stops taking events, drains what is
/// in flight (bounded by `drainTimeout`), flushes the producer, commits, leaves the group and returns.
public final class RelayService: Service, Sendable {
    private let configuration: RelayConfiguration
    private let consumer: KafkaConsumer
    private let producer: KafkaProducer
    private let sender: any NotificationSender
    private let logger: Logger
    private let state: RelayState
    private let metrics = RelayMetrics()
    /// Withholds BadDeviceToken removals when too many pushes answer BadDeviceToken (a misconfiguration).
    private let tokenRemovals: TokenRemovalScreen
    private let wallClock: @Sendable () -> Double
    private let started = Atomic<Bool>(false)
    /// 0 created, 1 running, 2 stopping, 3 stopped, 4 failed.
    private let phase = Atomic<Int>(0)
    /// Deliveries in a row that ended because no APNs connection could be made; 0 after any APNs answer.
    private let connectFailureStreak = Atomic<Int>(0)

    /// - Parameters:
    ///   - consumer: created but not started; the service subscribes, starts and closes it.
    ///   - producer: the service flushes and closes it on shutdown.
    ///   - wallClock: UNIX seconds now (for expirations and timings); injectable for tests.
    public init(
        configuration: RelayConfiguration, consumer: KafkaConsumer, producer: KafkaProducer,
        sender: any NotificationSender, logger: Logger,
        wallClock: @escaping @Sendable () -> Double = { RelayService.unixTime() }
    ) {
        self.configuration = configuration
        self.consumer = consumer
        self.producer = producer
        self.sender = sender
        self.logger = logger
        self.wallClock = wallClock
        self.state = RelayState(limits: configuration.inFlight)
        self.tokenRemovals = TokenRemovalScreen(configuration: configuration.tokenRemoval, logger: logger)
    }

    /// What `/readyz` and the demo look at.
    public struct Status: Sendable, Hashable {
        public var assignedPartitions: Int
        public var inFlightEvents: Int
        public var paused: Bool
    }

    /// `nil` while the service is healthy (for `/healthz`), else why not.
    public var liveness: String? {
        phase.load(ordering: .relaxed) == 4 ? "the relay stopped with an error" : nil
    }

    /// `nil` when the service takes work (for `/readyz`), else why not: running in its consumer group, and
    /// APNs reachable (no streak of deliveries that could not open a connection).
    public var readiness: String? {
        switch phase.load(ordering: .relaxed) {
        case 0: return "starting"
        case 1: break
        case 2: return "shutting down"
        default: return "stopped"
        }
        let streak = connectFailureStreak.load(ordering: .relaxed)
        return streak > 0 ? "APNs unreachable: the last \(streak) deliveries could not open a connection" : nil
    }

    public var status: Status {
        Status(assignedPartitions: state.assignedPartitions.count, inFlightEvents: state.inFlightEvents, paused: state.isPaused)
    }

    public func run() async throws {
        guard !started.exchange(true, ordering: .relaxed) else {
            throw RelayError("RelayService.run() called twice")
        }
        do {
            try consumer.subscribe(topics: configuration.topics.input)
            try consumer.start()
        } catch {
            phase.store(4, ordering: .relaxed)
            throw error
        }
        let decoder = try EventDecoder(explainer: try? SchemaValidator.notificationEvent())
        let triage = EventTriage(configuration: configuration, decoder: decoder) { [sender] in sender.authentication(forTopic: $0) }
        phase.store(1, ordering: .relaxed)
        logger.info("relay started", metadata: ["topics": "\(configuration.topics.input)"])

        // Discarding: a long-running relay starts millions of child tasks; a plain task group would keep every
        // finished child until someone awaited it.
        await withDiscardingTaskGroup { group in
            // The consumer loop ends on graceful shutdown (or when the consumer closes).
            for await event in consumer.events.cancelOnGracefulShutdown() {
                handle(event, triage: triage, group: &group)
            }
            phase.store(2, ordering: .relaxed)
            logger.info("relay stopping: draining in-flight events", metadata: ["inFlight": "\(state.inFlightEvents)"])
            let drained = await state.waitUntilDrained(nil, timeout: configuration.drainTimeout)
            if !drained {
                logger.warning(
                    "drain deadline passed; abandoning unfinished events (the next owner of their partitions redoes them)",
                    metadata: ["inFlight": "\(state.inFlightEvents)"]
                )
            }
            group.cancelAll()
        }
        do {
            try await producer.close(timeout: .seconds(10))
        } catch {
            logger.error("producer close failed at shutdown; unacknowledged results are redone after restart", metadata: ["error": "\(error)"])
        }
        do {
            try await consumer.close(timeout: .seconds(10))
        } catch {
            logger.error("consumer close failed", metadata: ["error": "\(error)"])
        }
        phase.store(3, ordering: .relaxed)
        logger.info("relay stopped")
    }

    private func handle(_ event: KafkaConsumerEvent, triage: EventTriage, group: inout DiscardingTaskGroup) {
        switch event {
        case .message(let message):
            accept(message, triage: triage, group: &group)
        case .partitionsAssigned(let partitions):
            let (paused, all) = state.assign(partitions)
            metrics.assignedPartitions.record(all.count)
            logger.info("partitions assigned", metadata: ["partitions": "\(partitions)"])
            if paused { pause(partitions) }
        case .partitionsRevoked(let revocation):
            logger.info("partitions revoked; draining", metadata: ["partitions": "\(revocation.partitions)"])
            group.addTask { [state, configuration, logger, metrics] in
                let drained = await state.waitUntilDrained(revocation.partitions, timeout: configuration.revocationDrainTimeout)
                if !drained {
                    logger.warning("revocation drain deadline passed; abandoning unfinished events", metadata: ["partitions": "\(revocation.partitions)"])
                }
                state.release(revocation.partitions)
                metrics.assignedPartitions.record(state.assignedPartitions.count)
                revocation.acknowledge()
            }
        case .partitionsLost(let partitions):
            logger.warning("partitions lost; their unfinished events will be redone by the new owner", metadata: ["partitions": "\(partitions)"])
            state.release(partitions)
            metrics.assignedPartitions.record(state.assignedPartitions.count)
        }
    }

    private func accept(_ message: KafkaConsumerMessage, triage: EventTriage, group: inout DiscardingTaskGroup) {
        metrics.consumed.increment()
        let size = message.value?.count ?? 0
        switch state.admit(message.topicPartition, offset: message.offset, bytes: size) {
        case .skip:
            logger.debug("skipping an event already in flight or not assigned", metadata: Self.position(message))
            return
        case .admitted(let transition):
            if transition == .pause { pause(state.assignedPartitions) }
        }
        updateInFlightGauges()
        let now = wallClock()
        let receivedAt = Int64(now * 1000)
        let work = triage.triage(message, receivedAt: receivedAt, nowSeconds: Int64(now))
        group.addTask { [self] in
            await complete(work, message: message, size: size, receivedAt: receivedAt)
        }
    }

    /// Delivers (when needed), publishes the records, and finishes the event in the ledger.
    private func complete(_ work: Triage, message: KafkaConsumerMessage, size: Int, receivedAt: Int64) async {
        let source = SourcePosition(topic: message.topic, partition: message.partition, offset: message.offset)
        var records: [OutgoingRecord] = []
        let result: DeliveryResult
        switch work {
        case .answer(let answer, let deadLetter):
            result = answer
            if let deadLetter {
                logger.info("event refused", metadata: Self.position(message).merging([
                    "reason": "\(answer.reason ?? "")", "eventId": "\(answer.eventID ?? "")",
                ]) { $1 })
                records.append(OutgoingRecord(topic: configuration.topics.deadLetters, key: deadLetter.key, value: deadLetter.value, headers: deadLetter.headers))
                metrics.deadLetters.increment()
            }
        case .deliver(let event, let notification):
            let attempts = DeliveryAttempts(policy: configuration.retry, requestTimeout: configuration.requestTimeout, wallClock: wallClock)
            let report = await attempts.deliver(notification, with: sender)
            if Task.isCancelled {
                finishAbandoned(size: size)
                return
            }
            if report.attempts > 1 { metrics.retries.increment(by: report.attempts - 1) }
            if report.response != nil {
                connectFailureStreak.store(0, ordering: .relaxed)
            } else if report.failure == .connectFailed {
                connectFailureStreak.add(1, ordering: .relaxed)
            }
            result = DeliveryResult(
                eventID: event.id, metadata: event.metadata, outcome: report.outcome,
                status: report.response?.status, reason: Self.reason(of: report),
                message: report.failure.map { "no response from APNs: \($0)" },
                apnsID: report.response?.apnsID, apnsUniqueID: report.response?.apnsUniqueID,
                attempts: report.attempts, source: source, receivedAt: receivedAt,
                completedAt: Int64(wallClock() * 1000)
            )
            let removalAllowed = tokenRemovals.allowsRemoval(
                after: report, credential: sender.credentialName(forTopic: notification.topic), environment: event.environment
            )
            if removalAllowed, let removed = Self.removedToken(for: event, notification: notification, report: report) {
                records.append(OutgoingRecord(topic: configuration.topics.removedTokens, key: removed.key, value: removed.jsonBytes(), headers: []))
                metrics.removedTokens.increment()
            }
            logger.debug("event delivered", metadata: Self.position(message).merging([
                "eventId": "\(event.id)", "outcome": "\(report.outcome.rawValue)",
                "apnsId": "\(report.response?.apnsID ?? "")", "reason": "\(result.reason ?? "")",
            ]) { $1 })
        }
        let resultKey = message.key ?? result.eventID.map { Array($0.utf8) }
        records.insert(OutgoingRecord(topic: configuration.topics.results, key: resultKey, value: result.jsonBytes(), headers: []), at: 0)

        guard await publish(records) else {
            finishAbandoned(size: size)
            return
        }
        metrics.result(result.outcome, reason: result.reason)
        metrics.latency.recordNanoseconds(max(0, Int64(wallClock() * 1e9) - receivedAt * 1_000_000))
        let transition = state.finish(message.topicPartition, offset: message.offset, bytes: size) { processed in
            do {
                try consumer.storeOffset(topic: message.topic, partition: message.partition, offset: processed)
            } catch {
                // Not assigned any more: the next owner redoes the events after its committed offset.
                logger.debug("offset not stored", metadata: Self.position(message).merging(["error": "\(error)"]) { $1 })
            }
        }
        if transition == .resume { resume(state.assignedPartitions) }
        updateInFlightGauges()
    }

    private func finishAbandoned(size: Int) {
        if state.abandon(bytes: size) == .resume { resume(state.assignedPartitions) }
        updateInFlightGauges()
    }

    /// Publishes every record, retrying refusals until they succeed or the task is cancelled.
    /// - Returns: `true` once all are acknowledged by Kafka.
    private func publish(_ records: [OutgoingRecord]) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            for record in records {
                group.addTask { [producer, configuration, logger, metrics] in
                    while !Task.isCancelled {
                        do {
                            _ = try await producer.send(topic: record.topic, key: record.key, value: record.value, headers: record.headers)
                            return true
                        } catch {
                            metrics.publishFailures.increment()
                            logger.error("publishing a record failed; retrying", metadata: ["topic": "\(record.topic)", "error": "\(error)"])
                            try? await Task.sleep(for: configuration.publishRetryBackoff)
                        }
                    }
                    return false
                }
            }
            return await group.allSatisfy { $0 }
        }
    }

    private func pause(_ partitions: [KafkaTopicPartition]) {
        guard !partitions.isEmpty else { return }
        do {
            try consumer.pause(partitions)
            metrics.pausedPartitions.record(partitions.count)
            logger.info("in-flight limit reached; partitions paused", metadata: ["inFlight": "\(state.inFlightEvents)"])
        } catch {
            logger.warning("pausing partitions failed", metadata: ["error": "\(error)"])
        }
    }

    private func resume(_ partitions: [KafkaTopicPartition]) {
        guard !partitions.isEmpty else { return }
        do {
            try consumer.resume(partitions)
            metrics.pausedPartitions.record(0)
            logger.info("below the in-flight low-water mark; partitions resumed")
        } catch {
            logger.warning("resuming partitions failed", metadata: ["error": "\(error)"])
        }
    }

    private func updateInFlightGauges() {
        metrics.inFlight.record(state.inFlightEvents)
        metrics.inFlightBytes.record(state.inFlightBytes)
    }

    private static func reason(of report: DeliveryReport) -> String? {
        if let reason = report.response?.reason { return reason.rawValue }
        if report.outcome == .expired { return "Expired" }
        if let failure = report.failure { return "\(failure)" }
        return nil
    }

    /// A removed-token record for 410s and for BadDeviceToken (a token of the other environment, usually);
    /// BadDeviceToken ones pass `TokenRemovalGuard` first.
    private static func removedToken(for event: NotificationEvent, notification: APNsNotification, report: DeliveryReport) -> TokenRemoved? {
        let invalidatedAt: Int64?
        switch report.decision {
        case .unregistered(let timestamp)?: invalidatedAt = timestamp
        case .rejected(removesToken: true)?: invalidatedAt = nil
        default: return nil
        }
        return TokenRemoved(
            deviceToken: event.deviceToken, topic: notification.topic, environment: event.environment,
            reason: report.response?.reason?.rawValue ?? "Unregistered", invalidatedAt: invalidatedAt,
            eventID: event.id, metadata: event.metadata
        )
    }

    private static func position(_ message: KafkaConsumerMessage) -> Logger.Metadata {
        ["topic": "\(message.topic)", "partition": "\(message.partition)", "offset": "\(message.offset)"]
    }

    /// UNIX time in seconds.
    public static func unixTime() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}

/// A record to publish.
struct OutgoingRecord: Sendable {
    var topic: String
    var key: [UInt8]?
    var value: [UInt8]?
    var headers: [KafkaHeader]
}

/// A relay failure that stops the service (configuration or start-up problems, never input).
public struct RelayError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
