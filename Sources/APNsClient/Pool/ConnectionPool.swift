import ServiceSupport
import APNsCore
import Logging
import Synchronization

/// The connections for one (environment, credential): picks the least-loaded usable connection, opens more
/// when streams or the send window saturate, retires timed-out and slow ones, reconnects with jittered
/// backoff, and makes callers wait (suspended, with their deadline) when every connection is full.
///
/// Requests APNs never processed (GOAWAY above last-stream-id, REFUSED_STREAM) are resent here, transparently,
/// on another connection while the deadline allows: they are provably safe, and only the pool knows another
/// connection. Everything else (including 429/5xx) goes back to the relay, which owns retry policy.
final class ConnectionPool: Sendable {
    let endpoint: APNsClientConfiguration.Endpoint
    let configuration: APNsClientConfiguration
    let tls: TLSContext
    let token: TokenSource?
    let logger: Logger
    let metrics: ClientMetrics
    let state: BlockingMutex<State>
    /// Ids of waiters and connections: an atomic, so taking one costs no turn on the pool's lock (which
    /// every request and every answer takes once).
    private let nextID = Atomic<Int>(0)

    init(endpoint: APNsClientConfiguration.Endpoint, configuration: APNsClientConfiguration, tls: TLSContext,
         token: TokenSource?, logger: Logger, metrics: ClientMetrics) {
        self.endpoint = endpoint
        self.configuration = configuration
        self.tls = tls
        self.token = token
        self.logger = logger
        self.metrics = metrics
        var state = State()
        if configuration.pool.adaptiveConcurrency {
            var limit = ConcurrencyLimit.Configuration()
            limit.ceiling = configuration.pool.congestionLatency
            state.limit = ConcurrencyLimit(configuration: limit)
            metrics.concurrencyLimit.record(limit.initial)
        }
        self.state = BlockingMutex(state)
    }

    typealias Completion = @Sendable (Result<APNsResponse, APNsClientError>) -> Void

    /// Sends on the best connection, resending never-processed requests on another one; `completion` runs
    /// once, on a connection's I/O thread or on the thread that gave up waiting (never on the caller's
    /// stack unless the request could not be sent at all).
    ///
    /// `deadline` bounds the wait for a connection and a free stream (`notSent` when it passes: nothing was
    /// sent). Once sent, the request has as long for its answer as the deadline allowed when `send` was
    /// called: a request that waited here is not cut short on the wire, where a timeout means APNs may
    /// have it and a resend may push it twice.
    func send(
        _ request: PreparedRequest, deadline: ContinuousClock.Instant, ticket: RequestTicket? = nil,
        completion: @escaping Completion
    ) {
        attempt(request, deadline: deadline, budget: max(.zero, deadline - ContinuousClock.now), resends: 0, ticket: ticket, completion: completion)
    }

    private func attempt(
        _ request: PreparedRequest, deadline: ContinuousClock.Instant, budget: Duration, resends: Int,
        ticket: RequestTicket?, completion: @escaping Completion
    ) {
        acquire(deadline: deadline, ticket: ticket) { [self] acquired in
            let connection: APNsConnection
            switch acquired {
            case .success(let c): connection = c
            case .failure(let error): return completion(.failure(error))
            }
            let sent = ContinuousClock.now
            connection.submit(request, deadline: max(deadline, sent + budget), ticket: ticket) { [self] result in
                if case .failure(let error) = result, error.code == .cancelled {
                    // The caller gave up: neither a latency sample nor a timeout.
                    release(connection, result: result, latency: nil, countsAsTimeout: false)
                    return completion(result)
                }
                release(connection, result: result, latency: ContinuousClock.now - sent)
                if case .failure(let error) = result,
                    error.transportFailure == .notProcessed || error.transportFailure == .streamRefused,
                    resends < configuration.pool.maxTransparentResends, ContinuousClock.now < deadline
                {
                    metrics.transparentResends.increment()
                    return attempt(request, deadline: deadline, budget: budget, resends: resends + 1, ticket: ticket, completion: completion)
                }
                completion(result)
            }
        }
    }

    // MARK: - Choosing a connection

