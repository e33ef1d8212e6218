#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A reading of the monotonic clock (`CLOCK_MONOTONIC`), in nanoseconds from an unspecified origin: the
/// deadlines, send times and timers of the APNs client and the relay's delivery path.
///
/// Why not `ContinuousClock.Instant`: the standard library is built with library evolution, and that type is
/// not `@frozen`, so outside the library its size and layout are unknown at compile time. Every value that
/// holds one (a request's deadline, a waiter in the pool's queue, an open stream, a timer, the adaptive
/// limit's probe state) then has a layout known only at run time: each copy, move and destroy of it is a call
/// through its type's value witnesses after a metadata lookup, an enum holding one reads its case through them,
/// a class holding one finds its later stored properties through a field-offset table, and the optimiser
/// cannot see, merge or drop the retains inside those calls. This is one plain `Int64`. Readings compare only
/// with readings of this type (not with `ContinuousClock`'s).
package struct MonotonicInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    package var nanoseconds: Int64

    @inlinable package init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    /// The clock, read now (through the vDSO: no system call).
    @inlinable package static var now: MonotonicInstant {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return MonotonicInstant(nanoseconds: Int64(spec.tv_sec) &* 1_000_000_000 &+ Int64(spec.tv_nsec))
    }

    @inlinable package static func < (a: Self, b: Self) -> Bool { a.nanoseconds < b.nanoseconds }

    /// `instant` moved by `duration`, saturating at the ends of the range (a "never" of `.seconds(Int64.max)`
    /// stays in the far future).
    @inlinable package static func + (instant: Self, duration: Duration) -> Self {
        let (sum, overflow) = instant.nanoseconds.addingReportingOverflow(Self.nanoseconds(of: duration))
        if overflow { return Self(nanoseconds: sum < 0 ? .max : .min) }
        return Self(nanoseconds: sum)
    }

    @inlinable package static func - (instant: Self, duration: Duration) -> Self { instant + (.zero - duration) }

    /// The time from `b` to `a`.
    @inlinable package static func - (a: Self, b: Self) -> Duration { .nanoseconds(a.nanoseconds &- b.nanoseconds) }

    @inlinable package static func += (instant: inout Self, duration: Duration) { instant = instant + duration }

    @inlinable package func advanced(by duration: Duration) -> Self { self + duration }

    @inlinable package func duration(to other: Self) -> Duration { other - self }

    package var description: String { "\(Double(nanoseconds) / 1e9) s (monotonic)" }

    /// `duration` in whole nanoseconds, saturating.
    @inlinable package static func nanoseconds(of duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflowed) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowed ? (whole < 0 ? .min : .max) : sum
    }
}
