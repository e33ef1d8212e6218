/// Bounds the events (and bytes) in flight, with hysteresis: it says `pause` when either bound is reached
/// and `resume` only once both are back below their low-water marks, so partitions do not flap.
///
/// A value type: the relay keeps it behind its lock and acts on the returned transition outside it.
package struct InFlightGate: Sendable, Hashable {
    package struct Limits: Sendable, Hashable {
        package var maxEvents: Int
        package var maxBytes: Int
        /// Fraction of each bound below which a paused gate resumes.
        package var resumeFraction: Double

        package init(maxEvents: Int = 5_000, maxBytes: Int = 64 << 20, resumeFraction: Double = 0.5) {
            self.maxEvents = maxEvents
            self.maxBytes = maxBytes
            self.resumeFraction = resumeFraction
        }
    }

    package enum Transition: Sendable, Hashable {
        case none
        case pause
        case resume
    }

    package let limits: Limits
    package private(set) var events = 0
    package private(set) var bytes = 0
    package private(set) var isPaused = false

    package init(limits: Limits) {
        self.limits = limits
    }

    /// Counts an event of `size` bytes in.
    package mutating func admit(bytes size: Int) -> Transition {
        events += 1
        bytes += size
        if !isPaused, events >= limits.maxEvents || bytes >= limits.maxBytes {
            isPaused = true
            return .pause
        }
        return .none
    }

    /// Counts an event of `size` bytes out.
    package mutating func release(bytes size: Int) -> Transition {
        events -= 1
        bytes -= size
        if isPaused,
            Double(events) <= Double(limits.maxEvents) * limits.resumeFraction,
            Double(bytes) <= Double(limits.maxBytes) * limits.resumeFraction
        {
            isPaused = false
            return .resume
        }
        return .none
    }
}
