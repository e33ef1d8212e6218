import APNsCore
import ServiceSupport

/// The connection pool's decisions, as a value type: which connection a request goes to, when to open,
/// retire and back off, which waiting requests expire or fail, what an outcome teaches the adaptive limit.
///
/// ``ConnectionPool`` keeps it under its lock, feeds it every event (a request, an answer, a connect or its
/// failure, a connection's state change, the clock) and carries out the returned ``Actions`` outside the
/// lock. It does no I/O: `Connection` and `Payload` are opaque here (the pool uses `APNsConnection` and a
/// resume closure; tests use plain values), and loads come in through ``refreshLoads(now:_:)`` and events.
struct PoolStateMachine<Connection, Payload> {
    /// How stale the pool's view of its connections' loads may get.
    static var loadRefreshInterval: Duration { .milliseconds(5) }
    /// A connection whose connection-level send window is below this is out of flow-control credit: on a
    /// long link it has as much in flight as its window allows per round trip.
    static var windowStarvedBytes: Int { 16_384 }

    let configuration: APNsClientConfiguration.Pool
    /// Requests one connection can carry before its stream ids run out (`APNsClientConfiguration.Connection`).
    let streamBudget: Int
    private(set) var entries: [Int: Entry] = [:]
    /// The connections of `entries`, by the same ids.
    private(set) var connections: [Int: Connection] = [:]
    private(set) var connecting = 0
    private(set) var waiters = WaitQueue<Waiter>()
    /// No waiter's deadline is before this (it may be earlier than the earliest: then a sweep scans and
    /// recomputes it). Thousands may wait behind the adaptive limit: a sweep every 10 ms must not scan
    /// them all when none can have expired.
    private var earliestDeadline: MonotonicInstant?
    private var sweeperRunning = false
    private var failedConnects = 0
    private(set) var lastConnectError: APNsClientError?
    private var reconnectScheduled = false
    private(set) var isShuttingDown = false
    private var lastMaintenance: MonotonicInstant
    private var loadsRefreshedAt: MonotonicInstant
    /// When an answer last asked whether to open connections for waiting requests.
    private var lastOpenCheck: MonotonicInstant
    /// Requests holding a stream now, over every connection.
    private(set) var inFlight = 0
    /// Those of `inFlight` in the bulk lane (the rest are urgent).
    private(set) var inFlightBulk = 0
    /// What bulk may hold of the capacity: 1 − `urgentShare`.
    let bulkShare: Double
    /// When the per-lane gauges are next due.
    private var laneGauges: LaneGaugeSchedule
    /// When the last request came (idle pools let their connections go).
    private var lastRequest: MonotonicInstant
    /// The adaptive bound on `inFlight`, learning only when adaptive concurrency is on. (Not an optional: a
    /// mutation through `limit?.` copied the whole limit, ~250 bytes, out and back per answer.)
    private(set) var adaptiveLimit: ConcurrencyLimit {
        didSet { currentLimit = configuration.adaptiveConcurrency ? adaptiveLimit.limit : nil }
    }
    /// `limit?.limit` (+Capacity), kept beside the limit (`adaptiveLimit`'s `didSet` refreshes it): read
    /// through the optional, the bound copied the whole limit, up to three times per request.
    private(set) var currentLimit: Int?

    init(configuration: APNsClientConfiguration.Pool, streamBudget: Int, now: MonotonicInstant = .now) {
        self.configuration = configuration
        self.streamBudget = streamBudget
        adaptiveLimit = ConcurrencyLimit(configuration: configuration.adaptiveLimit)
        currentLimit = configuration.adaptiveConcurrency ? adaptiveLimit.limit : nil
        bulkShare = 1 - min(max(0, configuration.urgentShare), 0.9)
        lastMaintenance = now
        laneGauges = LaneGaugeSchedule(now: now)
        loadsRefreshedAt = now
        lastOpenCheck = now
        lastRequest = now
    }

