import APNsCore
import Kafka
import Logging
import RelayContract
import ServiceSupport
import Synchronization
import Tracing

/// The per-event path, in the order an event takes it:
///
/// 1. `take` (the consumer loop): make the event's one value (`InFlightEvent`), admit it in the ledger and
///    the in-flight gate (`RelayState`), then triage it (`EventTriage`: size, schema, credential, APNs rules).
/// 2. An event refused or expired is answered at once (`refuse`); a schema-invalid one is first echoed and
///    explained by the reference validator off the loop, within a bounded backlog (`RefusalExplanations`). A valid one is delivered with the credential triage found
///    (`DeliveryAttempts`, on an APNs event loop) and its answer read into a result and a removed-token
///    record (`delivered`).
/// 3. `publish`: the records go to Kafka (`ResultPublisher`); once Kafka acknowledged all of them, the event
///    finishes in the ledger, which stores its partition's new frontier (`RelayState.finish`). Exactly-once
///    mode: the records are held (`TransactionalPublisher`) and the event finishes in the ledger at once;
///    the transaction that commits its records commits its offset with them.
///
/// Every event admitted ends in exactly one of two ways: finished (its records in Kafka) or given up
/// (`finishAbandoned`: shutdown or a failure; its offset is never stored and its partition's next owner
/// redoes it). Thread-safe: steps 2 and 3 run on APNs event loops, the explanation queue and the
/// producer's thread.
final class EventPipeline: Sendable {
    private let configuration: RelayConfiguration
    /// Which credential sends which (topic, environment): triage looks each event's up once.
    private let credentials: CredentialDirectory
    /// The one retrier: every valid event's attempts.
    private let attempts: DeliveryAttempts
    private let state: RelayState
    private let publisher: ResultPublisher
    /// Exactly-once mode: holds each event's records for the next transaction instead of `publisher`.
    private let transactions: TransactionalPublisher?
    private let outputs: OutputRecords
    /// Withholds BadDeviceToken removals when too many pushes answer BadDeviceToken (a misconfiguration).
    private let tokenRemovals: TokenRemovalScreen
    private let metrics: RelayMetrics
    private let logger: Logger
    /// Whether `logger` writes debug lines, read once: its level cannot change (a `let` value), and asking it
    /// per event copies its handler (a retain and a release of the handler's box).
    private let logsDebug: Bool
    private let clock: WallClock
    /// The id echo and the reference validator's explanation of schema-invalid events, off the consumer loop
    /// and bounded; `nil` validator if it cannot be built (the fast decoder's message is published then).
    private let explanations = RefusalExplanations(validator: try? SchemaValidator.notificationEvent())
    /// Which refused events get a log line (a few per reason and interval; every one is counted in the
    /// results metric).
    private let refusalLog = BlockingMutex(RefusalLogBudget())
    /// Set when the relay gives up its in-flight events (see `abandon()`).
    private let abandoned = Flag()
    /// Set when a drain finds Kafka unreachable (see `holdUnsentRequests()`).
    private let holding = Flag()
    /// Deliveries in a row that ended because no APNs connection could be made; 0 after any APNs answer.
    private let connectFailureStreak = Atomic<Int>(0)
    /// Spans and trace headers, when tracing is on.
    private let tracing: EventTracing?

    init(
        configuration: RelayConfiguration, credentials: CredentialDirectory, state: RelayState, publisher: ResultPublisher,
        transactions: TransactionalPublisher? = nil, metrics: RelayMetrics, logger: Logger, clock: WallClock, tracing: EventTracing? = nil
    ) {
        self.tracing = tracing
        self.configuration = configuration
        self.credentials = credentials
        self.attempts = DeliveryAttempts(
            policy: configuration.retry, requestTimeout: configuration.requestTimeout, clock: clock,
            isAbandoned: { [abandoned, holding] in abandoned.isSet || holding.isSet })
        self.state = state
        self.publisher = publisher
        self.transactions = transactions
        self.outputs = OutputRecords(topics: configuration.topics, maxDeadLetterBytes: configuration.maxDeadLetterBytes)
        self.tokenRemovals = TokenRemovalScreen(configuration: configuration.tokenRemoval, logger: logger)
        tokenRemovals.register(credentials: credentials.names)
        self.metrics = metrics
        self.logger = logger
        self.logsDebug = logger.logLevel <= .debug
        self.clock = clock
    }

