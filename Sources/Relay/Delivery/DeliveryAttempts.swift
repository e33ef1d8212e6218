import APNsCore
import RelayContract
import ServiceSupport
import Tracing

/// The end of delivering one notification: its outcome and what APNs said last.
package struct DeliveryReport: Sendable, Hashable {
    package var outcome: DeliveryOutcome
    /// APNs' last response, when the last attempt got one.
    package var response: APNsResponse?
    /// Why the last attempt got no response, when it did not.
    package var failure: TransportFailure?
    /// The transport's own account of that failure (which name did not resolve, which TLS error, …).
    package var failureMessage: String? = nil
    package var attempts: Int
    /// The decision behind the outcome (e.g. whether a rejection also removes the token).
    package var decision: DeliveryDecision?
    /// Resends after an attempt APNs may have received (`DeliveryProgress.possibleDuplicates`).
    package var possibleDuplicates = 0
    /// The attempts stopped because the caller abandoned them (`isAbandoned`), not because of an answer: the
    /// event has no result and is redone later.
    package var abandoned = false
}

/// Sends each event's notification until it is delivered, finally refused, expired or out of attempts: the
/// pipeline's one retrier.
///
/// Retries follow `RetryPolicy`. No task waits for an answer: each attempt continues in the sender's
/// completion; only a retry delay waits on a task (`Task.sleep`), so one slow event never holds up others.
/// The event carries its own progress (`Delivery.progress`) from attempt to attempt.
///
/// A class, shared by every event: an attempt out at APNs keeps it (`AwaitedAnswer.attempts`) as one
/// reference, not as a copy of its settings and closures (one retain per attempt instead of one per field).
final class DeliveryAttempts: Sendable {
    let policy: RetryPolicy
    /// How long one request may wait for its response.
    let requestTimeout: Duration
    /// UNIX seconds now; injectable for tests.
    let clock: WallClock
    /// Asked before each retry; when it says `true` the attempts end with the last known state as
    /// `.failed`, `abandoned` (the caller publishes no result for it: the event is redone later).
    let isAbandoned: @Sendable () -> Bool

    init(policy: RetryPolicy, requestTimeout: Duration, clock: WallClock, isAbandoned: @escaping @Sendable () -> Bool = { false }) {
        self.policy = policy
        self.requestTimeout = requestTimeout
        self.clock = clock
        self.isAbandoned = isAbandoned
    }

    /// Delivers `event`'s notification (`event.delivery`, set by triage) with its credential; `completion`
    /// runs once with the event (its progress updated) and the report, on the thread of the last answer (or
    /// of the last retry delay). Each attempt gets a client span when the event is traced.
    func deliver(_ event: InFlightEvent, completion: @escaping @Sendable (InFlightEvent, DeliveryReport) -> Void) {
        precondition(event.delivery != nil, "only an event triage found valid is delivered")
        attempt(event, completion)
    }

    private func attempt(_ event: InFlightEvent, _ completion: @escaping @Sendable (InFlightEvent, DeliveryReport) -> Void) {
        // One reading of the clock for the attempt: its deadline, the start of its request in the client, and
        // the time the removal screen counts its answer at (`DeliveryProgress.lastAttemptAt`).
        let now = MonotonicInstant.now
        // What the send needs, read in place; the send itself runs outside the access (its answer may come
        // back before it returns, and that reads the event's delivery).
        let (attempt, sender, notification) = event.withDelivery { delivery in
            delivery.progress.attempts += 1
            delivery.progress.lastAttemptAt = now
            return (delivery.progress.attempts, delivery.credential.sender, delivery.event.notification)
        }
        let span = event.trace?.attemptStarted(number: attempt, host: notification.environment.host)
        // The answer comes to the event itself (`InFlightEvent.answered`), which hands it to `answered` below
        // with what it keeps here: no closure per attempt.
        event.awaitedAnswer = AwaitedAnswer(attempts: self, span: span, completion: completion)
        sender.send(notification, deadline: now + requestTimeout, now: now, answeringTo: event)
    }

    /// An attempt's answer: finish with a report, or retry after the policy's delay.
    func answered(
        _ result: Result<APNsResponse, any Error>, for event: InFlightEvent, span: (any Span)?,
        completion: @escaping @Sendable (InFlightEvent, DeliveryReport) -> Void
    ) {
        let decision: DeliveryDecision
        var response: APNsResponse?
        var failure: TransportFailure?
        var failureMessage: String?
        switch result {
        case .success(let answer):
            response = answer
            decision = DeliveryDecision(response: answer)
        case .failure(let error):
            let cause = (error as? any TransportFailureError)?.transportFailure ?? .connectionLost
            failure = cause
            failureMessage = (error as? any TransportFailureError)?.message ?? "\(error)"
            decision = DeliveryDecision(failure: cause)
            // Never sent (it waited for the client's concurrency limit or a stream): not an APNs attempt.
            if cause == .notSent { event.delivery!.progress.attempts -= 1 }
        }
        if let span { event.trace?.attemptEnded(span, response: response, failure: failure.map { "\($0)" }) }
        var generator = SystemRandomNumberGenerator()
        let (progress, expiration) = event.withDelivery { ($0.progress, $0.event.notification.expiration) }
        let step = policy.nextStep(
            after: decision, attempt: progress.attempts, tokenRefreshes: progress.tokenRefreshes,
            now: clock.now(), expiration: expiration, using: &generator
        )
        func report(_ outcome: DeliveryOutcome, _ progress: DeliveryProgress) -> DeliveryReport {
            DeliveryReport(
                outcome: outcome, response: response, failure: failure, failureMessage: failureMessage,
                attempts: progress.attempts, decision: decision, possibleDuplicates: progress.possibleDuplicates)
        }
        switch step {
        case .finish(let outcome):
            completion(event, report(outcome, progress))
        case .retry(let delay, let strategy):
            let progress = event.withDelivery { delivery in
                if strategy == .refreshToken { delivery.progress.tokenRefreshes += 1 }
                if failure?.mayHaveReachedAPNs == true { delivery.progress.possibleDuplicates += 1 }
                return delivery.progress
            }
            var giveUp = report(.failed, progress)
            giveUp.abandoned = true
            let next = { [event, self] in
                if isAbandoned() { completion(event, giveUp) } else { attempt(event, completion) }
            }
            guard delay > .zero else { return next() }
            Task {
                try? await Task.sleep(for: delay)
                next()
            }
        }
    }
}