    /// Whether nobody sent through this pool for `idleTimeout`.
    func isIdle(now: MonotonicInstant) -> Bool {
        guard let idle = configuration.idleTimeout else { return false }
        return waiters.isEmpty && inFlight == 0 && now - lastRequest >= idle
    }

    /// The connections an idle pool lets go (retired: they finish nothing, they close), or none.
    mutating func closeIfIdle(now: MonotonicInstant) -> [Connection] {
        guard isIdle(now: now) else { return [] }
        var closing: [Connection] = []
        for (id, entry) in entries where !entry.load.retired && entry.load.phase != .closed {
            entries[id]!.load.retired = true
            closing.append(connections[id]!)
        }
        return closing
    }

    // MARK: - Requests

    /// A request wants a connection: the least-loaded usable one with a free stream (the request counted
    /// against it), or it waits (until a connection frees up, opens, or its deadline passes).
    /// Waiters are served by `class` (`WaitQueue`: lane, priority, then apps in turn); a bulk request also
    /// waits while bulk holds its cap (see `bulkCap(streams:)`).
    mutating func request(
        id: Int, deadline: MonotonicInstant, class waitClass: WaitClass = .default, payload: Payload, now: MonotonicInstant
    ) -> (Pick, Actions) {
        request(id: id, deadline: deadline, class: waitClass, now: now) { payload }
    }

    /// As `request(id:deadline:class:payload:now:)`, making the waiter's payload only if the request has to wait.
    mutating func request(
        id: Int, deadline: MonotonicInstant, class waitClass: WaitClass = .default, now: MonotonicInstant,
        waiter payload: () -> Payload
    ) -> (Pick, Actions) {
        var actions = Actions()
        guard !isShuttingDown else { return (.fail(APNsClientError(.shutdown, "client is shutting down")), actions) }
        lastRequest = now
        let choice = choose(waitClass.lane)
        actions.open = connectionsToOpen(bulkAboutToWait: choice == nil && waitClass.lane == .bulk)
        if let choice { return (.connection(choice), actions) }
        waiters.append(Waiter(id: id, deadline: deadline, lane: waitClass.lane, payload: payload()), in: waitClass)
        earliestDeadline = min(earliestDeadline ?? deadline, deadline)
        if !sweeperRunning {
            sweeperRunning = true
            actions.startSweeper = true
        }
        return (.wait, actions)
    }

    /// The waiting request `id` was cancelled: it no longer waits.
    mutating func removeWaiter(id: Int) -> Waiter? {
        waiters.remove { $0.id == id }
    }

    /// A request sent on connection `id` finished. `load` is the connection's load read just now; `lane` is
    /// the lane of the class the request came with (`request`'s default class is bulk).
    mutating func finished(
        on id: Int, lane: DeliveryLane = WaitClass.default.lane, load: ConnectionLoad, outcome: Outcome, latency: Duration?,
        now: MonotonicInstant
    ) -> Actions {
        var actions = Actions()
        finished(on: id, lane: lane, load: load, outcome: outcome, latency: latency, now: now, into: &actions)
        return actions
    }

