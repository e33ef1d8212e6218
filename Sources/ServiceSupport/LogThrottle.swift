import Synchronization

/// Lets a message through at most once per `interval`. - Returns from `admit`: `nil` to drop it, else how
/// many of the same were dropped since it last went through.
package final class LogThrottle: Sendable {
    private let interval: Duration
    private let state = Mutex<[String: (last: MonotonicInstant, suppressed: Int)]>([:])

    package init(interval: Duration) { self.interval = interval }

    package func admit(_ message: String, now: MonotonicInstant = .now) -> Int? {
        state.withLock { seen in
            if let entry = seen[message], now - entry.last < interval {
                seen[message]!.suppressed += 1
                return nil
            }
            let suppressed = seen[message]?.suppressed ?? 0
            seen[message] = (now, 0)
            return suppressed
        }
    }
}
