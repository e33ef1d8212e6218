import Testing
import TestSupport
@testable import APNsClient

/// The adaptive limit, without I/O: a simulated APNs whose latency is a function of how much is in flight.
@Suite struct ConcurrencyLimitTests {
    /// Runs `rounds` round trips against an endpoint that answers in `latency(inFlight)`, sending as much
    /// as the limit allows (a backlog is always waiting); returns the limit after each round.
    private func simulate(
        _ limit: inout ConcurrencyLimit, rounds: Int, latency: (Int) -> Duration
    ) -> [Int] {
        var history: [Int] = []
        for _ in 0..<rounds {
            let inFlight = limit.limit
            let answer = latency(inFlight)
            for _ in 0..<inFlight { limit.answered(after: answer, inFlight: inFlight) }
            history.append(limit.limit)
        }
        return history
    }

    /// An endpoint that answers `capacity` requests per round trip in `base`; more queue there.
    private func queueing(capacity: Int, base: Duration = .milliseconds(30)) -> (Int) -> Duration {
        { inFlight in inFlight <= capacity ? base : base * (Double(inFlight) / Double(capacity)) }
    }

    @Test func growsWhileAnswersStayFastAndTheLimitIsUsed() {
        var limit = ConcurrencyLimit()
        let history = simulate(&limit, rounds: 200, latency: { _ in .milliseconds(30) })
        #expect(history.last! == ConcurrencyLimit.Configuration().maximum, "doubles per round trip up to the maximum: \(history.prefix(8))")
        #expect(history[5] >= 100 << 5, "slow start: doubling each round trip, \(history.prefix(6))")
        #expect(history == history.sorted(), "never decreases on fast answers")
    }

    @Test func convergesDownWhenLatencyRisesAndRecoversWhenItFalls() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        let fast = simulate(&limit, rounds: 400, latency: queueing(capacity: 5000))
        #expect(fast.last! > 4000, "learns the fast baseline and grows to what the endpoint sustains: \(fast.last!)")
        // APNs slows down: it sustains 200 in flight at its normal latency; beyond that answers queue.
        let slow = simulate(&limit, rounds: 300, latency: queueing(capacity: 200))
        let settled = slow.suffix(50)
        print("concurrency limit: fast \(fast.last!), slow settled \(settled.min()!)–\(settled.max()!)")
        #expect(settled.max()! <= 2 * 200 + 20, "the limit comes down to what the endpoint sustains: \(settled.max()!)")
        #expect(settled.min()! >= 200 / 2, "and does not collapse below it: \(settled.min()!)")

        // It recovers: capacity back to 2000.
        let recovered = simulate(&limit, rounds: 400, latency: queueing(capacity: 2000))
        #expect(recovered.last! > 600, "the limit grows again once answers are fast: \(recovered.last!)")
    }

    @Test func timeoutsAndOverloadAnswersTakeAShareOnceARoundTrip() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        limit.congested()
        #expect(limit.limit == 90)
        for _ in 0..<10 { limit.congested() }
        #expect(limit.limit == 90, "a burst of timeouts from the same round trip counts once")
        for _ in 0..<90 { limit.answered(after: .milliseconds(5), inFlight: 0) }
        limit.congested()
        #expect(limit.limit == 81, "the next round trip may decrease again")
        for _ in 0..<2000 { limit.congested(); limit.answered(after: .milliseconds(5), inFlight: 0) }
        #expect(limit.limit == ConcurrencyLimit.Configuration().minimum, "never below the minimum")
    }

    @Test func answersNearTheTimeoutAreCongestionWhateverTheBaseline() {
        var configuration = ConcurrencyLimit.Configuration(initial: 100)
        configuration.ceiling = .seconds(1)
        var limit = ConcurrencyLimit(configuration: configuration)
        limit.answered(after: .seconds(2), inFlight: 100)  // the first answer: the baseline says nothing yet
        #expect(limit.limit == 90)
    }

    /// A link with 100 ms ± 50 ms round trips and no queue: jitter is not congestion. Seeded, so a failure
    /// reproduces; 50 links, because the estimate once depended on how fast the first few answers were
    /// (one fast first answer set a baseline that ordinary jitter later exceeded twofold, 1.5 % of links).
    @Test(arguments: 0..<50 as Range<UInt64>) func jitterIsNotCongestion(seed: UInt64) {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        var generator = SeededGenerator(seed: seed)
        for _ in 0..<20_000 {
            limit.answered(after: .milliseconds(Int.random(in: 50...150, using: &generator)), inFlight: limit.limit)
        }
        #expect(limit.limit == ConcurrencyLimit.Configuration().maximum, "grows on a jittery but unloaded link: \(limit.limit)")
    }

    /// The first answers do not decide the baseline alone: a link whose first answer was unusually fast
    /// (10 ms, then 90–110 ms) still grows.
    @Test func oneFastFirstAnswerIsNotTheBaseline() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        limit.answered(after: .milliseconds(10), inFlight: 100)
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<20_000 {
            limit.answered(after: .milliseconds(Int.random(in: 90...110, using: &generator)), inFlight: limit.limit)
        }
        #expect(limit.limit == ConcurrencyLimit.Configuration().maximum, "\(limit.limit), baseline \(String(describing: limit.baseline))")
    }

    @Test func anIdlePoolDoesNotGrowItsLimit() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        for _ in 0..<10_000 { limit.answered(after: .milliseconds(5), inFlight: 3) }
        #expect(limit.limit == 100)
    }

    @Test func aPathThatGotSlowerForGoodBecomesTheNewBaseline() {
        var configuration = ConcurrencyLimit.Configuration(initial: 100)
        configuration.baselineWindow = 100
        var limit = ConcurrencyLimit(configuration: configuration)
        for _ in 0..<300 { limit.answered(after: .milliseconds(10), inFlight: 100) }
        #expect(limit.baseline.map { abs(($0 - .milliseconds(10)) / .microseconds(1)) < 100 } == true, "\(String(describing: limit.baseline))")
        // Every answer now takes 60 ms whatever the load (a longer route): congestion as far as the limit
        // can tell, until it is near its minimum and answers are still slow: then 60 ms is the normal.
        for _ in 0..<2000 { limit.answered(after: .milliseconds(60), inFlight: limit.limit) }
        #expect(limit.baseline.map { abs(($0 - .milliseconds(60)) / .microseconds(1)) < 100 } == true, "\(String(describing: limit.baseline))")
        let before = limit.limit
        for _ in 0..<2000 { limit.answered(after: .milliseconds(60), inFlight: limit.limit) }
        #expect(limit.limit > before, "grows again at the new baseline: \(before) → \(limit.limit)")
    }
}