    /// The triage for the consumer loop, which owns its (single-threaded) decoder.
    func makeTriage() throws -> EventTriage {
        // No explainer and no salvage here: the loop only takes the fast decoder's verdict (see `explanations`).
        var triage = try EventTriage(configuration: configuration, decoder: EventDecoder(), credentials: credentials)
        triage.defersSalvage = true
        return triage
    }

    // MARK: 1. Admission and triage, on the consumer loop

    func take(_ message: consuming KafkaConsumerMessage, triage: EventTriage) {
        metrics.consumed.increment()
        let now = clock.now()
        // The record moves into the event (`consuming`): no copy of its buffers.
        let admitted = InFlightEvent(message, receivedAt: Int64(now * 1000))
        let (admission, counts) = state.admitCounting(admitted.partition, offset: admitted.source.offset, bytes: admitted.bytes, lane: admitted.lane)
        switch admission {
        case .skip:
            logger.debug("skipping an event already in flight, done, or not assigned here", metadata: admitted.logMetadata)
            return
        case .admittedLate:
            logger.warning("an event arrived after later ones of its partition; processing it (offsets are committed only past it)", metadata: admitted.logMetadata)
        case .admitted:
            break
        }
        if let counts { updateInFlightGauges(counts, admitted.lane) }
        if let tracing { admitted.trace = tracing.begin(admitted.message) }
        let event = admitted
        // Consumed: the verdict's delivery moves into the event.
        let verdict = triage.triage(event, nowSeconds: Int64(now))
        switch consume verdict {
        case .answer(let answer, let refusal?, _) where refusal.decodingError != nil || refusal.salvagePending:
            // Schema-invalid: echoed and explained off the loop (both parse the whole event), then the
            // refusal is published from there; with the fast decoder's message at once when too many wait.
            let queued = explanations.submit(answer, refusal, bytes: event.message.value ?? []) { [self] result, refusal, shortcut in
                refuse(event, result: result, refusal: refusal, shortcut: shortcut)
            }
            if !queued { refuse(event, result: answer, refusal: refusal, shortcut: .backlogFull) }
        case .answer(let answer, let refusal, let broadcast):
            refuse(event, result: answer, refusal: refusal, broadcast: broadcast)
        case .deliver(let delivery):
            event.delivery = consume delivery
            attempts.deliver(event) { [self] event, report in delivered(event, report: report) }
        }
    }

    // MARK: 2. The answer: refused before sending, or delivered

    /// Publishes the answer to an event refused (invalid, expired) before any delivery, with its dead letter.
    /// `shortcut`: what of a schema-invalid event's explanation was left out, for its log line.
    private func refuse(
        _ event: InFlightEvent, result: DeliveryResult, refusal: Refusal?, broadcast: Bool = false,
        shortcut: RefusalExplanations.Shortcut = .none
    ) {
        if abandoned.isSet {
            finishAbandoned(event)
            return
        }
        var deadLetter: OutgoingRecord?
        if let refusal {
            let reason = result.reason ?? ""
            if case .log(let suppressed) = refusalLog.withLock({ $0.admit(reason, nowNanoseconds: clock.nowNanoseconds()) }) {
                var metadata = event.logMetadata.merging(["reason": "\(reason)", "eventId": "\(result.eventID ?? "")"]) { $1 }
                if suppressed > 0 { metadata["suppressed"] = "\(suppressed)" }
                switch shortcut {
                case .none: break
                case .tooLarge: metadata["details"] = "not explained in detail (larger than \(explanations.maxExplainedBytes) bytes)"
                case .backlogFull: metadata["details"] = "not explained or echoed (\(explanations.maxBacklog) refused events waiting)"
                }
                logger.info(
                    suppressed > 0 ? "event refused (\(suppressed) more of this reason not logged since the last line)" : "event refused",
                    metadata: metadata)
            }
            deadLetter = outputs.deadLetter(for: event.message, source: event.source, refusal: refusal)
            metrics.deadLetters.increment()
        }
        publish(event, result, with: deadLetter, broadcast: broadcast)
    }

