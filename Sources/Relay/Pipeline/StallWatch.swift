/// Whether publishing is stuck, seen from outside: records wait for Kafka's acknowledgement while no progress
/// is made. The publisher only counts its progress (no clock read per record); the watch times a count from
/// its first look at it. So a watch that looks every few seconds (the readiness probe, a metrics scrape) sees a
/// stall at most one look later than it began, and never one that did not happen: a count it has not seen
/// before always starts the time again.
///
/// A value: its owner keeps it under a lock (`ResultPublisher.stall`), and the tests drive it with readings.
struct StallWatch {
    /// The progress count of the last look, and when (monotonic nanoseconds) a look first saw it.
    private var progress: UInt64
    private var since: UInt64

    /// A watch that has seen `progress` since `now` (its owner's start).
    init(progress: UInt64 = 0, now: UInt64) {
        self.progress = progress
        self.since = now
    }

    /// One look: `progress` and `waiting` as the publisher has them, `now` the clock. Returns how long
    /// `waiting` records have gone without progress as far as this watch has seen, or `nil` when none waits.
    ///
    /// A look while nothing waits leaves the time as it was: a record that waits again after a moment at zero
    /// (a retry re-counts its record just after) is not new progress; one sent after none waited counts as
    /// progress (the publisher's count goes up), which starts the time again at the next look.
    mutating func look(progress: UInt64, waiting: Int, now: UInt64) -> (duration: Duration, waiting: Int)? {
        if progress != self.progress {
            self.progress = progress
            since = now
        }
        guard waiting > 0 else { return nil }
        return (.nanoseconds(Int64(clamping: now &- since)), waiting)
    }
}
