import Foundation
import Synchronization

/// Where the mock reads wall-clock time: token lifetimes, token-update spacing and 410 timestamps.
///
/// Inject a `MockClock` in tests to move time without sleeping.
public protocol APNsMockClock: Sendable {
    /// Milliseconds since the UNIX epoch.
    func nowMilliseconds() -> Int64
}

/// The real wall clock.
public struct SystemMockClock: APNsMockClock {
    public init() {}
    public func nowMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}

/// A clock that tests move by hand.
public final class MockClock: APNsMockClock {
    private let milliseconds: Mutex<Int64>

    /// Starts at `millisecondsSinceEpoch`, by default the current wall-clock time.
    public init(millisecondsSinceEpoch: Int64 = SystemMockClock().nowMilliseconds()) {
        self.milliseconds = Mutex(millisecondsSinceEpoch)
    }

    public func nowMilliseconds() -> Int64 { milliseconds.withLock { $0 } }

    /// Current time in whole UNIX seconds (what a JWT `iat` holds).
    public var nowSeconds: Int64 { nowMilliseconds() / 1000 }

    /// Moves the clock forward (or back, with a negative duration).
    public func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let delta = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        milliseconds.withLock { $0 += delta }
    }

    /// Sets the clock to an absolute time.
    public func set(millisecondsSinceEpoch: Int64) {
        milliseconds.withLock { $0 = millisecondsSinceEpoch }
    }
}