    /// Calls `acquired` with the best connection (the request counted against it) at once, or once one
    /// frees up, or with why none came before `deadline`.
    private func acquire(
        deadline: ContinuousClock.Instant, ticket: RequestTicket?,
        _ acquired: @escaping @Sendable (Result<APNsConnection, APNsClientError>) -> Void
    ) {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        if let ticket {
            let live = ticket.enter { [self] in
                let waiter = state.withLock { s in s.waiters.remove { $0.id == id } }
                waiter?.resume(.failure(APNsClientError(.cancelled, "cancelled while waiting for a connection")))
            }
            guard live else { return acquired(.failure(APNsClientError(.cancelled, "cancelled before it was sent"))) }
        }
        let (pick, open, startSweeper) = state.withLock { s -> (Result<APNsConnection, APNsClientError>?, Int, Bool) in
            guard !s.shuttingDown else { return (.failure(APNsClientError(.shutdown, "client is shutting down")), 0, false) }
            let choice = Self.choose(&s, streamBudget: streamBudget)
            let open = self.connectionsToOpen(&s)
            if let choice { return (.success(choice), open, false) }
            s.waiters.append(Waiter(id: id, deadline: deadline, resume: acquired))
            metrics.queuedForLimit.increment()
            guard !s.sweeperRunning else { return (nil, open, false) }
            s.sweeperRunning = true
            return (nil, open, true)
        }
        for _ in 0..<open { openConnection() }
        if startSweeper { startWaiterSweeper() }
        if let pick { acquired(pick) }
    }

    /// Requests one connection can carry before its stream ids (odd, up to `maxStreamID`) run out.
    var streamBudget: Int { (Int(configuration.connection.maxStreamID) + 1) / 2 }

    /// Least-loaded usable connection with a free stream; counts the request against it. A connection that
    /// has been given its last stream id gets no more requests (so none is queued where no stream can open
    /// for it); `release` retires it once its last request finished, and another one opens.
    static func choose(_ s: inout State, streamBudget: Int) -> APNsConnection? {
        if let limit = s.limit, s.inFlight >= limit.limit { return nil }
        refreshLoadsIfStale(&s)
        var best: (id: Int, score: Double)?
        for (id, entry) in s.entries {
            let load = entry.load
            guard load.phase == .ready, !load.retired, entry.assigned < streamBudget else { continue }
            let capacity = max(1, load.maxConcurrentStreams)
            guard entry.inFlight < capacity else { continue }
            var score = Double(entry.inFlight) / Double(capacity)
            if load.sendWindow < 4096 { score += 1 }  // flow-control window exhausted: prefer others
            if best == nil || score < best!.score { best = (id, score) }
        }
        guard let best else { return nil }
        s.inFlight += 1
        s.entries[best.id]!.inFlight += 1
        s.entries[best.id]!.assigned += 1
        return s.entries[best.id]!.connection
    }

    /// How many connections to start now: up to the minimum, and one more when every usable one is saturated.
    private func connectionsToOpen(_ s: inout State) -> Int {
        guard !s.reconnectScheduled, !s.shuttingDown else { return 0 }
        let pool = configuration.pool
        var usable = 0
        var saturated = 0
        Self.refreshLoadsIfStale(&s)
        let loads = s.entries.values.map { ($0, $0.load) }
        // Latency growth is a saturation signal too (queueing in our buffers or the peer's): a connection
        // whose latency is well above the best one is treated as full when deciding to open another.
        let bestLatency = loads.compactMap { $0.1.latency > 0 ? $0.1.latency : nil }.min() ?? 0
        for (entry, load) in loads {
            guard load.phase != .closed, !load.retired, load.phase != .draining, entry.assigned < streamBudget else { continue }
            usable += 1
            let slow = bestLatency > 0 && load.latency > max(0.02, bestLatency * 3)
            if load.phase == .ready && (entry.inFlight >= max(1, load.maxConcurrentStreams) || load.sendWindow < 4096 || slow) {
                saturated += 1
            }
        }
        let total = usable + s.connecting
        var want = max(0, pool.minConnections - total)
        if want == 0 && usable > 0 && saturated == usable && total < pool.maxConnections { want = 1 }
        if want == 0 && total == 0 { want = 1 }
        want = min(want, pool.maxConcurrentConnects - s.connecting, pool.maxConnections - total)
        want = max(0, want)
        s.connecting += want
        return want
    }

