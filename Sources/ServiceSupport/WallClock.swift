import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Wall-clock time since the UNIX epoch: provider-token lifetimes, notification expirations, result
/// timestamps. The one injectable clock of the package: tests move a `ManualWallClock` instead of sleeping.
public struct WallClock: Sendable {
    private let read: @Sendable () -> Int64

    /// A clock that reads `nanosecondsSinceEpoch`.
    public init(nanosecondsSinceEpoch: @escaping @Sendable () -> Int64) {
        self.read = nanosecondsSinceEpoch
    }

    /// The system's real-time clock.
    public static let system = WallClock {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    public func nowNanoseconds() -> Int64 { read() }
    public func nowMilliseconds() -> Int64 { read() / 1_000_000 }
    /// Whole seconds (what a JWT `iat` holds).
    public func nowSeconds() -> Int64 { read() / 1_000_000_000 }
    /// Seconds with their fraction.
    public func now() -> Double { Double(read()) / 1e9 }
}

/// A wall clock that tests set and move by hand.
public final class ManualWallClock: Sendable {
    private let nanoseconds: Mutex<Int64>

    /// Starts at `millisecondsSinceEpoch`, by default the current time.
    public init(millisecondsSinceEpoch: Int64 = WallClock.system.nowMilliseconds()) {
        nanoseconds = Mutex(millisecondsSinceEpoch * 1_000_000)
    }

    /// The clock to inject.
    public var clock: WallClock {
        WallClock { [self] in nanoseconds.withLock { $0 } }
    }

    public func nowMilliseconds() -> Int64 { nanoseconds.withLock { $0 } / 1_000_000 }
    /// Whole seconds.
    public var nowSeconds: Int64 { nanoseconds.withLock { $0 } / 1_000_000_000 }

    /// Moves the clock forward (or back, with a negative duration).
    public func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        nanoseconds.withLock { $0 += seconds * 1_000_000_000 + attoseconds / 1_000_000_000 }
    }

    public func set(millisecondsSinceEpoch: Int64) {
        nanoseconds.withLock { $0 = millisecondsSinceEpoch * 1_000_000 }
    }
}
