import APNsCore
import ServiceSupport

// The state machine's value types, and what it reports without deciding anything.
extension PoolStateMachine {
    struct Waiter {
        let id: Int
        let deadline: MonotonicInstant
        /// The lane of its class: what it counts against once it has a connection.
        let lane: DeliveryLane
        let payload: Payload
    }

    /// Requests by lane, for the gauges.
    struct LaneCounts: Equatable {
        var urgentInFlight = 0
        var bulkInFlight = 0
        var urgentWaiting = 0
        var bulkWaiting = 0
    }

    /// What the pool knows of one connection (the connection itself is in `connections`, under the same id:
    /// without a reference in it, an entry is copied and scanned without a retain or a release).
    struct Entry {
        /// The connection's load as last read: refreshed with each of its answers and events, and for all
        /// connections every `loadRefreshInterval`.
        var load: ConnectionLoad
        var inFlight = 0
        /// Requests ever routed here: each takes one HTTP/2 stream id, of which a connection has a fixed supply.
        var assigned = 0
    }

    /// When the per-lane gauges are next published: when the counts changed and the last publication is an
    /// interval old, or at once when the pool went quiet.
    struct LaneGaugeSchedule {
        private var published = LaneCounts()
        private var publishedAt: MonotonicInstant

        init(now: MonotonicInstant) { publishedAt = now }

        func isDue(now: MonotonicInstant, quiet: Bool, interval: Duration) -> Bool {
            quiet || now - publishedAt >= interval
        }

        /// `counts`, unless they are what was published last (then `nil`).
        mutating func publish(_ counts: LaneCounts, now: MonotonicInstant) -> LaneCounts? {
            guard counts != published else { return nil }
            published = counts
            publishedAt = now
            return counts
        }
    }

    var waiterCount: Int { waiters.count }
    /// No connection open or opening (what shutdown waits for).
    var isDrained: Bool { entries.isEmpty && connecting == 0 }

    /// Requests in flight and waiting, by lane.
    var laneCounts: LaneCounts {
        LaneCounts(
            urgentInFlight: inFlight - inFlightBulk, bulkInFlight: inFlightBulk,
            urgentWaiting: waiters.count(in: .urgent), bulkWaiting: waiters.count(in: .bulk))
    }

    /// Connections by state, for the gauges.
    var connectionStates: (connecting: Int, ready: Int, draining: Int) {
        var ready = 0
        var draining = 0
        for entry in entries.values {
            if entry.load.phase == .ready && !entry.load.retired { ready += 1 } else if entry.load.phase != .closed { draining += 1 }
        }
        return (connecting, ready, draining)
    }

    /// The reconnect delay after `attempt` failed connects: exponential, capped, jittered.
    func backoff(attempt: Int) -> Duration {
        let exponent = min(attempt - 1, 20)
        let ceiling = min(configuration.reconnectBackoffBase * (1 << exponent), configuration.reconnectBackoffMax)
        return ceiling * Double.random(in: 0.5...1.0)  // jitter: replicas must not reconnect in lockstep
    }
}
