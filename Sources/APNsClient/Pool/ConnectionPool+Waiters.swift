import ServiceSupport
import Synchronization

/// The timer that expires waiting requests, and callers of `shutdown` waiting for the last connection to
/// close.
extension ConnectionPool {
    /// Ends waits whose deadline passed, every 10 ms while anyone waits (on the pool's loop); stops when
    /// the queue is empty. It also keeps the per-lane gauges current while requests wait.
    func startWaiterSweeper() {
        timerLoop.schedule(after: .milliseconds(10)) { [weak self] in
            guard let self else { return }
            let ((expired, keepSweeping), lanes) = state.withLock { s in
                let now = MonotonicInstant.now
                return (s.machine.sweep(now: now), s.machine.laneCountsDue(now: now))
            }
            if let lanes { metrics.record(lanes) }
            for (waiter, error) in expired { finish(waiter.payload, .failure(error)) }
            if keepSweeping { startWaiterSweeper() }
        }
    }

    /// Stops taking requests, lets in-flight ones finish (each bounded by its own deadline), closes connections.
    /// Returns when every connection closed, or at `deadline`.
    func shutdown(deadline: MonotonicInstant) async {
        let (waiters, connections) = state.withLock { $0.machine.shutdown() }
        for w in waiters { finish(w.payload, .failure(APNsClientError(.shutdown, "client is shutting down"))) }
        for c in connections { c.drain() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waits = state.withLock { s in
                s.closedWaiters.wait(continuation, until: deadline, now: .now, drained: s.machine.isDrained)
            }
            guard waits else { return continuation.resume() }
            // Once the wait is registered, so that the timer finds it however early it fires.
            timerLoop.schedule(after: max(.zero, deadline - .now)) { [weak self] in self?.resumeDueClosedWaiters() }
        }
    }

    /// Resumes every caller of `shutdown` if the last connection closed.
    func resumeClosedWaiters() {
        let waiters = state.withLock { s in s.machine.isDrained ? s.closedWaiters.drained() : [] }
        for w in waiters { w.resume() }
    }

    /// Resumes the callers of `shutdown` whose deadline passed.
    private func resumeDueClosedWaiters() {
        let waiters = state.withLock { $0.closedWaiters.due(now: .now) }
        for w in waiters { w.resume() }
    }
}
