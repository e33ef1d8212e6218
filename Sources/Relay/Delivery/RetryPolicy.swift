import APNsCore
import RelayContract

/// How often and how patiently a transient failure is retried.
///
/// Backoff is exponential with full jitter (a uniformly random delay up to the exponential bound), so
/// replicas that failed together do not retry together.
package struct RetryPolicy: Sendable, Hashable {
    /// Attempts in all, the first included.
    package var maxAttempts: Int
    package var initialBackoff: Duration
    package var maxBackoff: Duration
    package var multiplier: Double

    package init(
        maxAttempts: Int = 8,
        initialBackoff: Duration = .milliseconds(100),
        maxBackoff: Duration = .seconds(30),
        multiplier: Double = 2
    ) {
        self.maxAttempts = maxAttempts
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
        self.multiplier = multiplier
    }

    /// A retry is made only if it is due this long before the event's `apns-expiration`: the way from the
    /// retry's timer to APNs (batch windows, the pool's queue, a busy machine) takes time, and a retry due just
    /// before the expiration would reach APNs after it.
    package static let expirationMargin: Duration = .seconds(1)

    /// The upper bound of the delay after `attempt` attempts (1-based), before jitter.
    package func backoffBound(afterAttempt attempt: Int) -> Duration {
        let initial = initialBackoff.seconds
        let bound = initial * pow(multiplier, Double(max(0, attempt - 1)))
        return .seconds(min(bound, maxBackoff.seconds))
    }

    /// A jittered delay after `attempt` attempts: uniform in [bound/2, bound] (half jitter keeps a floor
    /// so a storm of 503s does not turn into an immediate retry storm).
    package func backoff(afterAttempt attempt: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let bound = backoffBound(afterAttempt: attempt).seconds
        return .seconds(Double.random(in: (bound / 2)...bound, using: &generator))
    }

    /// What to do after an attempt ended with `decision`.
    ///
    /// - Parameters:
    ///   - attempt: attempts made so far, this one included (1-based).
    ///   - tokenRefreshes: how many times this event already retried for a stale provider token.
    ///   - now: UNIX seconds now; `expiration` is the event's `apns-expiration` (0 and `nil` never expire
    ///     on our side: 0 only tells APNs not to store the notification).
    package func nextStep(
        after decision: DeliveryDecision,
        attempt: Int,
        tokenRefreshes: Int = 0,
        now: @autoclosure () -> Double,
        expiration: Int64?,
        using generator: inout some RandomNumberGenerator
    ) -> RetryStep {
        let strategy: RetryStrategy
        switch decision {
        case .delivered: return .finish(.delivered)
        case .unregistered: return .finish(.unregistered)
        case .rejected: return .finish(.rejected)
        case .retry(let s): strategy = s
        }
        if attempt >= maxAttempts { return .finish(.failed) }
        if strategy == .refreshToken, tokenRefreshes >= 1 { return .finish(.rejected) }
        let delay: Duration
        switch strategy {
        case .resendNow, .refreshToken, .replaceConnection: delay = .zero
        case .backoff: delay = backoff(afterAttempt: attempt, using: &generator)
        }
        // The clock is read only here: an answer that finishes the event needs no time.
        if let expiration, expiration > 0, now() + (delay + Self.expirationMargin).seconds >= Double(expiration) {
            return .finish(.expired)
        }
        return .retry(after: delay, strategy)
    }
}

/// The next step for an event after one attempt.
package enum RetryStep: Hashable, Sendable {
    case finish(DeliveryOutcome)
    case retry(after: Duration, RetryStrategy)
}


@inline(__always)
private func pow(_ base: Double, _ exponent: Double) -> Double {
    // Integer exponents only here; avoids importing Foundation for one function.
    var result = 1.0
    var remaining = Int(exponent)
    while remaining > 0 { result *= base; remaining -= 1 }
    return result
}
