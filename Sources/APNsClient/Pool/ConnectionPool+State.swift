import Synchronization

/// What the pool keeps under its lock.
extension ConnectionPool {
    struct Entry {
        let connection: APNsConnection
        var inFlight = 0
        /// Requests ever routed here: each takes one HTTP/2 stream id, of which a connection has a fixed supply.
        var assigned = 0
    }
    struct Waiter {
        let id: Int
        let deadline: ContinuousClock.Instant
        /// Runs once: with a connection that counted the request against itself, or why none came.
        let resume: @Sendable (Result<APNsConnection, APNsClientError>) -> Void
    }
    struct State {
        var entries: [Int: Entry] = [:]
        var connecting = 0
        var waiters = WaitQueue<Waiter>()
        /// One task expires waiters past their deadline while any wait (not one timer per waiter).
        var sweeperRunning = false
        var nextID = 0
        var failedConnects = 0
        var lastConnectError: APNsClientError?
        var reconnectScheduled = false
        var shuttingDown = false
        var closedWaiters: [CheckedContinuation<Void, Never>] = []
        var lastMaintenance = ContinuousClock.now
        /// Requests holding a stream now, over every connection.
        var inFlight = 0
        /// The adaptive bound on `inFlight`; `nil` when `adaptiveConcurrency` is off.
        var limit: ConcurrencyLimit?
    }
}
