import APNsCore
import ServiceSupport

/// The end of delivering one notification: its outcome and what APNs said last.
package struct DeliveryReport: Sendable, Hashable {
    package var outcome: DeliveryOutcome
    /// APNs' last response, when the last attempt got one.
    package var response: APNsResponse?
    /// Why the last attempt got no response, when it did not.
    package var failure: TransportFailure?
    package var attempts: Int
    /// The decision behind the outcome (e.g. whether a rejection also removes the token).
    package var decision: DeliveryDecision?
    /// Resends after an attempt APNs may have received (a timeout or a lost connection after the request
    /// was sent): each may have pushed the notification twice.
    package var possibleDuplicates = 0
}

/// Sends one notification until it is delivered, finally refused, expired or out of attempts.
///
/// Retries follow `RetryPolicy`; delays are real sleeps on the caller's task, which is one of many
/// concurrent deliveries, so one slow event never holds up the others.
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

    /// Delivers `notification` through `sender`. Cancellation ends the loop with the last known state as
    /// `.failed` (the caller does not publish results of cancelled work: the event is redone later).
    package func deliver(_ notification: APNsNotification, with sender: some NotificationSender) async -> DeliveryReport {
        var generator = SystemRandomNumberGenerator()
        var attempt = 0
        var tokenRefreshes = 0
        var possibleDuplicates = 0
        while true {
            attempt += 1
            let decision: DeliveryDecision
            var response: APNsResponse?
            var failure: TransportFailure?
            do {
                let answer = try await sender.send(notification, deadline: .now + requestTimeout)
                response = answer
                decision = DeliveryDecision(response: answer)
            } catch {
                let cause = (error as? any TransportFailureError)?.transportFailure ?? .connectionLost
                failure = cause
                decision = DeliveryDecision(failure: cause)
                // Never sent (it waited for the client's concurrency limit or a stream): not an APNs attempt.
                if cause == .notSent { attempt -= 1 }
            }
            let step = policy.nextStep(
                after: decision, attempt: attempt, tokenRefreshes: tokenRefreshes,
                now: clock.now(), expiration: notification.expiration, using: &generator
            )
            switch step {
            case .finish(let outcome):
                return DeliveryReport(outcome: outcome, response: response, failure: failure, attempts: attempt, decision: decision, possibleDuplicates: possibleDuplicates)
            case .retry(let delay, let strategy):
                if strategy == .refreshToken { tokenRefreshes += 1 }
                if failure?.mayHaveReachedAPNs == true { possibleDuplicates += 1 }
                if delay > .zero {
                    do {
                        try await Task.sleep(for: delay)
                    } catch {
                        return DeliveryReport(outcome: .failed, response: response, failure: failure, attempts: attempt, decision: decision, possibleDuplicates: possibleDuplicates)
                    }
                }
                if Task.isCancelled {
                    return DeliveryReport(outcome: .failed, response: response, failure: failure, attempts: attempt, decision: decision, possibleDuplicates: possibleDuplicates)
                }
            }
        }
    }
}