    /// A valid event's delivery ended (on an APNs event loop, or a retry's task): publishes its result (and
    /// removed-token or removed-channel record).
    private func delivered(_ event: InFlightEvent, report: DeliveryReport) {
        if abandoned.isSet || report.abandoned {
            finishAbandoned(event)
            return
        }
        // What is left to do needs the delivery only here: the event goes on without it, so publication
        // carries (and the producer's thread releases) no more than it needs.
        guard let delivery = event.delivery.take() else { preconditionFailure("a delivered event has its delivery") }
        // Read in place (`delivery.event.…`): a local copy of the decoded event or its notification would retain
        // each of its strings and buffers.
        let broadcast = delivery.event.notification.isBroadcast
        if report.attempts > 1 { metrics.retries.increment(by: report.attempts - 1) }
        if report.possibleDuplicates > 0 { metrics.possibleDuplicatePushes.increment(by: report.possibleDuplicates) }
        if report.response != nil {
            connectFailureStreak.store(0, ordering: .relaxed)
            metrics.connectFailureStreak.record(0)
        } else if report.failure == .connectFailed {
            metrics.connectFailureStreak.record(connectFailureStreak.add(1, ordering: .relaxed).newValue)
        }
        var result = DeliveryResult(
            eventID: delivery.event.id, metadata: delivery.event.metadata, outcome: report.outcome,
            status: report.response?.status, reason: Self.reason(of: report),
            message: report.failure.map { failure in
                "no response from APNs: \(failure)" + (report.failureMessage.map { " (\($0))" } ?? "")
            },
            attempts: report.attempts, possibleDuplicates: report.possibleDuplicates, source: event.source,
            receivedAt: event.receivedAt, completedAt: clock.nowMilliseconds()
        )
        // The ids as APNs sent them, never as `String`s (`APNsID`).
        if broadcast { result.requestID = report.response?.id } else { result.pushID = report.response?.id }
        result.uniqueID = report.response?.uniqueID
        var removal: OutgoingRecord?
        let removalAllowed = tokenRemovals.allowsRemoval(
            after: report, to: delivery.event.notification.target, credential: delivery.credential.name, environment: delivery.event.environment,
            at: delivery.progress.lastAttemptAt ?? .now
        )
        if removalAllowed, let record = outputs.removal(for: delivery.event, report: report) {
            removal = record
            (broadcast ? metrics.removedChannels : metrics.removedTokens).increment()
        }
        if logsDebug { logger.debug("event delivered", metadata: event.logMetadata.merging([
            "eventId": "\(delivery.event.id)", "outcome": "\(report.outcome.rawValue)",
            "apnsId": "\(report.response?.apnsID ?? "")", "reason": "\(result.reason ?? "")", "target": "\(delivery.event.notification.target)",
        ]) { $1 }) }
        publish(event, result, with: removal, broadcast: broadcast)
    }

    // MARK: 3. Publication and the ledger

