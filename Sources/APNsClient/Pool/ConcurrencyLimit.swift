import ServiceSupport

/// How many requests may be in flight to one APNs endpoint, learned from how APNs answers.
///
/// A slow or degraded APNs queues what it is sent; requests that wait there past their timeout are resent
/// and may reach the device twice, and an urgent push sent behind the queue waits as long as it. Bounding
/// what is in flight by what the endpoint currently sustains keeps that queue short: the excess waits here,
/// where waiting is harmless (never sent, never duplicated) and urgent requests go first.
///
/// The pool measures an answer's latency from when its request's last byte went out (`StreamRequest.sentAt`):
/// a wait for a stream or for send window before that is the connection's own queue, not APNs'.
///
/// The rule is additive increase, multiplicative decrease on latency (the idea behind Netflix's
/// concurrency-limits AIMD and gradient limits). Latency is smoothed (an average over the last few answers,
/// as TCP smooths its round-trip time), so jitter is not mistaken for a queue. While the smoothed latency
/// stays within `tolerance` × the baseline and the limit is in use, the limit grows by about √limit per
/// round trip; by one per answer — doubling per round trip, as TCP's slow start — until the first sign of
/// congestion, and again whenever answers come as fast as the baseline (within `queueFree` × it: no queue
/// anywhere, so the limit, not the path, is what holds the rate back) and have for two round trips without
/// a congestion signal. A long link so reaches its rate in a
/// few round trips, also after a first congestion signal that the start-up alone caused (a fresh pool's
/// handshakes): at 40 ms, √ growth took 2.3 s from 300 to 1,600 while every answer came in 40–45 ms
/// (Benchmarks/README.md, session 30). A smoothed latency above `tolerance` × the baseline, an answer
/// slower than `ceiling` (near the request timeout) or a timeout takes `backoffRatio` of the limit, at most
/// once per round trip, so one burst of slow answers counts once. Answer statuses are not load signals
/// (429 TooManyRequests is about one device token; a 503 comes back as fast as a 200).
///
/// The baseline is the latency of the path without a queue, and only a short queue can show it: latency
/// measured while the limit keeps a queue at APNs is the path plus that queue, and a baseline taken from it
/// lets the queue stay (a server that answers 1,500 a second, sent 100 at once from the start, never showed
/// the relay an answer without one). So, as BBR measures a link's round trip, the limit probes: it holds
/// what is in flight to `minimum` until the queue has drained and a few answers (8) sent meanwhile have come
/// back, and the limit returns to its value before the probe. It probes at the first congestion signal (a
/// queue from the start shows there; not if answers kept to the baseline while four times as much was in
/// flight as when it was seen, since a queue grows with what is in flight) and every `probeInterval` (a path
/// that got faster), but not while the pool opens connections, nor for two round trips after the last answer
/// that came while it did: the handshakes share the loop with the answers and make a fresh pool's first
/// answers look queued, and a pool at its minimum stops growing. That wait lasts at most `probeSpacing` past
/// the probe's due time, and a probe asked for by a limit near its minimum never waits (it is the way out of a
/// baseline that is too low). Their average
/// becomes the baseline if it is lower, so one probe slowed by a busy host does not raise it. And it probes
/// when a decrease takes the limit near its minimum (at most once a second): a path that got slower for
/// good looks like congestion to a baseline that is too low, and that probe's average is the baseline,
/// higher or lower. A probe costs the drain of the queue and about two round trips at a low rate.
///
/// A value type: the pool keeps it under its lock and feeds it every outcome.
package struct ConcurrencyLimit: Sendable, Hashable {
    package struct Configuration: Sendable, Hashable {
        var initial = 100
        var minimum = 4
        var maximum = 20_000
        /// What a decrease keeps of the limit.
        var backoffRatio = 0.9
        /// A smoothed latency above this multiple of the baseline is a congestion signal.
        var tolerance = 2.0
        /// A smoothed latency within this multiple of the baseline shows no queue: the limit doubles per
        /// round trip as in slow start (between this and `tolerance`, √limit per round trip).
        var queueFree = 1.25
        /// Latencies below this never count as congestion (a fast path's jitter is not a queue).
        var latencyFloor: Duration = .milliseconds(20)
        /// Answers slower than this are congestion whatever the baseline
        /// (`APNsClientConfiguration.Pool.congestionLatency`).
        var ceiling: Duration = .milliseconds(2500)
        /// How often the baseline is measured again when nothing else asks for it (see the type's comment).
        var probeInterval: Duration = .seconds(30)
        /// The least time between probes that a limit near its minimum asks for.
        var probeSpacing: Duration = .seconds(1)
    }

    /// Where a probe of the baseline is.
    private enum Probe: Hashable {
        /// Not probing; the next probe is due at `due` (none before the first congestion signal).
        case idle(due: MonotonicInstant?)
        /// Holding what is in flight to the minimum until the requests sent before the probe are answered.
        case draining
        /// Taking the answers of requests sent while at most the minimum were in flight.
        case measuring(skip: Int, taken: Int, total: Double)
    }

    let configuration: Configuration
    private var value: Double
    /// The smoothed latency (seconds) and the baseline it is compared with.
    private var smoothed: Double?
    private var best = Double.infinity
    private var samples = 0
    /// Answers still to come before another decrease may happen (about one round trip's worth).
    private var decreaseHold = 0
    /// Until the first congestion signal the limit doubles per round trip.
    private var slowStart = true
    private var probe = Probe.idle(due: nil)
    private var lastProbe: MonotonicInstant?
    /// Whether the probe due may raise the baseline (it was asked for by a limit near its minimum).
    private var probeMayRaise = false
    /// When the last congestion signal came (a slow smoothed latency or a timeout).
    private var lastCongestion: MonotonicInstant?
    /// What was in flight when the baseline before the first probe was seen, and the most in flight since
    /// with answers within `queueFree` × it (until the first congestion).
    private var bestInFlight = 0
    private var calmInFlight = 0
    /// When an answer last came while the pool was opening a connection.
    private var lastConnecting: MonotonicInstant?

    init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        value = Double(min(max(configuration.initial, configuration.minimum), configuration.maximum))
    }

    /// Requests that may be in flight now. (Inlined: called on a stored limit from a mutating method, an
    /// outlined getter copied the whole limit, ~250 bytes, to a temporary first.)
    @inline(__always)
    var limit: Int {
        if case .idle = probe { return Int(value) }
        return min(Int(value), configuration.minimum)
    }

    /// The latency answers are measured against.
    @inline(__always)
    var baseline: Duration? {
        best.isFinite ? .nanoseconds(Int64(best * 1e9)) : nil
    }

    /// Whether the limit is holding what is in flight low to measure the baseline.
    var isProbing: Bool {
        if case .idle = probe { return false }
        return true
    }

    /// An answer arrived at `now` after `latency`, with `inFlight` requests outstanding (this one included),
    /// while the pool was (`connecting`) or was not opening a connection.
    mutating func answered(after latency: Duration, inFlight: Int, now: MonotonicInstant, connecting: Bool = false) {
        let seconds = Self.seconds(latency)
        samples += 1
        // The first answers are averaged plainly (the first alone would weigh 2/3 of the average four
        // answers later); after that, an exponential average over about the last 8.
        let weight = 1 / Double(min(samples, Self.smoothingSpan))
        let average = smoothed.map { $0 + (seconds - $0) * weight } ?? seconds
        smoothed = average
        if decreaseHold > 0 { decreaseHold -= 1 }
        if connecting { lastConnecting = now }
        let settled = lastConnecting.map { Self.seconds(now - $0) >= 2 * average } ?? true
        if advanceProbe(seconds, inFlight: inFlight, now: now, mayStart: settled || probeMayRaise) { return }
        if samples >= Self.smoothingSpan, case .idle(let due) = probe {
            // Before the first probe the baseline is the best average seen after the first few answers (a fresh
            // pool's handshake and warm-up): at worst too high, which the first probe corrects. After it, an
            // average under half the baseline shows a baseline gone stale (one a probe raised during a
            // brownout, say) before the next periodic probe would: jitter never halves an 8-answer average.
            if due == nil || average * configuration.tolerance < best {
                // A lower baseline: what counted as calm against the old one starts again from here.
                if average < best { bestInFlight = inFlight; calmInFlight = inFlight }
                best = min(best, average)
            }
        }
        // Before the first congestion: how far in flight grew while answers stayed as fast as the baseline.
        if slowStart, best.isFinite, average <= best * configuration.queueFree { calmInFlight = max(calmInFlight, inFlight) }
        let slow = average > max(Self.seconds(configuration.latencyFloor), best * configuration.tolerance)
        if slow || seconds > Self.seconds(configuration.ceiling) {
            lastCongestion = now
            decrease(now: now)
        } else if inFlight * 2 >= limit {
            // Only grow a limit that is used: an idle pool says nothing about what APNs sustains.
            // After the first congestion, while answers show some queue: √limit more per round trip (as the
            // queue allowance of Netflix's gradient limit) rather than TCP's one, which took seconds to grow
            // a limit of hundreds back after a long link's start-up (Benchmarks/README.md, 40 ms RTT).
            // Doubling needs two round trips without a congestion signal: requests that time out while the
            // rest come back fast (a degraded APNs dropping some streams) keep the limit in check.
            let calm = lastCongestion.map { Self.seconds(now - $0) >= 2 * average } ?? true
            let doubling = slowStart || (calm && best.isFinite && average <= best * configuration.queueFree)
            value = min(Double(configuration.maximum), value + (doubling ? 1 : value.squareRoot() / value))
        }
    }

    /// A request sent went unanswered within its timeout.
    mutating func congested(now: MonotonicInstant) {
        if decreaseHold > 0 { decreaseHold -= 1 }
        lastCongestion = now
        // A path that loses requests shows no baseline, and a probe only moves on answers: one running now
        // would hold the limit at its minimum for as long as requests keep timing out (each after a request
        // timeout), however well the rest of the path answers. It ends here; the limit resumes its value
        // (less the decrease below), and a later answer may start the next probe, a probe spacing on at the
        // earliest.
        if isProbing { probe = .idle(due: now + configuration.probeSpacing) }
        decrease(now: now)
    }

    private mutating func decrease(now: MonotonicInstant) {
        guard decreaseHold == 0 else { return }
        if slowStart {
            slowStart = false
            // The first congestion: the queue that showed it is the moment to learn the path without one,
            // unless answers kept to the baseline while four times as much was in flight as when it was
            // measured: a queue at the server grows with what is in flight (Little's law), so that baseline had
            // none (a long link whose start-up or a brief overload looked like congestion: a probe then cost a
            // 40 ms link ~0.4 s at the minimum, session 31). The periodic probe still comes.
            let measuredWithoutQueue = calmInFlight >= 4 * max(1, bestInFlight)
            if case .idle = probe { probe = .idle(due: measuredWithoutQueue ? now + configuration.probeInterval : now) }
        }
        value = max(Double(configuration.minimum), value * configuration.backoffRatio)
        // The answers already in flight were sent under the old limit: let them come back first.
        decreaseHold = Int(value)
        // Near the minimum: the path may have got slower, and only a probe can tell.
        if value <= Double(2 * configuration.minimum), case .idle(let due) = probe, due.map({ $0 > now }) ?? true,
            lastProbe.map({ now - $0 >= configuration.probeSpacing }) ?? true
        {
            probe = .idle(due: now)
            probeMayRaise = true
        }
    }

    /// Moves a due or running probe on by one answer; a due one starts only if it `mayStart` or has waited
    /// `probeSpacing` past its due time.
    /// - Returns: whether the answer belonged to the probe (then it says nothing about congestion: the limit
    ///   is held low on purpose).
    private mutating func advanceProbe(_ seconds: Double, inFlight: Int, now: MonotonicInstant, mayStart: Bool) -> Bool {
        let minimum = configuration.minimum
        switch probe {
        case .idle(let due):
            guard let due, now >= due, mayStart || now - due >= configuration.probeSpacing else { return false }
            probe = .draining
            lastProbe = now
            fallthrough
        case .draining:
            // This answer's request and the others in flight were sent before the probe held them low.
            guard inFlight <= minimum else { return true }
            probe = .measuring(skip: max(0, inFlight - 1), taken: 0, total: 0)
        case .measuring(let skip, let taken, let total):
            if skip > 0 {
                probe = .measuring(skip: skip - 1, taken: taken, total: total)
            } else if taken + 1 < Self.smoothingSpan {
                probe = .measuring(skip: 0, taken: taken + 1, total: total + seconds)
            } else {
                let measured = (total + seconds) / Double(Self.smoothingSpan)
                best = probeMayRaise ? measured : min(best, measured)
                probeMayRaise = false
                smoothed = measured
                probe = .idle(due: now + configuration.probeInterval)
            }
        }
        return true
    }

    /// Answers the smoothed latency averages over.
    private static let smoothingSpan = 8

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
