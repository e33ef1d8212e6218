import APNsCore
import Kafka
import Logging
import ServiceSupport

/// What happens to one event: admitted and triaged on the consumer loop, then refused at once, explained off
/// the loop, or delivered; its records published; finished in the ledger from the delivery-report callback.
extension RelayService {
    func accept(_ message: KafkaConsumerMessage, triage: EventTriage) {
        metrics.consumed.increment()
        let size = message.value?.count ?? 0
        switch state.admit(message.topicPartition, offset: message.offset, bytes: size) {
        case .skip:
            logger.debug("skipping an event already in flight, done, or not assigned here", metadata: Self.position(message))
            return
        case .admittedLate:
            logger.warning("an event arrived after later ones of its partition; processing it (offsets are committed only past it)", metadata: Self.position(message))
        case .admitted:
            break
        }
        updateInFlightGauges()
        let now = clock.now()
        let receivedAt = Int64(now * 1000)
        let source = SourcePosition(topic: message.topic, partition: message.partition, offset: message.offset)
        switch triage.triage(message, receivedAt: receivedAt, nowSeconds: Int64(now)) {
        case .answer(let answer, let refusal?, _) where refusal.decodingError != nil && explainer != nil:
            // Schema-invalid: the reference validator explains it off the loop (it is slow and runs a thread
            // of its own), then the refusal is published from there.
            explanations.async { [self] in
                let (result, refusal) = EventTriage.explained(answer, refusal, bytes: message.value ?? [], by: explainer!)
                refuse(message, result: result, refusal: refusal, source: source, size: size, receivedAt: receivedAt)
            }
        case .answer(let answer, let refusal, let broadcast):
            // Refused or expired: answered here, without a task.
            refuse(message, result: answer, refusal: refusal, source: source, size: size, receivedAt: receivedAt, broadcast: broadcast)
        case .deliver(let event, let notification):
            let attempts = DeliveryAttempts(policy: configuration.retry, requestTimeout: configuration.requestTimeout, clock: clock)
            attempts.deliver(notification, with: sender, isAbandoned: { [abandoned, holding] in abandoned.isSet || holding.isSet }) { [self] report in
                delivered(event, notification, report: report, for: message, source: source, size: size, receivedAt: receivedAt)
            }
        }
    }

    /// Publishes the answer to an event refused (invalid, expired) before any delivery, with its dead letter.
    func refuse(
        _ message: KafkaConsumerMessage, result answer: DeliveryResult, refusal: Refusal?,
        source: SourcePosition, size: Int, receivedAt: Int64, broadcast: Bool = false
    ) {
        if abandoned.isSet {
            finishAbandoned(size: size)
            return
        }
        var records: [OutgoingRecord] = []
        if let refusal {
            logger.info("event refused", metadata: Self.position(message).merging([
                "reason": "\(answer.reason ?? "")", "eventId": "\(answer.eventID ?? "")",
            ]) { $1 })
            records.append(outputs.deadLetter(for: message, source: source, refusal: refusal))
            metrics.deadLetters.increment()
        }
        publish(answer, with: records, for: message, source: source, size: size, receivedAt: receivedAt, broadcast: broadcast)
    }

