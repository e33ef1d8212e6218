import APNsCore

/// What goes into ``PoolStateMachine`` and what comes out of it.
extension PoolStateMachine {
    enum Pick {
        case connection(Connection)
        case wait
        case fail(APNsClientError)
    }

    /// What an answer (or its absence) says, as far as the pool is concerned.
    enum Outcome: Equatable {
        /// APNs answered; `replaceConnection` when the answer spoils the connection or its token
        /// (``DeliveryDecision/replacesConnection``).
        case answered(replaceConnection: Bool)
        /// No answer before the request's deadline: APNs may be congested.
        case timedOut
        /// Another transport failure (connection lost, not processed, refused).
        case failed
        /// The caller gave up: neither a latency sample nor a timeout.
        case cancelled
    }

    /// What the pool does next, outside its lock.
    struct Actions {
        /// Waiting requests that now have a connection (counted against it).
        var handOff: [(waiter: Waiter, connection: Connection)] = []
        /// Waiting requests that end without one.
        var fail: [(waiter: Waiter, error: APNsClientError)] = []
        /// Connections to start opening (already counted as connecting).
        var open = 0
        /// Connections to drain: no more requests, their streams finish, then they close.
        var retire: [(connection: Connection, reason: RetireReason)] = []
        /// Schedule ``reconnectTimerFired()`` after this.
        var reconnectAfter: Duration?
        /// Start the task that calls ``sweep(now:)`` while requests wait.
        var startSweeper = false
        /// The adaptive limit changed to this.
        var newLimit: Int?

        /// Adds `later`'s actions to these (several events handled in one critical section).
        mutating func merge(_ later: Actions) {
            handOff += later.handOff
            fail += later.fail
            open += later.open  // each count was already added to `connecting`
            retire += later.retire
            if let delay = later.reconnectAfter { reconnectAfter = delay }
            startSweeper = startSweeper || later.startSweeper
            if let limit = later.newLimit { newLimit = limit }
        }
    }

    enum RetireReason: Equatable {
        /// The answer spoiled the connection or its token (e.g. ExpiredProviderToken, IdleTimeout).
        case spoiledByAnswer
        /// `maxTimeoutsPerConnection` requests timed out on it.
        case timeouts
        /// Its stream ids are used up.
        case streamIDsExhausted
        /// Its latency is far above the pool's median.
        case latencyOutlier
    }
}
