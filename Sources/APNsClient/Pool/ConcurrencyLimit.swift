/// How many requests may be in flight to one APNs endpoint, learned from how APNs answers.
///
/// A slow or degraded APNs queues what it is sent; requests that wait there past their timeout are resent
/// and may reach the device twice. Bounding what is in flight by what the endpoint currently sustains keeps
/// that queue short: the excess waits here, where waiting is harmless (never sent, never duplicated).
///
/// The rule is additive increase, multiplicative decrease on latency (the idea behind Netflix's
/// concurrency-limits AIMD and gradient limits): an answer within `tolerance` × the best recent latency
/// while the limit is in use adds about one request per round trip; a slower answer, a timeout or an
/// overload answer (429, 503) takes `backoffRatio` of the limit, at most once per round trip, so one burst
/// of slow answers from the same window counts once. Any answer slower than `ceiling` is congestion whatever
/// the baseline, so requests never wait near their timeout.
///
/// The baseline is the best latency seen. It is measured afresh only when a whole window of answers stayed
/// slow while the limit was already near its minimum: then the path itself got slower (slow even with almost
/// nothing in flight), and that becomes the normal. Under congestion the limit comes down long before that,
/// so queueing is never mistaken for the path.
///
/// A value type: the pool keeps it under its lock and feeds it every outcome.
struct ConcurrencyLimit: Sendable, Hashable {
    struct Configuration: Sendable, Hashable {
        var initial = 100
        var minimum = 4
        var maximum = 20_000
        /// What a decrease keeps of the limit.
        var backoffRatio = 0.9
        /// An answer slower than this multiple of the best recent latency is a congestion signal.
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
    /// The best latency (seconds) ever seen (the baseline), and of the current window.
    private var best = Double.infinity
    private var windowBest = Double.infinity
    private var windowSamples = 0
    /// Answers still to come before another decrease may happen (about one round trip's worth).
    private var decreaseHold = 0

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
        observe(seconds)
        let slow = seconds > max(Self.seconds(configuration.latencyFloor), best * configuration.tolerance)
        if slow || seconds > Self.seconds(configuration.ceiling) {
            decrease()
        } else if inFlight * 2 >= limit {
            // Only grow a limit that is used: an idle pool says nothing about what APNs sustains.
            value = min(Double(configuration.maximum), value + 1 / value)
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
        value = max(Double(configuration.minimum), value * configuration.backoffRatio)
        // The answers already in flight were sent under the old limit: let them come back first.
        decreaseHold = limit
    }

    private mutating func observe(_ seconds: Double) {
        best = min(best, seconds)
        windowBest = min(windowBest, seconds)
        windowSamples += 1
        guard windowSamples >= configuration.baselineWindow else { return }
        if windowBest > best * configuration.tolerance, limit <= 2 * configuration.minimum {
            best = windowBest  // slow with almost nothing in flight: the path changed
        }
        windowBest = .infinity
        windowSamples = 0
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