    /// A valid event's delivery ended (on an APNs event loop, or a retry's task): publishes its
    /// result (and removed-token record).
    func delivered(
        _ event: NotificationEvent, _ notification: APNsNotification, report: DeliveryReport,
        for message: KafkaConsumerMessage, source: SourcePosition, size: Int, receivedAt: Int64
    ) {
        if abandoned.isSet || report.abandoned {
            finishAbandoned(size: size)
            return
        }
        let broadcast = notification.isBroadcast
        if report.attempts > 1 { metrics.retries.increment(by: report.attempts - 1) }
        if report.possibleDuplicates > 0 { metrics.possibleDuplicatePushes.increment(by: report.possibleDuplicates) }
        if report.response != nil {
            connectFailureStreak.store(0, ordering: .relaxed)
            metrics.connectFailureStreak.record(0)
        } else if report.failure == .connectFailed {
            metrics.connectFailureStreak.record(connectFailureStreak.add(1, ordering: .relaxed).newValue)
        }
        let result = DeliveryResult(
            eventID: event.id, metadata: event.metadata, outcome: report.outcome,
            status: report.response?.status, reason: Self.reason(of: report),
            message: report.failure.map { failure in
                "no response from APNs: \(failure)" + (report.failureMessage.map { " (\($0))" } ?? "")
            },
            apnsID: broadcast ? nil : report.response?.apnsID,
            apnsRequestID: broadcast ? report.response?.apnsID : nil, apnsUniqueID: report.response?.apnsUniqueID,
            attempts: report.attempts, possibleDuplicates: report.possibleDuplicates, source: source, receivedAt: receivedAt,
            completedAt: clock.nowMilliseconds()
        )
        var records: [OutgoingRecord] = []
        let removalAllowed = tokenRemovals.allowsRemoval(
            after: report, credential: sender.credentialName(forTopic: notification.topic), environment: event.environment,
            targets: broadcast ? .channels : .deviceTokens
        )
        if removalAllowed, let removal = outputs.removal(for: event, notification: notification, report: report) {
            records.append(removal)
            (broadcast ? metrics.removedChannels : metrics.removedTokens).increment()
        }
        logger.debug("event delivered", metadata: Self.position(message).merging([
            "eventId": "\(event.id)", "outcome": "\(report.outcome.rawValue)",
            "apnsId": "\(report.response?.apnsID ?? "")", "reason": "\(result.reason ?? "")", "target": "\(notification.target)",
        ]) { $1 })
        publish(result, with: records, for: message, source: source, size: size, receivedAt: receivedAt, broadcast: broadcast)
    }

    /// Publishes an event's result (first) and its other records; once Kafka acknowledged all of them —
    /// in the delivery-report callback, on the producer's thread — finishes the event in the ledger and
    /// stores its partition's new frontier.
    func publish(
        _ result: DeliveryResult, with records: [OutgoingRecord], for message: KafkaConsumerMessage,
        source: SourcePosition, size: Int, receivedAt: Int64, broadcast: Bool = false
    ) {
        let all = [outputs.result(result, key: message.key, source: source)] + records
        let partition = message.topicPartition
        publisher.publish(all) { [self] published in
            guard published else {
                // The relay is stopping (shutdown deadline, or a failure): the offset is never stored.
                logger.log(level: abandoned.isSet ? .debug : .warning, "result not published; the event is given up and redone after a restart",
                           metadata: Self.position(message))
                finishAbandoned(size: size)
                return
            }
            metrics.result(result.outcome, reason: result.reason, broadcast: broadcast)
            metrics.latency.recordNanoseconds(max(0, clock.nowNanoseconds() - receivedAt * 1_000_000))
            state.finish(partition, offset: source.offset, bytes: size) { processed in
                do {
                    try consumer.storeOffset(topic: source.topic, partition: source.partition, offset: processed)
                } catch {
                    // Not assigned any more: the next owner redoes the events after its committed offset.
                    logger.debug("offset not stored", metadata: [
                        "topic": "\(source.topic)", "partition": "\(source.partition)", "offset": "\(processed)", "error": "\(error)",
                    ])
                }
            }
            updateInFlightGauges()
        }
    }


    func finishAbandoned(size: Int) {
        state.abandon(bytes: size)
        updateInFlightGauges()
    }

    func updateInFlightGauges() {
        metrics.inFlight.record(state.inFlightEvents)
        metrics.inFlightBytes.record(state.inFlightBytes)
    }

    static func reason(of report: DeliveryReport) -> String? {
        if let reason = report.response?.reason { return reason.rawValue }
        if report.outcome == .expired { return "Expired" }
        if let failure = report.failure { return "\(failure)" }
        return nil
    }

    static func position(_ message: KafkaConsumerMessage) -> Logger.Metadata {
        ["topic": "\(message.topic)", "partition": "\(message.partition)", "offset": "\(message.offset)"]
    }
}