    /// - Parameter latency: from the request's stream to its answer; `nil` when the caller gave up.
    private func release(
        _ connection: APNsConnection, result: Result<APNsResponse, APNsClientError>, latency: Duration?, countsAsTimeout: Bool = true
    ) {
        var retire = false
        switch result {
        case .success(let response):
            switch response.reason {
            case .expiredProviderToken?, .tooManyProviderTokenUpdates?, .unrelatedKeyIdInToken?, .idleTimeout?:
                retire = true  // the connection (or its token) is spoiled: replace it with a fresh one
            default: break
            }
        case .failure(let error):
            if countsAsTimeout, error.transportFailure == .timedOut,
                connection.load.timeouts + 1 >= configuration.pool.maxTimeoutsPerConnection { retire = true }
        }
        if retire {
            logger.notice("retiring connection", metadata: ["apns.connection": "\(connection.id)"])
            connection.drain()
        }
        let load = connection.load
        // One critical section per answer: accounting, learning, and handing the freed stream to a waiting
        // request (every connection's I/O thread comes through here; a second round would double the
        // contention on the pool's lock, which a profile at full speed showed as the largest cost).
        let (open, exhausted, newLimit, handOff) = state.withLock { s -> (Int, Bool, Int?, [(Waiter, APNsConnection)]) in
            let now = ContinuousClock.now
            let limitBefore = s.limit?.limit
            Self.learn(from: result, latency: latency, countsAsTimeout: countsAsTimeout, into: &s)
            s.inFlight -= 1
            s.entries[connection.id]?.inFlight -= 1
            s.entries[connection.id]?.load = load
            let exhausted = s.entries[connection.id].map { $0.assigned >= streamBudget && $0.inFlight == 0 } ?? false
            if now - s.lastMaintenance > .seconds(1) {
                s.lastMaintenance = now
                retireLatencyOutliers(&s)
            }
            let newLimit = s.limit?.limit == limitBefore ? nil : s.limit?.limit
            var handOff: [(Waiter, APNsConnection)] = []
            while !s.waiters.isEmpty, let c = Self.choose(&s, streamBudget: streamBudget) {
                guard let w = s.waiters.popFirst() else { break }
                handOff.append((w, c))
            }
            // Requests still waiting ask for another connection, at most every few milliseconds.
            var open = 0
            if retire || exhausted || (!s.waiters.isEmpty && now - s.lastOpenCheck >= Self.loadRefreshInterval) {
                s.lastOpenCheck = now
                open = connectionsToOpen(&s)
            }
            return (open, exhausted, newLimit, handOff)
        }
        if let newLimit { metrics.concurrencyLimit.record(newLimit) }
        if exhausted {
            logger.debug("retiring connection: its stream ids are used up", metadata: ["apns.connection": "\(connection.id)"])
            connection.drain()
        }
        for _ in 0..<open { openConnection() }
        for (w, c) in handOff { w.resume(.success(c)) }
    }

    // MARK: - Opening and closing

