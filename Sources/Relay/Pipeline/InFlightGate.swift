/// Bounds the events (and bytes) in flight, with hysteresis: it says `pause` when either bound is reached
/// and `resume` only once both are back below their low-water marks, so partitions do not flap.
///
/// A value type: the relay keeps it behind its lock and acts on the returned transition outside it.
public struct InFlightGate: Sendable, Hashable {
    public struct Limits: Sendable, Hashable {
        public var maxEvents: Int
        public var maxBytes: Int
        /// Fraction of each bound below which a paused gate resumes.
        public var resumeFraction: Double

        public init(maxEvents: Int = 10_000, maxBytes: Int = 64 << 20, resumeFraction: Double = 0.5) {
            self.maxEvents = maxEvents
            self.maxBytes = maxBytes
            self.resumeFraction = resumeFraction
        }
    }

    public enum Transition: Sendable, Hashable {
        case none
        case pause
        case resume
    }

    public let limits: Limits
    public private(set) var events = 0
    public private(set) var bytes = 0
    public private(set) var isPaused = false

    public init(limits: Limits) {
        self.limits = limits
    }

    /// Counts an event of `size` bytes in.
    public mutating func admit(bytes size: Int) -> Transition {
        events += 1
        bytes += size
        if !isPaused, events >= limits.maxEvents || bytes >= limits.maxBytes {
            isPaused = true
            return .pause
        }
        return .none
    }

    /// Counts an event of `size` bytes out.
    public mutating func release(bytes size: Int) -> Transition {
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
