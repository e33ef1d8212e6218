import APNsCore
import Kafka
import Logging
import ServiceLifecycle
import ServiceSupport

/// The relay as a service: consumes, hands each event to the `EventPipeline` (triage → deliver → publish →
/// ledger), answers rebalances, and drains and closes on shutdown.
///
/// At least once: an event's offset is stored only when its result (and removed-token or dead-letter
/// record) is acknowledged by Kafka *and* every earlier event of its partition is, too (`OffsetLedger`).
/// A crash redoes at most the events in flight; nothing is skipped.
///
/// Runs as a swift-service-lifecycle `Service`: on graceful shutdown it stops taking events, drains what is
/// in flight (bounded by `drainTimeout`), flushes the producer, commits, leaves the group and returns.
package final class RelayService: Service, Sendable {
    let configuration: RelayConfiguration
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    /// The APNs credentials and their senders.
    let credentials: CredentialDirectory
    let logger: Logger
    let state: RelayState
    let metrics = RelayMetrics()
    /// What happens to each event, from admission to its ledger entry.
    private let pipeline: EventPipeline
    private let phase = BlockingMutex(Phase.created)
    /// Why the relay must stop at once (a fatal Kafka error, a record Kafka refuses in every form): set
    /// once; the relay then stops taking events, abandons what is in flight and `run()` throws.
    private let failure = Latch<String>()
    /// Publishes each event's records; knows whether results are stuck on their way to Kafka.
    private let publisher: ResultPublisher
    /// Held per lane by the in-flight gate: the consumer hands out none of a held lane's events.
    private let intake: LaneIntake
    /// Exactly-once mode (`configuration.exactlyOnce`): commits records and offsets in transactions.
    private let transactions: TransactionalPublisher?

    private enum Phase: Sendable, Equatable {
        case created, running, stopping, stopped, failed
    }

    /// How long the producer and the consumer may each take to close after the drain: long enough for the
    /// final commit of a busy relay while Kafka answers, short when every broker is down (nothing to wait for).
    package static let closeTimeout: Duration = .seconds(10)
    package static let closeTimeoutKafkaDown: Duration = .seconds(2)
    /// At most this many consumer events are taken at once (what had arrived by then).
    static let consumeBatch = 512
    /// How long the start may wait for the transaction coordinator (exactly-once mode).
    static let initTransactionsTimeout: Duration = .seconds(30)

    /// - Parameters:
    ///   - consumer: created but not started; the service subscribes, starts and closes it.
    ///   - producer: created but not started; the service starts it, and flushes and closes it on shutdown.
    ///   - clock: the wall clock (expirations, result timestamps); injectable for tests.
    package init(
        configuration: RelayConfiguration, consumer: KafkaConsumer, producer: KafkaProducer,
        credentials: CredentialDirectory, logger: Logger,
        clock: WallClock = .system, tracing: EventTracing? = nil
    ) {
        self.configuration = configuration
        self.consumer = consumer
        self.producer = producer
        self.credentials = credentials
        self.logger = logger
        let metrics = self.metrics
        let intake = LaneIntake(consumer: consumer)
        self.intake = intake
        let failure = self.failure
        let transactions = configuration.exactlyOnce.map { exactlyOnce in
            TransactionalPublisher(
                producer: producer, groupMetadata: { [consumer] () throws(KafkaError) in try consumer.groupMetadata() },
                interval: exactlyOnce.interval, callTimeout: Self.closeTimeout, failure: failure, logger: logger)
        }
        self.transactions = transactions
        let state = RelayState(limits: configuration.effectiveInFlight, storeFrontier: { [consumer] partition, processed in
            if let transactions {
                // The offset goes into the transaction that commits the records below it.
                transactions.advance(partition, processedOffset: processed)
                return
            }
            do {
                try consumer.storeOffset(topic: partition.topic, partition: partition.partition, offset: processed)
            } catch {
                // Not assigned any more: the next owner redoes the events after its committed offset.
                logger.debug("offset not stored", metadata: [
                    "topic": "\(partition.topic)", "partition": "\(partition.partition)", "offset": "\(processed)", "error": "\(error)",
                ])
            }
        }) { lane, hold, assigned in
            intake.set(lane, held: hold)
            // Without urgent topics the urgent lane is empty: its series stays 0 rather than echo bulk's.
            if lane == .bulk || !configuration.topics.urgent.isEmpty { metrics.lanes[lane].held.record(hold ? 1 : 0) }
            metrics.pausedPartitions.record(assigned.count { intake.isHeld(intake.lane(of: $0.topic)) })
            if hold {
                logger.info("in-flight limit reached; intake held", metadata: ["lane": "\(lane)"])
            } else {
                logger.info("below the in-flight low-water mark; intake resumed", metadata: ["lane": "\(lane)"])
            }
        }
        let publisher = ResultPublisher(
            producer: producer, retryBackoff: configuration.publishRetryBackoff, failure: failure, metrics: metrics, logger: logger
        )
        self.state = state
        self.publisher = publisher
        self.pipeline = EventPipeline(
            configuration: configuration, credentials: credentials, state: state, publisher: publisher, transactions: transactions, metrics: metrics,
            logger: logger, clock: clock, tracing: tracing
        )
        metrics.lanes.urgent.held.record(0)
        metrics.lanes.bulk.held.record(0)
    }

    /// What `/readyz` and the demo look at.
    package struct Status: Sendable, Hashable {
        package var assignedPartitions: Int
        package var inFlightEvents: Int
        package var paused: Bool
        /// How often an offset frontier stepped over offsets no event was begun for (diagnostic).
        package var offsetGaps = 0
        /// Offsets delivered again after their partition's frontier had passed them (diagnostic).
        package var offsetsSeenBelowFrontier = 0
        /// Events skipped because their partition was not assigned here (any more) (diagnostic).
        package var skippedUnassigned = 0
        /// Events given up without a result: shutdown, a failure, or a publication given up (diagnostic).
        package var givenUp = 0
        /// Events begun in the offset ledger and not finished, including those given up (diagnostic).
        package var ledgerInFlight = 0
        /// The most events in flight at once per lane since the start (diagnostic).
        package var peakInFlight = LanePeaks()
    }

    package struct LanePeaks: Sendable, Hashable {
        package var urgent = 0
        package var bulk = 0
    }

    /// `nil` while the service is healthy (for `/healthz`), else why not.
    package var liveness: String? {
        if let reason = failure.value { return "the relay stopped: \(reason)" }
        return phase.withLock { $0 } == .failed ? "the relay stopped with an error" : nil
    }

    /// `nil` when the service takes work (for `/readyz`), else why not: running, joined to its consumer
    /// group, Kafka reachable, and publishing results.
    ///
    /// APNs reachability is deliberately not part of it: during an Apple outage every replica would turn
    /// unready at once, which stops rollouts (a fix could not be deployed) and, with a PodDisruptionBudget,
    /// node drains, while no restart or rescheduling can help. It shows in
    /// `apns_relay_apns_connect_failure_streak` and in `failed` results instead.
    package var readiness: String? {
        switch phase.withLock({ $0 }) {
        case .created: return "starting"
        case .running: break
        case .stopping: return "shutting down"
        case .stopped, .failed: return "stopped"
        }
        if let reason = failure.value { return "stopping: \(reason)" }
        let health = consumer.health
        if !health.isKafkaReachable { return "Kafka unreachable: every broker is down" }
        if !health.isJoined { return "joining the consumer group" }
        if let stall = publisher.stall, stall.duration > configuration.publishStallTimeout {
            return "no record has reached Kafka for \(stall.duration.components.seconds) s (\(stall.waiting) waiting)"
        }
        if let stall = transactions?.stall, stall.duration > configuration.publishStallTimeout {
            return "no Kafka transaction has committed for \(stall.duration.components.seconds) s (\(stall.waiting) events' records waiting)"
        }
        return nil
    }

    package var status: Status {
        Status(
            assignedPartitions: state.assignedPartitions.count, inFlightEvents: state.inFlightEvents, paused: state.isPaused,
            offsetGaps: state.offsetGapsSteppedOver, offsetsSeenBelowFrontier: state.offsetsSeenBelowFrontier,
            skippedUnassigned: state.skippedUnassigned, givenUp: state.givenUp, ledgerInFlight: state.ledgerInFlight,
            peakInFlight: state.peakInFlight)
    }

    package func run() async throws {
        let first = phase.withLock { phase -> Bool in
            guard phase == .created else { return false }
            phase = .running
            return true
        }
        guard first else { throw RelayError("RelayService.run() called twice") }
        do {
            try producer.start()  // the Kafka clients' threads start here, not when they are made
            // The results topic first: its lookup is the first request a refused credential shows in, within
            // seconds (InitProducerId would wait for its whole time-out).
            await learnResultsTopic()
            try refuseStartWithRefusedCredentials()
            try await registerTransactionalID()
            try consumer.subscribe(topics: configuration.topics.inputs)
            try consumer.start()
        } catch {
            phase.withLock { $0 = .failed }
            // The clients' threads stop before the error ends the process (the producer's already polls).
            await close()
            throw error
        }
        logger.info("relay started", metadata: ["topics": "\(configuration.topics.input)", "urgentTopics": "\(configuration.topics.urgent)"])

        await withTaskGroup(of: Void.self) { top in
            // Whichever ends first: the pipeline (shutdown, consumer closed) or a failure that stops it.
            top.addTask { await self.process() }
            top.addTask { [failure] in await self.watchForFailure(failure) }
            _ = await top.next()
            top.cancelAll()
        }
        await close()
        if let reason = failure.value {
            phase.withLock { $0 = .failed }
            logger.critical("relay stopped: \(reason)")
            throw RelayError(reason)
        }
        phase.withLock { $0 = .stopped }
        logger.info("relay stopped")
    }

    /// Consumes until graceful shutdown (or cancellation by a failure), drains within the drain timeout,
    /// then abandons what is left: the producer withdraws its unacknowledged records, so no task waits for
    /// a broker that is gone, and their offsets are never stored.
    private func process() async {
        // The decoder is single-threaded: it lives in this task only.
        let triage: EventTriage
        do {
            triage = try pipeline.makeTriage()
        } catch {
            failure.set("cannot create the event decoder: \(error)")
            return
        }
        // Discarding: a long-running relay starts millions of child tasks; a plain task group would keep every
        // finished child until someone awaited it.
        await withDiscardingTaskGroup { group in
            // Exactly-once: the transaction loop commits held records until `abandon()` (after the drain).
            if let transactions { group.addTask { await transactions.run() } }
            // Batches: the graceful-shutdown wrapper hands each element over between tasks, which per event
            // would be the pipeline's largest cost (and its throughput limit).
            for await var batch in consumer.events.batches(maxCount: Self.consumeBatch).cancelOnGracefulShutdown() {
                // A lane the gate holds (it may close halfway through a batch) takes no more events: the rest of
                // the batch in that lane goes back, in order, first out once the lane resumes; the rest goes on.
                var heldBack: [KafkaConsumerMessage] = []
                var heldLanes: Set<DeliveryLane> = []
                // Each event moves out of the batch (swapped for an empty one) into its `InFlightEvent`:
                // iterating would copy every record, a retain and a release of each buffer.
                for index in batch.indices {
                    var event = KafkaConsumerEvent.partitionsLost([])
                    swap(&event, &batch[index])
                    if let lane = event.messageLane.map(DeliveryLane.init), heldLanes.contains(lane) || intake.isHeld(lane) {
                        heldLanes.insert(lane)
                        if case .message(let message) = consume event { heldBack.append(message) }
                        continue
                    }
                    handle(event, triage: triage, group: &group)
                }
                consumer.putBack(heldBack)
                metrics.lanes.urgent.waiting.record(consumer.bufferedMessageCount(.urgent))
                metrics.lanes.bulk.waiting.record(consumer.bufferedMessageCount(.bulk))
            }
            if !Task.isCancelled {
                phase.withLock { if $0 == .running { $0 = .stopping } }
                logger.info("relay stopping: draining in-flight events", metadata: ["inFlight": "\(state.inFlightEvents)"])
                group.addTask { [self] in await holdWhileKafkaIsUnreachable() }
                let drained = await state.waitUntilDrained(nil, timeout: configuration.drainTimeout)
                if !drained {
                    logger.warning(
                        "drain deadline passed; abandoning unfinished events (the next owner of their partitions redoes them)",
                        metadata: ["inFlight": "\(state.inFlightEvents)"]
                    )
                }
            }
            // Stop the deliveries still running and the publishing retries; records already sent get their
            // delivery reports within the close timeout while Kafka answers (withdrawing them would redo
            // events whose results are in Kafka), then whatever is left is withdrawn.
            abandon()
            group.cancelAll()
            let grace = consumer.health.isKafkaReachable ? Self.closeTimeout : Self.closeTimeoutKafkaDown
            // Exactly-once: the transaction under way ends (commit or abort) before the producer is flushed,
            // purged and closed; a transaction left open would hold read_committed readers back.
            if let transactions, await !transactions.waitUntilFinished(timeout: grace) {
                logger.error("a Kafka transaction was still under way at shutdown; read_committed readers may wait up to kafka.transactionTimeoutMs for the broker to abort it")
            }
            if !Task.isCancelled { try? await producer.flush(timeout: grace) }
            await producer.withdrawAll()
        }
    }

    /// During a drain, watches whether results can reach Kafka. Once they cannot, the drain sends nothing
    /// more to APNs: an event whose result cannot be published is redone by its partition's next owner, so
    /// every push started now would reach the device twice (measured before: 1,516 pushes in a 20 s drain
    /// with Kafka unreachable). Requests not yet sent end unsent, retries stop, and the drain waits only
    /// for what APNs already has. Ends when the task is cancelled (the drain is over).
    private func holdWhileKafkaIsUnreachable() async {
        while !Task.isCancelled {
            if !consumer.health.isKafkaReachable {
                pipeline.holdUnsentRequests()
                logger.warning("Kafka is unreachable while draining: no new APNs requests; waiting only for those already sent (the rest is redone by the partitions' next owner)",
                               metadata: ["inFlight": "\(state.inFlightEvents)"])
                return
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Flushes what is left (nothing, after a drain or a withdrawal), commits the stored offsets and leaves
    /// the group — each bounded, so a shutdown with Kafka gone still ends within seconds.
    private func close() async {
        let timeout = consumer.health.isKafkaReachable ? Self.closeTimeout : Self.closeTimeoutKafkaDown
        do {
            try await producer.close(timeout: timeout)
        } catch {
            logger.error("producer close failed at shutdown; unacknowledged results are redone after restart", metadata: ["error": "\(error)"])
        }
        do {
            try await consumer.close(timeout: timeout)
        } catch {
            logger.error("consumer close failed (its offsets are committed in the background if Kafka answers)", metadata: ["error": "\(error)"])
        }
    }

    private func handle(_ event: consuming KafkaConsumerEvent, triage: EventTriage, group: inout DiscardingTaskGroup) {
        switch consume event {
        case .message(let message):
            pipeline.take(message, triage: triage)
        case .partitionsAssigned(let partitions):
            let all = state.assign(partitions)
            metrics.assignedPartitions.record(all.count)
            logger.info("partitions assigned", metadata: ["partitions": "\(partitions)"])
            if let transactions, !partitions.isEmpty {
                let assignment = transactions.assigned()
                group.addTask { [consumer, logger] in
                    do {
                        let committed = try await consumer.committedOffsets(for: partitions, timeout: Self.closeTimeout)
                        transactions.confirm(committed.compactMapValues { $0 }, assignment: assignment)
                    } catch {
                        // Only the early check is lost: the first transaction of these partitions checks the same.
                        logger.warning("could not read the assigned partitions' committed offsets", metadata: ["error": "\(error)"])
                    }
                }
            }
        case .partitionsRevoked(let revocation):
            logger.info("partitions revoked; draining", metadata: ["partitions": "\(revocation.partitions)"])
            group.addTask { [state, configuration, logger, metrics, transactions] in
                let deadline = ContinuousClock.now + configuration.revocationDrainTimeout
                let drained = await state.waitUntilDrained(revocation.partitions, timeout: configuration.revocationDrainTimeout)
                if !drained {
                    logger.warning("revocation drain deadline passed; abandoning unfinished events", metadata: ["partitions": "\(revocation.partitions)"])
                }
                if let transactions {
                    // The finished events' records and offsets, committed while the partitions are still ours;
                    // what is left (beyond an unfinished one, or if the commit fails) is never produced.
                    if await !transactions.flush(timeout: max(.milliseconds(100), deadline - .now)) {
                        logger.warning("revoked partitions' records not committed in time; their next owner redoes them", metadata: ["partitions": "\(revocation.partitions)"])
                    }
                    transactions.drop(revocation.partitions)
                }
                state.release(revocation.partitions)
                metrics.assignedPartitions.record(state.assignedPartitions.count)
                revocation.acknowledge()
            }
        case .partitionsLost(let partitions):
            logger.warning("partitions lost; their unfinished events will be redone by the new owner", metadata: ["partitions": "\(partitions)"])
            transactions?.drop(partitions)
            state.release(partitions)
            metrics.assignedPartitions.record(state.assignedPartitions.count)
        }
    }

    /// Gives up what is in flight (shutdown deadline passed, or a failure): deliveries end at their next
    /// answer or retry without a result, publishing stops retrying; none of their offsets is stored.
    private func abandon() {
        pipeline.abandon()
    }
}

/// A relay failure that stops the service (configuration or start-up problems, never input).
package struct RelayError: Error, CustomStringConvertible, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}
