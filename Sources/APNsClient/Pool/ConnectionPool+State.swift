import Synchronization

/// What the pool keeps under its lock.
extension ConnectionPool {
    struct Entry {
        let connection: APNsConnection
        /// The connection's load as last read (reading it takes the connection's lock, which its I/O thread
        /// holds often): refreshed on each of its answers and every `loadRefreshInterval` for all.
        var load: ConnectionLoad
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
        var failedConnects = 0
        var lastConnectError: APNsClientError?
        var reconnectScheduled = false
        var shuttingDown = false
        var closedWaiters: [CheckedContinuation<Void, Never>] = []
        var lastMaintenance = ContinuousClock.now
        var loadsRefreshedAt = ContinuousClock.now
        /// When `release` last asked whether to open connections for waiting requests.
        var lastOpenCheck = ContinuousClock.now
        /// Requests holding a stream now, over every connection.
        var inFlight = 0
        /// The adaptive bound on `inFlight`; `nil` when `adaptiveConcurrency` is off.
        var limit: ConcurrencyLimit?
    }

    /// How stale the pool's view of its connections' loads may get.
    static let loadRefreshInterval: Duration = .milliseconds(5)

    /// Re-reads every connection's load when the last full read is older than `loadRefreshInterval`.
    static func refreshLoadsIfStale(_ s: inout State, now: ContinuousClock.Instant = .now) {
        guard now - s.loadsRefreshedAt >= loadRefreshInterval else { return }
        s.loadsRefreshedAt = now
        for id in s.entries.keys { s.entries[id]!.load = s.entries[id]!.connection.load }
    }
}
