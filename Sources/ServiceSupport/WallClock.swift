import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Wall-clock time since the UNIX epoch: provider-token lifetimes, notification expirations, result
/// timestamps. The one injectable clock of the package: tests move a `ManualWallClock` instead of sleeping.
package struct WallClock: Sendable {
    private let read: @Sendable () -> Int64

    /// A clock that reads `nanosecondsSinceEpoch`.
    package init(nanosecondsSinceEpoch: @escaping @Sendable () -> Int64) {
        self.read = nanosecondsSinceEpoch
    }

    /// The system's real-time clock.
    package static let system = WallClock {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    package func nowNanoseconds() -> Int64 { read() }
    package func nowMilliseconds() -> Int64 { read() / 1_000_000 }
    /// Whole seconds (what a JWT `iat` holds).
    package func nowSeconds() -> Int64 { read() / 1_000_000_000 }
    /// Seconds with their fraction.
    package func now() -> Double { Double(read()) / 1e9 }
}

/// A wall clock that tests set and move by hand.
package final class ManualWallClock: Sendable {
    private let nanoseconds: Mutex<Int64>

    /// Starts at `millisecondsSinceEpoch`, by default the current time.
    package init(millisecondsSinceEpoch: Int64 = WallClock.system.nowMilliseconds()) {
        nanoseconds = Mutex(millisecondsSinceEpoch * 1_000_000)
    }

    /// The clock to inject.
    package var clock: WallClock {
        WallClock { [self] in nanoseconds.withLock { $0 } }
    }

    package func nowMilliseconds() -> Int64 { nanoseconds.withLock { $0 } / 1_000_000 }
    /// Whole seconds.
    package var nowSeconds: Int64 { nanoseconds.withLock { $0 } / 1_000_000_000 }

    /// Moves the clock forward (or back, with a negative duration).
    package func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        nanoseconds.withLock { $0 += seconds * 1_000_000_000 + attoseconds / 1_000_000_000 }
    }

    package func set(millisecondsSinceEpoch: Int64) {
        nanoseconds.withLock { $0 = millisecondsSinceEpoch * 1_000_000 }
    }
}
