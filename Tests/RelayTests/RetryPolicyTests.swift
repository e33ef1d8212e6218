import APNsCore
@testable import Relay
import TestSupport
import Testing

@Suite struct RetryPolicyTests {
    let policy = RetryPolicy(maxAttempts: 4, initialBackoff: .milliseconds(100), maxBackoff: .seconds(1))

    @Test func finalDecisionsFinishAtOnce() {
        var rng = SeededGenerator(seed: 1)
        #expect(policy.nextStep(after: .delivered, attempt: 1, now: 0, expiration: nil, using: &rng) == .finish(.delivered))
        #expect(policy.nextStep(after: .unregistered(invalidatedAt: 5), attempt: 1, now: 0, expiration: nil, using: &rng) == .finish(.unregistered))
        #expect(policy.nextStep(after: .rejected(removesTarget: true), attempt: 1, now: 0, expiration: nil, using: &rng) == .finish(.rejected))
    }

    /// The clock is read only when a retry must be checked against the event's expiration: an answer that
    /// finishes the event (nearly every answer) costs no clock read.
    @Test func theClockIsReadOnlyForARetryOfAnEventThatExpires() {
        var rng = SeededGenerator(seed: 5)
        var reads = 0
        func now() -> Double { reads += 1; return 0 }
        _ = policy.nextStep(after: .delivered, attempt: 1, now: now(), expiration: 100, using: &rng)
        _ = policy.nextStep(after: .rejected(removesTarget: false), attempt: 1, now: now(), expiration: 100, using: &rng)
        _ = policy.nextStep(after: .retry(.backoff), attempt: 1, now: now(), expiration: nil, using: &rng)
        #expect(reads == 0)
        guard case .retry = policy.nextStep(after: .retry(.backoff), attempt: 1, now: now(), expiration: 100, using: &rng) else {
            Issue.record("attempt 1 of 4, far from its expiration, should retry"); return
        }
        #expect(reads == 1, "a retry of an event that expires reads the clock once")
    }

    @Test func backoffGrowsJitteredAndCapped() {
        var rng = SeededGenerator(seed: 2)
        for attempt in 1...10 {
            let bound = policy.backoffBound(afterAttempt: attempt).seconds
            #expect(bound <= 1.0)
            let delay = policy.backoff(afterAttempt: attempt, using: &rng).seconds
            #expect(delay >= bound / 2 && delay <= bound)
        }
        #expect(policy.backoffBound(afterAttempt: 1) == .milliseconds(100))
        #expect(policy.backoffBound(afterAttempt: 3) == .milliseconds(400))
    }

    @Test func attemptsAreBoundedAndEndAsFailed() {
        var rng = SeededGenerator(seed: 3)
        guard case .retry = policy.nextStep(after: .retry(.backoff), attempt: 3, now: 0, expiration: nil, using: &rng) else {
            Issue.record("attempt 3 of 4 should retry"); return
        }
        #expect(policy.nextStep(after: .retry(.backoff), attempt: 4, now: 0, expiration: nil, using: &rng) == .finish(.failed))
    }

    @Test func neverRetriesPastExpiration() {
        var rng = SeededGenerator(seed: 4)
        #expect(policy.nextStep(after: .retry(.backoff), attempt: 1, now: 99.99, expiration: 100, using: &rng) == .finish(.expired))
        // A retry must be due a second before the expiration (RetryPolicy.expirationMargin), or it would reach
        // APNs after it: an immediate resend at 99.1 s is not made, one at 98.9 s is.
        #expect(policy.nextStep(after: .retry(.resendNow), attempt: 1, now: 99.1, expiration: 100, using: &rng) == .finish(.expired))
        #expect(policy.nextStep(after: .retry(.resendNow), attempt: 1, now: 98.9, expiration: 100, using: &rng) == .retry(after: .zero, .resendNow))
        // 0 means "do not store at APNs", not "expired".
        guard case .retry = policy.nextStep(after: .retry(.backoff), attempt: 1, now: 99.99, expiration: 0, using: &rng) else {
            Issue.record("expiration 0 must not expire on our side"); return
        }
    }

    @Test func staleProviderTokenRetriesOnceWithoutDelay() {
        var rng = SeededGenerator(seed: 5)
        #expect(policy.nextStep(after: .retry(.refreshToken), attempt: 1, now: 0, expiration: nil, using: &rng) == .retry(after: .zero, .refreshToken))
        #expect(policy.nextStep(after: .retry(.refreshToken), attempt: 2, tokenRefreshes: 1, now: 0, expiration: nil, using: &rng) == .finish(.rejected))
        #expect(policy.nextStep(after: .retry(.resendNow), attempt: 1, now: 0, expiration: nil, using: &rng) == .retry(after: .zero, .resendNow))
    }
}