    /// As `finished(on:lane:load:outcome:latency:now:)`, adding to `actions`: a loop turn's answers share one
    /// set of actions (no arrays per answer).
    mutating func finished(
        on id: Int, lane: DeliveryLane = WaitClass.default.lane, load: ConnectionLoad, outcome: Outcome, latency: Duration?,
        now: MonotonicInstant, into actions: inout Actions
    ) {
        let limitBefore = currentLimit
        learn(outcome, latency: latency, now: now)
        inFlight -= 1
        if lane == .bulk { inFlightBulk -= 1 }
        var retireThis: RetireReason?
        if var entry = entries[id] {
            entry.inFlight -= 1
            entry.load = load
            switch outcome {
            case .answered(replaceConnection: true): retireThis = .spoiledByAnswer
            // The connection counts its timeouts and publishes them before their requests end (its loop
            // publishes its load, then runs the turn's completions): `load` already counts this one.
            case .timedOut where load.timeouts >= configuration.maxTimeoutsPerConnection: retireThis = .timeouts
            default: break
            }
            if retireThis == nil, entry.assigned >= streamBudget, entry.inFlight == 0 {
                retireThis = .streamIDsExhausted
            }
            if let retireThis {
                entry.load.retired = true
                actions.retire.append((connections[id]!, retireThis))
            }
            entries[id] = entry
        }
        if now - lastMaintenance > .seconds(1) {
            lastMaintenance = now
            retireLatencyOutliers(into: &actions)
        }
        if let after = currentLimit, after != limitBefore { actions.newLimit = after }
        handOff(into: &actions)
        // Requests still waiting ask for another connection, at most every few milliseconds.
        if retireThis != nil || (!waiters.isEmpty && now - lastOpenCheck >= Self.loadRefreshInterval) {
            lastOpenCheck = now
            actions.open += connectionsToOpen()  // each count is already added to `connecting`
        }
    }

    /// Ends waits whose deadline passed. `keepSweeping` is false once nobody waits (the sweeper stops).
    mutating func sweep(now: MonotonicInstant) -> (expired: [(waiter: Waiter, error: APNsClientError)], keepSweeping: Bool) {
        var expired: [Waiter] = []
        if let earliestDeadline, earliestDeadline <= now {
            expired = waiters.removeAll { $0.deadline <= now }
            self.earliestDeadline = waiters.minimum(of: \.deadline)
        }
        // Why a request waited in vain, so that an operator can act: with no usable connection, the last
        // connect's cause (refused, TLS, proxy, DNS) or, before any connection, that the first connect was
        // still under way (an address that drops packets answers nothing until the connect timeout).
        // Otherwise it waited for a stream or the limit (or for a replacement of draining connections).
        let usable = entries.values.contains { $0.load.phase == .ready && !$0.load.retired }
        let error: APNsClientError
        if !usable, let lastConnectError {
            error = APNsClientError(transport: .connectFailed, "no connection before the deadline: \(lastConnectError.message)")
        } else if entries.isEmpty {
            error = APNsClientError(
                transport: .connectFailed,
                "no connection before the deadline: a connect to APNs was still under way (none has succeeded yet; each may take up to the connect timeout)")
        } else {
            error = APNsClientError(transport: .notSent, "no free stream before the deadline")
        }
        if waiters.isEmpty { sweeperRunning = false }
        return (expired.map { ($0, error) }, !waiters.isEmpty)
    }

    // MARK: - Connections

    /// Re-reads every connection's load (through `read`) when the last full read is older than
    /// `loadRefreshInterval`.
    mutating func refreshLoads(now: MonotonicInstant, _ read: (Connection) -> ConnectionLoad) {
        guard now - loadsRefreshedAt >= Self.loadRefreshInterval else { return }
        loadsRefreshedAt = now
        for (id, connection) in connections { entries[id]!.load = read(connection) }
    }

    /// Counts a connect started without an `open` action (tests that set up connections directly).
    mutating func connectStarted() { connecting += 1 }

    /// A connection opened. When the pool is shutting down it is not added (the caller drains it).
    mutating func connected(id: Int, connection: Connection, load: ConnectionLoad) -> (added: Bool, actions: Actions) {
        var actions = Actions()
        connecting -= 1
        failedConnects = 0
        lastConnectError = nil
        // It may already have closed (its `.closed` event found no entry): then it is not added.
        guard !isShuttingDown, load.phase != .closed else { return (false, actions) }
        entries[id] = Entry(load: load)
        connections[id] = connection
        handOff(into: &actions)
        return (true, actions)
    }