    private func openConnection() {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        var connectionConfiguration = APNsConnectionConfiguration(host: endpoint.host, port: endpoint.port, trust: configuration.trust)
        connectionConfiguration.connectTimeout = configuration.connection.connectTimeout
        connectionConfiguration.pingInterval = configuration.connection.pingInterval
        connectionConfiguration.pingTimeout = configuration.connection.pingTimeout
        connectionConfiguration.maxOutputBufferBytes = configuration.connection.maxOutputBufferBytes
        connectionConfiguration.maxStreamID = configuration.connection.maxStreamID
        metrics.connectionsOpening.increment()
        Task {
            do {
                let connection = try await APNsConnection.connect(
                    id: id, configuration: connectionConfiguration, tls: tls, token: token, logger: logger,
                    onEvent: { [weak self] event in self?.handle(event, connectionID: id) }
                )
                let shuttingDown = state.withLock { s -> Bool in
                    s.connecting -= 1
                    s.failedConnects = 0
                    s.lastConnectError = nil
                    // It may already have closed (its `.closed` event found no entry): then it is not added.
                    let load = connection.load
                    if !s.shuttingDown && load.phase != .closed { s.entries[id] = Entry(connection: connection, load: load) }
                    return s.shuttingDown
                }
                metrics.connectionsOpened.increment()
                recordConnectionGauges()
                if shuttingDown { connection.drain() }
                dispatchWaiters()
            } catch {
                let clientError = error as? APNsClientError ?? APNsClientError(transport: .connectFailed, "\(error)")
                logger.warning("APNs connect failed: \(clientError.message)")
                metrics.connectFailures.increment()
                let (delay, stranded) = state.withLock { s -> (Duration?, [Waiter]) in
                    s.connecting -= 1
                    s.failedConnects += 1
                    s.lastConnectError = clientError
                    // With nothing usable and nothing else connecting, waiting callers learn now rather than
                    // at their deadline: the relay's backoff is the right place to wait.
                    var stranded: [Waiter] = []
                    let usable = s.entries.values.contains { $0.connection.load.phase == .ready && !$0.connection.load.retired }
                    if !usable && s.connecting == 0 {
                        stranded = s.waiters.removeAll()
                    }
                    guard !s.shuttingDown, !s.reconnectScheduled else { return (nil, stranded) }
                    s.reconnectScheduled = true
                    return (backoff(attempt: s.failedConnects), stranded)
                }
                for w in stranded { w.resume(.failure(clientError)) }
                resumeClosedWaiters(force: false)
                if let delay { scheduleReconnect(after: delay) }
            }
        }
    }

    private func scheduleReconnect(after delay: Duration) {
        Task { [weak self] in
            try? await Task.sleep(for: delay)
            guard let self else { return }
            let open = state.withLock { s -> Int in
                s.reconnectScheduled = false
                return s.waiters.isEmpty && s.entries.count >= configuration.pool.minConnections ? 0 : connectionsToOpen(&s)
            }
            for _ in 0..<open { openConnection() }
        }
    }

    private func handle(_ event: ConnectionEvent, connectionID: Int) {
        defer { recordConnectionGauges() }
        // A change of state: the pool's view of this connection must not wait for the next refresh.
        state.withLock { s in
            if let connection = s.entries[connectionID]?.connection { s.entries[connectionID]!.load = connection.load }
        }
        switch event {
        case .ready:
            break
        case .tokenRotated:
            metrics.tokenRotations.increment()
        case .goaway(_, _, let debug):
            metrics.goaways.increment()
            logger.notice("connection draining after GOAWAY", metadata: ["apns.connection": "\(connectionID)", "debug": "\(debug)"])
            let open = state.withLock { s in s.waiters.isEmpty ? 0 : connectionsToOpen(&s) }
            for _ in 0..<open { openConnection() }
        case .closed:
            metrics.connectionsClosed.increment()
            let open = state.withLock { s -> Int in
                s.entries[connectionID] = nil
                return s.shuttingDown || (s.waiters.isEmpty && s.entries.count >= configuration.pool.minConnections) ? 0 : connectionsToOpen(&s)
            }
            for _ in 0..<open { openConnection() }
            resumeClosedWaiters(force: false)
        }
    }

    var connectionCount: Int { state.withLock { $0.entries.count } }

    /// Publishes connections by state (connecting, ready, draining) to the gauges.
    private func recordConnectionGauges() {
        let (connecting, ready, draining) = state.withLock { s -> (Int, Int, Int) in
            var ready = 0
            var draining = 0
            for e in s.entries.values {
                let load = e.connection.load
                if load.phase == .ready && !load.retired { ready += 1 } else if load.phase != .closed { draining += 1 }
            }
            return (s.connecting, ready, draining)
        }
        metrics.connectionsConnecting.record(connecting)
        metrics.connectionsReady.record(ready)
        metrics.connectionsDraining.record(draining)
    }

    var loads: [ConnectionLoad] { state.withLock { $0.entries.values.map { $0.connection.load } } }
}
