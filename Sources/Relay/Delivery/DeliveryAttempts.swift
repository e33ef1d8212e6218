import APNsCore
import RelayContract
import ServiceSupport

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
    /// Resends after an attempt APNs may have received (a timeout or a lost connection after the request
    /// was sent): each may have pushed the notification twice.
    package var possibleDuplicates = 0
    /// The attempts stopped because the caller abandoned them (`isAbandoned`), not because of an answer: the
    /// event has no result and is redone later.
    package var abandoned = false
}

/// Sends one notification until it is delivered, finally refused, expired or out of attempts.
///
/// Retries follow `RetryPolicy`. No task waits for an answer: each attempt continues in the sender's
/// completion; only a retry delay waits on a task (`Task.sleep`), so one slow event never holds up others.
package struct DeliveryAttempts: Sendable {
    package var policy: RetryPolicy
    /// How long one request may wait for its response.
    package var requestTimeout: Duration
    /// UNIX seconds now; injectable for tests.
    package var clock: WallClock

    package init(policy: RetryPolicy, requestTimeout: Duration, clock: WallClock) {
        self.policy = policy
        self.requestTimeout = requestTimeout
        self.clock = clock
    }

    /// Delivers `notification` through `sender`; `completion` runs once with the report, on the thread of
    /// the last answer (or of the last retry delay).
    ///
    /// - Parameter isAbandoned: asked before each retry; when it says `true` the loop ends with the last
    ///   known state as `.failed` (the caller does not publish results of abandoned work: the event is
    ///   redone later).
    ///
    /// - Parameter trace: the event's trace, when tracing is on: each attempt gets a client span.
    func deliver(
        _ notification: APNsNotification, with sender: some NotificationSender, trace: EventTrace?,
        isAbandoned: @escaping @Sendable () -> Bool = { false },
        completion: @escaping @Sendable (DeliveryReport) -> Void
    ) {
        attempt(Progress(), notification, sender, trace, isAbandoned, completion)
    }

    package func deliver(
        _ notification: APNsNotification, with sender: some NotificationSender,
        isAbandoned: @escaping @Sendable () -> Bool = { false },
        completion: @escaping @Sendable (DeliveryReport) -> Void
    ) {
        deliver(notification, with: sender, trace: nil, isAbandoned: isAbandoned, completion: completion)
    }

    /// `deliver(_:with:isAbandoned:completion:)` for async callers; cancelling the task abandons the loop
    /// at its next retry.
    package func deliver(_ notification: APNsNotification, with sender: some NotificationSender) async -> DeliveryReport {
        let cancelled = Flag()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                deliver(notification, with: sender, isAbandoned: { cancelled.isSet }) { continuation.resume(returning: $0) }
            }
        } onCancel: {
            cancelled.set()
        }
    }

    /// What carries over from one attempt to the next.
    private struct Progress {
        var attempt = 0
        var tokenRefreshes = 0
        var possibleDuplicates = 0
    }

    private func attempt(
        _ progress: Progress, _ notification: APNsNotification, _ sender: some NotificationSender, _ trace: EventTrace?,
        _ isAbandoned: @escaping @Sendable () -> Bool, _ completion: @escaping @Sendable (DeliveryReport) -> Void
    ) {
        var progress = progress
        progress.attempt += 1
        let span = trace?.attemptStarted(number: progress.attempt, host: notification.environment.host)
        sender.send(notification, deadline: .now + requestTimeout) { [progress] result in
            var progress = progress
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
                if cause == .notSent { progress.attempt -= 1 }
            }
            if let span { trace?.attemptEnded(span, response: response, failure: failure.map { "\($0)" }) }
            var generator = SystemRandomNumberGenerator()
            let step = policy.nextStep(
                after: decision, attempt: progress.attempt, tokenRefreshes: progress.tokenRefreshes,
                now: clock.now(), expiration: notification.expiration, using: &generator
            )
            func report(_ outcome: DeliveryOutcome) -> DeliveryReport {
                DeliveryReport(
                    outcome: outcome, response: response, failure: failure, failureMessage: failureMessage,
                    attempts: progress.attempt, decision: decision, possibleDuplicates: progress.possibleDuplicates)
            }
            switch step {
            case .finish(let outcome):
                completion(report(outcome))
            case .retry(let delay, let strategy):
                if strategy == .refreshToken { progress.tokenRefreshes += 1 }
                if failure?.mayHaveReachedAPNs == true { progress.possibleDuplicates += 1 }
                var giveUp = report(.failed)
                giveUp.abandoned = true
                let next = { [progress] in
                    if isAbandoned() { completion(giveUp) } else { attempt(progress, notification, sender, trace, isAbandoned, completion) }
                }
                guard delay > .zero else { return next() }
                Task {
                    try? await Task.sleep(for: delay)
                    next()
                }
            }
        }
    }
}
