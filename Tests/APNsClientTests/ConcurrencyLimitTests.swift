import ServiceSupport
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
            now += answer
            for _ in 0..<inFlight { limit.answered(after: answer, inFlight: inFlight, now: now) }
            history.append(limit.limit)
        }
        return history
    }

    /// The simulated clock: round trips advance it.
    private final class Clock { var now = MonotonicInstant.now }
    private let clock = Clock()
    private var now: MonotonicInstant {
        get { clock.now }
        nonmutating set { clock.now = newValue }
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

    /// The probe a first congestion signal asks for waits while the pool opens connections and for two
    /// round trips after (handshakes on the loop slow the answers, and a pool held at the minimum stops
    /// growing); then it runs as before.
    @Test func theStartsProbeWaitsUntilThePoolHasStoppedOpeningConnections() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        func round(_ latency: Duration, connecting: Bool) {
            let inFlight = limit.limit
            now += latency
            for _ in 0..<inFlight { limit.answered(after: latency, inFlight: inFlight, now: now, connecting: connecting) }
        }
        round(.milliseconds(40), connecting: true)
        round(.milliseconds(100), connecting: true)  // the start-up's slow answers: a congestion signal
        round(.milliseconds(100), connecting: true)
        #expect(!limit.isProbing, "no probe while connections open")
        round(.milliseconds(40), connecting: false)
        #expect(!limit.isProbing, "nor within two round trips of the last connect")
        round(.milliseconds(40), connecting: false)
        round(.milliseconds(40), connecting: false)
        #expect(limit.isProbing, "then the probe runs")
    }

    /// A pool that keeps opening connections (replacing failing ones, say) holds a due probe back for at most
    /// `probeSpacing`.
    @Test func aProbeWaitsForConnectsAtMostASecond() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        let due = now
        limit.congested(now: now)  // the first congestion, before any baseline: a probe is due now
        var waited = Duration.zero
        while !limit.isProbing && waited < .seconds(5) {
            now += .milliseconds(50)
            waited = now - due
            limit.answered(after: .milliseconds(50), inFlight: limit.limit, now: now, connecting: true)
        }
        #expect(limit.isProbing)
        #expect(waited >= ConcurrencyLimit.Configuration().probeSpacing && waited <= .milliseconds(1100), "waited \(waited)")
    }

    /// Answers that kept to the baseline while in flight grew from 100 to 3,200 show that the baseline had no
    /// queue in it (a queue grows with what is in flight): the first congestion signal after that (a server
    /// briefly overloaded) backs off without a probe; the periodic one still comes. One calm round trip is
    /// not enough (`aQueueFreePathGrowsAsFastAsInSlowStartAfterAFalseStart` probes).
    @Test func aBaselineThatHeldWhileInFlightGrewFourfoldNeedsNoProbeAtTheFirstCongestion() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        _ = simulate(&limit, rounds: 6, latency: { _ in .milliseconds(40) })
        let before = limit.limit
        _ = simulate(&limit, rounds: 1, latency: { _ in .milliseconds(100) })
        #expect(!limit.isProbing && limit.limit < before, "backed off from \(before) to \(limit.limit), without a probe")
        now += .seconds(30)
        _ = simulate(&limit, rounds: 1, latency: { _ in .milliseconds(40) })
        #expect(limit.isProbing, "the periodic probe")
    }

    /// A start-up that looked like congestion (a fresh pool's handshakes delayed a few answers) ends slow
    /// start; answers that then come as fast as the baseline show no queue anywhere, and the limit doubles
    /// per round trip again instead of growing by √limit (which took 2.3 s from 300 to 1,600 at 40 ms).
    @Test func aQueueFreePathGrowsAsFastAsInSlowStartAfterAFalseStart() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        _ = simulate(&limit, rounds: 1, latency: { _ in .milliseconds(40) })
        _ = simulate(&limit, rounds: 2, latency: { _ in .milliseconds(100) })  // the start-up's slow answers
        #expect(limit.isProbing, "the first congestion signal probes the baseline")
        var rounds = 0
        while limit.isProbing && rounds < 100 {
            _ = simulate(&limit, rounds: 1, latency: { _ in .milliseconds(40) })
            rounds += 1
        }
        let afterProbe = limit.limit
        let history = simulate(&limit, rounds: 5, latency: queueing(capacity: 100_000, base: .milliseconds(40)))
        #expect(history.last! >= afterProbe * 16, "doubles per round trip on a path without a queue: \(afterProbe) → \(history)")
    }

    /// A degraded APNs that drops some streams: every round trip a request times out while the others come
    /// back as fast as ever. Those answers show no queue, but the timeouts are congestion: the limit must not
    /// double between them (a timeout shows 10 s after its request was sent, by when doubling per round trip
    /// would have taken the limit to its maximum).
    @Test func timeoutsAmongFastAnswersKeepTheLimitFromDoubling() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        _ = simulate(&limit, rounds: 3, latency: { _ in .milliseconds(40) })
        limit.congested(now: now)  // the first timeout ends slow start (and probes)
        var history: [Int] = []
        for _ in 0..<60 {
            history += simulate(&limit, rounds: 1, latency: { _ in .milliseconds(40) })
            limit.congested(now: now)
        }
        #expect(history.suffix(20).max()! <= 400, "held near what the timeouts allow: \(history)")
    }

    /// A baseline a probe raised while APNs was slow (a brownout: the limit fell near its minimum and the
    /// probe found 60 ms) comes down as soon as answers are back at 10 ms, not at the next periodic probe
    /// 30 s later: under a stale baseline, a real queue would look free of one.
    @Test func aBaselineRaisedInABrownoutComesDownWhenThePathRecovers() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        for _ in 0..<300 { limit.answered(after: .milliseconds(10), inFlight: 100, now: now) }
        limit.congested(now: now)
        for _ in 0..<200 { limit.answered(after: .milliseconds(10), inFlight: min(limit.limit, 4), now: now) }
        now += .seconds(2)
        for _ in 0..<2000 {
            now += .milliseconds(1)
            limit.answered(after: .milliseconds(60), inFlight: limit.limit, now: now)
        }
        #expect(limit.baseline.map { abs(($0 - .milliseconds(60)) / .microseconds(1)) < 100 } == true, "the brownout's baseline: \(String(describing: limit.baseline))")
        // Recovered: 10 ms again, well before the next periodic probe.
        for _ in 0..<20 {
            now += .milliseconds(1)
            limit.answered(after: .milliseconds(10), inFlight: limit.limit, now: now)
        }
        #expect(limit.baseline.map { $0 < .milliseconds(20) } == true, "\(String(describing: limit.baseline))")
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
        limit.congested(now: now)
        #expect(limit.limit == 90)
        for _ in 0..<10 { limit.congested(now: now) }
        #expect(limit.limit == 90, "a burst of timeouts from the same round trip counts once")
        for _ in 0..<90 { limit.answered(after: .milliseconds(5), inFlight: 0, now: now) }
        limit.congested(now: now)
        #expect(limit.limit == 81, "the next round trip may decrease again")
        for _ in 0..<2000 { limit.congested(now: now); limit.answered(after: .milliseconds(5), inFlight: 0, now: now) }
        #expect(limit.limit == ConcurrencyLimit.Configuration().minimum, "never below the minimum")
    }

    @Test func answersNearTheTimeoutAreCongestionWhateverTheBaseline() {
        var configuration = ConcurrencyLimit.Configuration(initial: 100)
        configuration.ceiling = .seconds(1)
        var limit = ConcurrencyLimit(configuration: configuration)
        limit.answered(after: .seconds(2), inFlight: 100, now: now)  // the first answer: the baseline says nothing yet
        #expect(limit.limit == 90)
    }

    /// A link with 100 ms ± 50 ms round trips and no queue: jitter is not congestion. Seeded, so a failure
    /// reproduces; 50 links, because the estimate once depended on how fast the first few answers were
    /// (one fast first answer set a baseline that ordinary jitter later exceeded twofold, 1.5 % of links).
    @Test(arguments: 0..<50 as Range<UInt64>) func jitterIsNotCongestion(seed: UInt64) {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        var generator = SeededGenerator(seed: seed)
        for _ in 0..<20_000 {
            limit.answered(after: .milliseconds(Int.random(in: 50...150, using: &generator)), inFlight: limit.limit, now: now)
        }
        #expect(limit.limit == ConcurrencyLimit.Configuration().maximum, "grows on a jittery but unloaded link: \(limit.limit)")
    }

    /// The first answers do not decide the baseline alone: a link whose first answer was unusually fast
    /// (10 ms, then 90–110 ms) still grows.
    @Test func oneFastFirstAnswerIsNotTheBaseline() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        limit.answered(after: .milliseconds(10), inFlight: 100, now: now)
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<20_000 {
            limit.answered(after: .milliseconds(Int.random(in: 90...110, using: &generator)), inFlight: limit.limit, now: now)
        }
        #expect(limit.limit == ConcurrencyLimit.Configuration().maximum, "\(limit.limit), baseline \(String(describing: limit.baseline))")
    }

    @Test func anIdlePoolDoesNotGrowItsLimit() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        for _ in 0..<10_000 { limit.answered(after: .milliseconds(5), inFlight: 3, now: now) }
        #expect(limit.limit == 100)
    }

    @Test func aPathThatGotSlowerForGoodBecomesTheNewBaseline() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        for _ in 0..<300 { limit.answered(after: .milliseconds(10), inFlight: 100, now: now) }
        // A first congestion and its probe: the baseline is 10 ms, and the next periodic probe is 30 s away.
        limit.congested(now: now)
        for _ in 0..<200 { limit.answered(after: .milliseconds(10), inFlight: min(limit.limit, 4), now: now) }
        #expect(!limit.isProbing)
        #expect(limit.baseline.map { abs(($0 - .milliseconds(10)) / .microseconds(1)) < 100 } == true, "\(String(describing: limit.baseline))")
        // Every answer now takes 60 ms whatever the load (a longer route): congestion as far as the limit
        // can tell, down to near its minimum; there it probes (not 30 s later), and answers still slow with
        // almost nothing in flight are the new normal.
        now += .seconds(2)
        for _ in 0..<2000 {
            now += .milliseconds(1)
            limit.answered(after: .milliseconds(60), inFlight: limit.limit, now: now)
        }
        #expect(limit.baseline.map { abs(($0 - .milliseconds(60)) / .microseconds(1)) < 100 } == true, "\(String(describing: limit.baseline))")
        let before = limit.limit
        for _ in 0..<2000 { limit.answered(after: .milliseconds(60), inFlight: limit.limit, now: now) }
        #expect(limit.limit > before, "grows again at the new baseline: \(before) → \(limit.limit)")
    }

    /// A server that answers 1,500 a second after 5 ms: the 100 requests of the first round trip already
    /// queue there, so no answer before the first probe shows the path without a queue. The probe finds
    /// 5 ms, and the limit keeps the queue near the latency floor (20 ms) instead of near twice the latency
    /// of a queued start (about 200 in flight, 140 ms, before probes).
    @Test func aQueueFromTheFirstRequestIsNotTheBaseline() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        let rateLimited: (Int) -> Duration = { .milliseconds(5) + .seconds(Double($0) / 1500) }
        let history = simulate(&limit, rounds: 2000, latency: rateLimited)
        let settled = history.suffix(500)
        #expect(limit.baseline.map { $0 < .milliseconds(10) } == true, "\(String(describing: limit.baseline))")
        #expect(settled.max()! <= 45, "at most about 20 ms of queue (30 in flight): \(settled.min()!)–\(settled.max()!)")
        #expect(settled.filter { $0 > ConcurrencyLimit.Configuration().minimum }.min()! >= 15, "but not starved: \(settled.min()!)")
    }

    /// A timeout during a probe ends it: a path that loses requests has no baseline to show, and a probe
    /// moves only on answers, so one kept running would hold the minimum for as long as requests time out.
    @Test func aTimeoutEndsAProbe() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        limit.congested(now: now)  // the first congestion: a probe is due
        limit.answered(after: .milliseconds(50), inFlight: 90, now: now)
        #expect(limit.isProbing && limit.limit == 4)
        limit.congested(now: now)
        #expect(!limit.isProbing && limit.limit == 90, "the limit from before the probe (a decrease is held for a round trip)")
        // The next probe waits a probe spacing, then starts with an answer.
        now += .milliseconds(500)
        limit.answered(after: .milliseconds(50), inFlight: 90, now: now)
        #expect(!limit.isProbing)
        now += .milliseconds(500)
        limit.answered(after: .milliseconds(50), inFlight: 90, now: now)
        #expect(limit.isProbing)
    }

    /// A probe holds what is in flight to the minimum until the queue drains and a few answers come back,
    /// then gives the limit back; the next is due a probe interval (30 s) later.
    @Test func aProbeHoldsTheMinimumBrieflyAndGivesTheLimitBack() {
        var limit = ConcurrencyLimit(configuration: .init(initial: 100))
        limit.congested(now: now)  // the first congestion: a probe is due
        #expect(limit.limit == 90 && !limit.isProbing)
        limit.answered(after: .milliseconds(50), inFlight: 90, now: now)
        #expect(limit.isProbing && limit.limit == 4, "draining")
        for inFlight in stride(from: 89, through: 5, by: -1) { limit.answered(after: .milliseconds(50), inFlight: inFlight, now: now) }
        #expect(limit.isProbing, "still draining")
        // 4 in flight: this answer and 3 sent before the probe (skipped), then 8 sent during it.
        for _ in 0..<4 { limit.answered(after: .milliseconds(50), inFlight: 4, now: now) }
        for _ in 0..<7 { limit.answered(after: .milliseconds(6), inFlight: 4, now: now) }
        #expect(limit.isProbing)
        limit.answered(after: .milliseconds(6), inFlight: 4, now: now)
        #expect(!limit.isProbing && limit.limit == 90, "the limit from before the probe")
        #expect(limit.baseline.map { abs(($0 - .milliseconds(6)) / .microseconds(1)) < 1 } == true, "\(String(describing: limit.baseline))")
        now += .seconds(29)
        limit.answered(after: .milliseconds(6), inFlight: 90, now: now)
        #expect(!limit.isProbing)
        now += .seconds(1)
        limit.answered(after: .milliseconds(6), inFlight: 90, now: now)
        #expect(limit.isProbing, "every 30 s")
        // This one's answers are slow (a busy host, say): a periodic probe only ever lowers the baseline.
        limit.answered(after: .milliseconds(6), inFlight: 4, now: now)
        for _ in 0..<3 + 8 { limit.answered(after: .milliseconds(40), inFlight: 4, now: now) }
        #expect(!limit.isProbing)
        #expect(limit.baseline.map { abs(($0 - .milliseconds(6)) / .microseconds(1)) < 1 } == true, "\(String(describing: limit.baseline))")
    }
}
