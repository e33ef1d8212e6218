import Synchronization

/// Callers waiting for a connection or a free stream, and callers of `shutdown` waiting for the last
/// connection to close.
extension ConnectionPool {
    /// Ends waits whose deadline passed, every 10 ms while anyone waits; exits when the queue is empty.
    func startWaiterSweeper() {
        Task { [weak self] in
            while let self {
                try? await Task.sleep(for: .milliseconds(10))
                let now = ContinuousClock.now
                let (expired, lastError, keepGoing) = self.state.withLock { s -> ([Waiter], APNsClientError?, Bool) in
                    let expired = s.waiters.removeAll { $0.deadline <= now }
                    let connected = s.entries.values.contains { $0.connection.load.phase == .ready }
                    if s.waiters.isEmpty { s.sweeperRunning = false }
                    return (expired, connected ? nil : s.lastConnectError, !s.waiters.isEmpty)
                }
                for waiter in expired {
                    if let lastError {
                        waiter.resume(.failure(APNsClientError(transport: .connectFailed, "no connection before the deadline: \(lastError.message)")))
                    } else {
                        waiter.resume(.failure(APNsClientError(transport: .notSent, "no free stream before the deadline")))
                    }
                }
                if !keepGoing { return }
            }
        }
    }

    /// Hands freed capacity to waiters (outside the lock).
    func dispatchWaiters() {
        var handOff: [(Waiter, APNsConnection)] = []
        state.withLock { s in
            while !s.waiters.isEmpty, let c = Self.choose(&s, streamBudget: streamBudget) {
                guard let w = s.waiters.popFirst() else { break }
                handOff.append((w, c))
            }
        }
        for (w, c) in handOff { w.resume(.success(c)) }
    }

    /// Stops taking requests, lets in-flight ones finish (each bounded by its own deadline), closes connections.
    /// Returns when every connection closed, or at `deadline`.
    func shutdown(deadline: ContinuousClock.Instant) async {
        let (waiters, connections) = state.withLock { s -> ([Waiter], [APNsConnection]) in
            s.shuttingDown = true
            let w = s.waiters.removeAll()
            return (w, s.entries.values.map(\.connection))
        }
        for w in waiters { w.resume(.failure(APNsClientError(.shutdown, "client is shutting down"))) }
        for c in connections { c.drain() }
        let timer = Task { [weak self] in
            try? await Task.sleep(until: deadline, clock: .continuous)
            self?.resumeClosedWaiters(force: true)
        }
        defer { timer.cancel() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { s -> Bool in
                if s.entries.isEmpty && s.connecting == 0 { return true }
                s.closedWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    func resumeClosedWaiters(force: Bool) {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            guard force || (s.entries.isEmpty && s.connecting == 0) else { return [] }
            defer { s.closedWaiters.removeAll() }
            return s.closedWaiters
        }
        for w in waiters { w.resume() }
    }
}
