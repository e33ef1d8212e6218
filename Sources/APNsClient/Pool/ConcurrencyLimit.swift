/// How many requests may be in flight to one APNs endpoint, learned from how APNs answers.
///
/// A slow or degraded APNs queues what it is sent; requests that wait there past their timeout are resent
/// and may reach the device twice. Bounding what is in flight by what the endpoint currently sustains keeps
/// that queue short: the excess waits here, where waiting is harmless (never sent, never duplicated).
///
/// The rule is additive increase, multiplicative decrease on latency (the idea behind Netflix's
/// concurrency-limits AIMD and gradient limits). Latency is smoothed (an average over the last few answers,
/// as TCP smooths its round-trip time), so jitter is not mistaken for a queue. While the smoothed latency
/// stays within `tolerance` × its best value and the limit is in use, the limit grows by about √limit per
/// round trip (one per answer — doubling per round trip — until the first sign of congestion, as TCP's slow
/// start, so a long link reaches its rate in a few round trips). A smoothed latency above that, an answer
/// slower than `ceiling` (near the request timeout) or a timeout takes `backoffRatio` of the limit, at most
/// once per round trip, so one burst of slow answers counts once. Answer statuses are not load signals
/// (429 TooManyRequests is about one device token; a 503 comes back as fast as a 200).
///
/// The baseline is the best smoothed latency seen. It is measured afresh only when a whole window of answers
/// stayed slow while the limit was already near its minimum: then the path itself got slower (slow even with
/// almost nothing in flight), and that becomes the normal. Under congestion the limit comes down long before
/// that, so queueing is never mistaken for the path.
///
/// A value type: the pool keeps it under its lock and feeds it every outcome.
struct ConcurrencyLimit: Sendable, Hashable {
    struct Configuration: Sendable, Hashable {
        var initial = 100
        var minimum = 4
        var maximum = 20_000
        /// What a decrease keeps of the limit.
        var backoffRatio = 0.9
        /// A smoothed latency above this multiple of its best value is a congestion signal.
        var tolerance = 2.0
        /// Latencies below this never count as congestion (a fast path's jitter is not a queue).
        var latencyFloor: Duration = .milliseconds(20)
        /// Answers slower than this are congestion whatever the baseline (the pool uses a quarter of the
        /// request timeout).
        var ceiling: Duration = .milliseconds(2500)
        /// Samples after which a baseline that no answer came near is checked (see the type's comment).
        var baselineWindow = 2_000
    }

    let configuration: Configuration
    private var value: Double
    /// The smoothed latency (seconds), its best value (the baseline), and its best in the current window.
    private var smoothed: Double?
    private var best = Double.infinity
    private var windowBest = Double.infinity
    private var windowSamples = 0
    private var samples = 0
    /// Answers still to come before another decrease may happen (about one round trip's worth).
    private var decreaseHold = 0
    /// Until the first congestion signal the limit doubles per round trip.
    private var slowStart = true

    init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        value = Double(min(max(configuration.initial, configuration.minimum), configuration.maximum))
    }

    /// Requests that may be in flight now.
    var limit: Int { Int(value) }

    /// The latency answers are measured against.
    var baseline: Duration? {
        best.isFinite ? .nanoseconds(Int64(best * 1e9)) : nil
    }

    /// An answer arrived after `latency`, with `inFlight` requests outstanding when it was sent.
    mutating func answered(after latency: Duration, inFlight: Int) {
        let seconds = Self.seconds(latency)
        samples += 1
        // The first answers are averaged plainly (the first alone would weigh 2/3 of the average four
        // answers later, and one fast outlier would become a baseline too low for any later answer to
        // meet); after that, an exponential average over about the last 8.
        let weight = 1 / Double(min(samples, Self.smoothingSpan))
        let average = smoothed.map { $0 + (seconds - $0) * weight } ?? seconds
        smoothed = average
        observe(average)
        let slow = average > max(Self.seconds(configuration.latencyFloor), best * configuration.tolerance)
        if slow || seconds > Self.seconds(configuration.ceiling) {
            decrease()
        } else if inFlight * 2 >= limit {
            // Only grow a limit that is used: an idle pool says nothing about what APNs sustains.
            // After the first congestion: √limit more per round trip (as the queue allowance of Netflix's
            // gradient limit) rather than TCP's one, which took seconds to grow a limit of hundreds back
            // after a long link's start-up (Benchmarks/README.md, 40 ms RTT).
            value = min(Double(configuration.maximum), value + (slowStart ? 1 : value.squareRoot() / value))
        }
        if decreaseHold > 0 { decreaseHold -= 1 }
    }

    /// A request timed out, or APNs said it is overloaded (429 TooManyRequests, 503 ServiceUnavailable).
    mutating func congested() {
        decrease()
        if decreaseHold > 0 { decreaseHold -= 1 }
    }

    private mutating func decrease() {
        guard decreaseHold == 0 else { return }
        slowStart = false
        value = max(Double(configuration.minimum), value * configuration.backoffRatio)
        // The answers already in flight were sent under the old limit: let them come back first.
        decreaseHold = limit
    }

    private mutating func observe(_ seconds: Double) {
        // The first answers of a fresh pool are its handshake's and warm-up's: the average settles first.
        if samples >= Self.smoothingSpan { best = min(best, seconds) }
        windowBest = min(windowBest, seconds)
        windowSamples += 1
        guard windowSamples >= configuration.baselineWindow else { return }
        if windowBest > best * configuration.tolerance, limit <= 2 * configuration.minimum {
            best = windowBest  // slow with almost nothing in flight: the path changed
        }
        windowBest = .infinity
        windowSamples = 0
    }

    /// Answers the smoothed latency averages over.
    private static let smoothingSpan = 8

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