    /// Publishes an event's result (first) and its other records; once Kafka acknowledged all of them — in
    /// the delivery-report callback, on the producer's thread — finishes the event in the ledger.
    ///
    /// Exactly-once mode: the records are held, the event finishes in the ledger at once (its offset may be
    /// committed with them), and it leaves the gate when their transaction commits (on the transaction
    /// loop's task).
    private func publish(_ event: InFlightEvent, _ result: DeliveryResult, with other: OutgoingRecord?, broadcast: Bool) {
        var records = EventRecords(result: outputs.result(result, key: event.message.key, source: event.source), other: other)
        let publishSpan: (any Span)? = event.trace.flatMap { trace in
            if let id = result.eventID { trace.identify(eventID: id) }
            return trace.publishing(&records, topic: configuration.topics.results)
        }
        event.publishing = Publishing(outcome: result.outcome, reason: result.reason, broadcast: broadcast, span: publishSpan)
        if let transactions {
            let all = records.array
            let held = state.finishHeld(event.partition, offset: event.source.offset) {
                transactions.hold(event.partition, offset: event.source.offset, records: all) { [self] committed in
                    published(event, published: committed, held: true)
                }
            }
            // Its partition went meanwhile (revoked or lost): the next owner redoes it.
            if !held { published(event, published: false, held: true) }
            return
        }
        publisher.publish(records, of: event) { [self] event, published in
            // The publisher hands back the event it was given.
            self.published(unsafeDowncast(event, to: InFlightEvent.self), published: published, held: false)
        }
    }

    /// An event's records are in Kafka (`published`), or will never be: counts it and ends it.
    private func published(_ event: InFlightEvent, published: Bool, held: Bool) {
        // Set before its records went out, taken once: each completion runs once.
        guard let result = event.publishing.take() else {
            assertionFailure("an event's publication completed twice")
            return
        }
        event.trace?.end(publish: result.span, outcome: result.outcome.rawValue, reason: result.reason, published: published)
        guard published else {
            // The relay is stopping (shutdown deadline, or a failure), or the partition went: the offset is
            // never stored (exactly-once: never committed, and the records never produced).
            logger.log(level: abandoned.isSet || held ? .debug : .warning, "result not published; the event is given up and redone after a restart",
                       metadata: event.logMetadata)
            finishAbandoned(event, traceEnded: true)
            return
        }
        metrics.result(result.outcome, reason: result.reason, broadcast: result.broadcast)
        let latency = max(0, clock.nowNanoseconds() - event.receivedAt * 1_000_000)
        metrics.latency.recordNanoseconds(latency)
        metrics.lanes[event.lane].latency.recordNanoseconds(latency)
        let counts = held
            ? state.release(bytes: event.bytes, lane: event.lane)
            : state.finish(event.partition, offset: event.source.offset, bytes: event.bytes, lane: event.lane)
        updateInFlightGauges(counts, event.lane)
    }

    /// Gives an event up without a result: its offset is never stored.
    private func finishAbandoned(_ event: InFlightEvent, traceEnded: Bool = false) {
        if !traceEnded { event.trace?.end(publish: nil, outcome: nil, reason: nil, published: false) }
        updateInFlightGauges(state.abandon(bytes: event.bytes, lane: event.lane), event.lane)
    }

    private func updateInFlightGauges(_ counts: RelayState.InFlightCounts, _ lane: DeliveryLane) {
        metrics.inFlight.record(counts.events)
        metrics.inFlightBytes.record(counts.bytes)
        metrics.lanes[lane].inFlight.record(counts.laneEvents)
    }

    // MARK: Stopping

    /// Gives up what is in flight (shutdown deadline passed, or a failure): deliveries end at their next
    /// answer or retry without a result, publishing stops retrying; none of their offsets is stored.
    func abandon() {
        abandoned.set()
        publisher.stop()
        transactions?.abandon()
    }

    /// Sends nothing more to APNs (a drain while Kafka is unreachable): requests not yet sent end without a
    /// result, retries stop; deliveries already sent finish and publish as usual.
    func holdUnsentRequests() {
        holding.set()
        credentials.holdUnsentRequests()
    }

    static func reason(of report: DeliveryReport) -> String? {
        if let reason = report.response?.reason { return reason.rawValue }
        if report.outcome == .expired { return "Expired" }
        if let failure = report.failure { return "\(failure)" }
        return nil
    }
}