    /// A connect failed: back off before the next one. With nothing usable and nothing else connecting,
    /// waiting requests fail now rather than at their deadline (the caller's retry backoff is the right
    /// place to wait).
    mutating func connectFailed(_ error: APNsClientError) -> Actions {
        var actions = Actions()
        connecting -= 1
        failedConnects += 1
        lastConnectError = error
        let usable = entries.values.contains { $0.load.phase == .ready && !$0.load.retired }
        if !usable && connecting == 0 {
            actions.fail = waiters.removeAll().map { ($0, error) }
        }
        guard !isShuttingDown, !reconnectScheduled else { return actions }
        reconnectScheduled = true
        actions.reconnectAfter = backoff(attempt: failedConnects)
        return actions
    }

    /// The backoff after failed connects ended.
    mutating func reconnectTimerFired(now: MonotonicInstant = .now) -> Actions {
        var actions = Actions()
        reconnectScheduled = false
        if !waiters.isEmpty || (entries.count < configuration.minConnections && !isIdle(now: now)) { actions.open = connectionsToOpen() }
        return actions
    }

    /// A connection's state changed (GOAWAY, closed, token rotated); `load` was read just now.
    mutating func connectionChanged(id: Int, load: ConnectionLoad, event: ConnectionEvent, now: MonotonicInstant = .now) -> Actions {
        var actions = Actions()
        switch event {
        case .closed:
            entries[id] = nil
            connections[id] = nil
            // An idle pool keeps nothing open: APNs closing an unused connection is not a reason to reconnect.
            if !isShuttingDown && (!waiters.isEmpty || (entries.count < configuration.minConnections && !isIdle(now: now))) {
                actions.open = connectionsToOpen()
            }
        case .goaway:
            entries[id]?.load = load
            if !waiters.isEmpty { actions.open = connectionsToOpen() }
        case .tokenRotated:
            entries[id]?.load = load
        }
        return actions
    }

    /// Stops taking requests: every waiting request fails, every connection is to be drained.
    mutating func shutdown() -> (waiters: [Waiter], connections: [Connection]) {
        isShuttingDown = true
        return (waiters.removeAll(), Array(connections.values))
    }

    /// Requests in flight and waiting by lane, when the gauges are due: when they changed and the last
    /// publication is `loadRefreshInterval` old, or at once when the pool went quiet (nothing in flight or
    /// waiting), so an idle pool never shows a stale backlog. Cheap enough for every pool event.
    mutating func laneCountsDue(now: MonotonicInstant) -> LaneCounts? {
        let quiet = inFlight == 0 && waiters.isEmpty
        guard laneGauges.isDue(now: now, quiet: quiet, interval: Self.loadRefreshInterval) else { return nil }
        return laneGauges.publish(laneCounts, now: now)
    }

    // MARK: - Rules

    /// Least-loaded usable connection with a free stream, within the adaptive limit and, for bulk, within
    /// bulk's cap; counts the request against it.
    private mutating func choose(_ lane: DeliveryLane) -> Connection? {
        let capped = lane == .bulk && reservesForUrgent
        // The cap is at most the limit's share: past that, no need to look at the connections.
        if capped, let currentLimit, inFlightBulk >= bulkCap(capacity: currentLimit) { return nil }
        guard let (id, streams) = bestConnection() else { return nil }
        if capped, inFlightBulk >= bulkCap(streams: streams) { return nil }
        return take(id, for: lane)
    }

    /// Counts a request of `lane` against connection `id`.
    private mutating func take(_ id: Int, for lane: DeliveryLane) -> Connection {
        inFlight += 1
        if lane == .bulk { inFlightBulk += 1 }
        entries[id]!.inFlight += 1
        entries[id]!.assigned += 1
        return connections[id]!
    }

    /// Hands free capacity to waiters in their order; when bulk is at its cap, only to urgent ones (a bulk
    /// waiter first in line must not hold back urgent waiters behind it).
    private mutating func handOff(into actions: inout Actions) {
        while !waiters.isEmpty, let (id, streams) = bestConnection() {
            let bulkMayGo = !reservesForUrgent || inFlightBulk < bulkCap(streams: streams)
            guard let waiter = waiters.popFirst(skippingRanksFrom: bulkMayGo ? .max : WaitClass.firstBulkRank) else { break }
            // The connection first: the waiter then moves into the actions (read after, it would be copied).
            let connection = take(id, for: waiter.lane)
            actions.handOff.append((consume waiter, connection))
        }
    }

