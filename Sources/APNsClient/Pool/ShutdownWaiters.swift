import ServiceSupport

/// Callers of `ConnectionPool.shutdown(deadline:)` waiting for its last connection to close, each until its
/// own deadline. A value (the pool keeps it behind its lock and resumes what a call returns, after the lock).
///
/// A caller whose deadline has already passed when it arrives does not wait: the timer that ends its wait
/// may have fired before it was registered (`APNsClient.shutdown` hands one deadline to each pool in turn, so
/// a later pool's is often past), and a wait registered after its only wake-up would last until the last
/// connection closed, however long that took.
struct ShutdownWaiters<Waiter> {
    private var waiting: [(deadline: MonotonicInstant, waiter: Waiter)] = []

    var isEmpty: Bool { waiting.isEmpty }

    /// Registers `waiter` unless it need not wait.
    /// - Returns: whether it waits (`false`: the pool is drained or the deadline passed; resume it now).
    mutating func wait(_ waiter: Waiter, until deadline: MonotonicInstant, now: MonotonicInstant, drained: Bool) -> Bool {
        guard !drained, deadline > now else { return false }
        waiting.append((deadline, waiter))
        return true
    }

    /// The pool is drained: every waiter, to resume.
    mutating func drained() -> [Waiter] {
        defer { waiting.removeAll() }
        return waiting.map(\.waiter)
    }

    /// The waiters whose deadline is `now` or earlier, to resume; the others go on waiting.
    mutating func due(now: MonotonicInstant) -> [Waiter] {
        var due: [Waiter] = []
        waiting.removeAll { entry in
            guard entry.deadline <= now else { return false }
            due.append(entry.waiter)
            return true
        }
        return due
    }
}