    /// How many connections to start now: up to the minimum, and one more (up to the maximum) when every
    /// usable one is saturated — its streams full, its send window exhausted, or its latency well above
    /// the best one's (queueing in our buffers or the peer's) — or when requests wait and at least half
    /// of them are out of send window: then the link's bandwidth × round trip, not APNs, is what limits,
    /// and each connection brings its own window; or when bulk waits at a cap that streams, not the
    /// adaptive limit, set (with `urgentShare` bulk never fills a connection, so none looks saturated).
    /// `bulkAboutToWait`: a bulk request that found no connection is not in the queue yet.
    private mutating func connectionsToOpen(bulkAboutToWait: Bool = false) -> Int {
        guard !reconnectScheduled, !isShuttingDown else { return 0 }
        var usable = 0
        var saturated = 0
        var windowStarved = 0
        var streams = 0
        var bestLatency = 0.0  // (a loop, not compactMap + min: this runs for every request)
        for entry in entries.values where entry.load.latency > 0 && (bestLatency == 0 || entry.load.latency < bestLatency) {
            bestLatency = entry.load.latency
        }
        for entry in entries.values {
            let load = entry.load
            guard load.phase != .closed, !load.retired, load.phase != .draining, entry.assigned < streamBudget else { continue }
            usable += 1
            guard load.phase == .ready else { continue }
            streams += max(1, load.maxConcurrentStreams)
            let slow = bestLatency > 0 && load.latency > max(0.02, bestLatency * 3)
            if load.sendWindow < Self.windowStarvedBytes { windowStarved += 1 }
            if entry.inFlight >= max(1, load.maxConcurrentStreams) || load.sendWindow < 4096 || slow { saturated += 1 }
        }
        let total = usable + connecting
        var want = max(0, configuration.minConnections - total)
        if want == 0 && usable > 0 && total < configuration.maxConnections {
            if saturated == usable || (!waiters.isEmpty && windowStarved * 2 >= usable) { want = 1 }
            if reservesForUrgent, streams < currentLimit ?? .max, inFlightBulk >= bulkCap(streams: streams),
                bulkAboutToWait || waiters.count(in: .bulk) > 0
            {
                want = 1
            }
        }
        if want == 0 && total == 0 { want = 1 }
        want = min(want, configuration.maxConcurrentConnects - connecting, configuration.maxConnections - total)
        want = max(0, want)
        connecting += want
        return want
    }

    /// Feeds one outcome to the adaptive limit: an answer's latency, or congestion (a timeout after the
    /// request was sent). Answers' statuses say nothing about load here: 429 TooManyRequests is about one
    /// device token, and a 503 comes as fast as a 200.
    private mutating func learn(_ outcome: Outcome, latency: Duration?, now: MonotonicInstant) {
        guard configuration.adaptiveConcurrency, let latency else { return }
        switch outcome {
        case .answered: adaptiveLimit.answered(after: latency, inFlight: inFlight, now: now, connecting: connecting > 0)
        case .timedOut: adaptiveLimit.congested(now: now)
        case .failed, .cancelled: return
        }
    }

    private mutating func retireLatencyOutliers(into actions: inout Actions) {
        let live = entries.values.filter { $0.load.phase == .ready && !$0.load.retired && $0.load.latency > 0 }
        guard live.count >= 3 else { return }
        let latencies = live.map { $0.load.latency }.sorted()
        let median = latencies[latencies.count / 2]
        let threshold = max(0.05, median * configuration.latencyOutlierFactor)
        for (id, entry) in entries where entry.load.phase == .ready && !entry.load.retired && entry.load.latency > threshold {
            entries[id]!.load.retired = true
            actions.retire.append((connections[id]!, .latencyOutlier))
        }
    }
}
