import ServiceSupport
import APNsCore
import Logging
import Synchronization

/// The connections for one (environment, credential). The decisions — which connection, when to open,
/// retire and back off, which waiting requests expire — are ``PoolStateMachine``'s; the pool keeps it under
/// its lock with the connections, and carries out its actions (connect, drain, hand a connection to a
/// waiting request, fail it) outside the lock.
///
/// Requests APNs never processed (GOAWAY above last-stream-id, REFUSED_STREAM) are resent here, transparently,
/// on another connection while the deadline allows: they are provably safe, and only the pool knows another
/// connection. Everything else (including 429/5xx) goes back to the relay, which owns retry policy.
final class ConnectionPool: Sendable {
    /// Who hears a request's end: a caller of the client's typed API, one that takes any error, handed the
    /// error itself (no closure per request to convert between them), or an object the caller already has
    /// for the request (the relay's in-flight event: no closure at all).
    enum Completion: Sendable {
        case typed(@Sendable (Result<APNsResponse, APNsClientError>) -> Void)
        case erased(@Sendable (Result<APNsResponse, any Error>) -> Void)
        case handler(any APNsAnswerHandler)

        func callAsFunction(_ result: Result<APNsResponse, APNsClientError>) {
            switch self {
            case .typed(let completion): completion(result)
            case .erased(let completion): completion(result.mapError { $0 })
            case .handler(let handler): handler.answered(result.mapError { $0 })
            }
        }
    }
    /// How a waiting request is resumed: with a connection that counted it, or why none came.
    /// A waiter's payload is its request: handed a connection, it is submitted there; failed, it finishes.
    typealias Machine = PoolStateMachine<APNsConnection, StreamRequest>

    struct State {
        var machine: Machine
        var closedWaiters = ShutdownWaiters<CheckedContinuation<Void, Never>>()
        /// The idle watch is scheduled (it runs while the pool has connections; see `watchIdleness`).
        var watchingIdleness = false
    }

    let endpoint: APNsClientConfiguration.Endpoint
    /// Finished pushes' header buffers, for the next pushes.
    let requestBuffers: ByteBufferPool
    let configuration: APNsClientConfiguration
    let tls: TLSContext
    /// Connections of this pool (connecting or open) not yet done with OpenSSL; zero once `shutdown`
    /// returns (a process may exit then).
    let live = LiveCount()
    let loops: APNsEventLoopGroup
    /// Where the pool's own timers run (idle watch, reconnect backoff, waiter sweeps, shutdown deadline).
    let timerLoop: APNsEventLoop
    let token: TokenSource?
    let logger: Logger
    let metrics: ClientMetrics
    /// Whether APNs refuses this pool's credential (gauge and log).
    let credentialStatus: CredentialStatus
    let state: BlockingMutex<State>
    /// Ids of waiters and connections: an atomic, so taking one costs no turn on the pool's lock (which
    /// every request and every answer takes once).
    private let nextID = Atomic<Int>(0)
    /// Requests sent through this pool and not finished (waiting or on a stream): `apns_client_streams_in_use`.
    let outstanding = Atomic<Int>(0)
    /// Set by `APNsClient.holdUnsentRequests()`: no request starts a stream from then on.
    let holdsUnsent = Atomic<Bool>(false)

    init(environment: APNsEnvironment, endpoint: APNsClientConfiguration.Endpoint, configuration: APNsClientConfiguration, tls: TLSContext,
         token: TokenSource?, loops: APNsEventLoopGroup, logger: Logger, metrics: ClientMetrics) {
        self.endpoint = endpoint
        self.loops = loops
        self.timerLoop = loops.next()
        self.configuration = configuration
        self.tls = tls
        self.token = token
        self.logger = logger
        self.metrics = metrics
        self.credentialStatus = CredentialStatus(credential: configuration.name, environment: environment, logger: logger)
        // About as many as a relay has events in flight by default (relay.maxInFlightEvents, 5,000). A push's
        // buffer is about 560 bytes, so about 2 MiB at most, which those requests held anyway (16 MiB if every
        // buffer were of the largest size kept, 4 KiB).
        self.requestBuffers = ByteBufferPool(kept: 4096, largestKept: 4096)
        let pool = configuration.pool
        let machine = Machine(configuration: pool, streamBudget: configuration.connection.streamBudget)
        if let limit = machine.limit { metrics.concurrencyLimit.record(limit.limit) }
        self.state = BlockingMutex(State(machine: machine))
    }

    /// Lets an idle pool's connections go: checked every quarter of the idle timeout, on the pool's loop,
    /// from the first connection the pool opens while it has any (a pool never used, or closed for
    /// idleness, has no timer), until it shuts down.
    private func watchIdlenessIfNeeded() {
        guard let idle = configuration.pool.idleTimeout else { return }
        let start = state.withLock { s in
            defer { s.watchingIdleness = true }
            return !s.watchingIdleness
        }
        if start { watchIdleness(every: max(.milliseconds(50), idle / 4)) }
    }

    private func watchIdleness(every interval: Duration) {
        timerLoop.schedule(after: interval) { [weak self] in
            guard let self else { return }
            let (closing, stop) = state.withLock { s in
                let closing = s.machine.closeIfIdle(now: .now)
                // Nothing left to watch: the next connection opened starts the watch again.
                let stop = s.machine.isShuttingDown || (s.machine.isDrained && closing.isEmpty)
                if stop { s.watchingIdleness = false }
                return (closing, stop)
            }
            if !closing.isEmpty {
                logger.info("closing idle connections: no request for the idle timeout", metadata: ["count": "\(closing.count)"])
            }
            for connection in closing { connection.drain() }
            if !stop { watchIdleness(every: interval) }
        }
    }

    /// Sends on the best connection, resending never-processed requests on another one; `completion` runs
    /// once, on a connection's event loop or on the thread that gave up waiting (never on the caller's
    /// stack unless the request could not be sent at all).
    ///
    /// `deadline` bounds the wait for a connection and a free stream (when it passes, nothing was sent:
    /// `connectFailed` with the cause when no connection could be made, else `notSent`). Once sent, the request has as long for its answer as the deadline allowed when `send` was
    /// called: a request that waited here is not cut short on the wire, where a timeout means APNs may
    /// have it and a resend may push it twice.
    /// - Parameter now: the caller's reading of the clock, which `deadline` was computed from, if it took one
    ///   (one reading per request).
    func send(
        _ request: consuming PreparedRequest, deadline: MonotonicInstant, now reading: MonotonicInstant? = nil, ticket: RequestTicket? = nil,
        completion: Completion
    ) {
        let now = reading ?? MonotonicInstant.now
        metrics.requests.increment()
        metrics.streamsInUse.record(outstanding.add(1, ordering: .relaxed).newValue)
        let send = Send(request: request, deadline: deadline, budget: max(.zero, deadline - now), startedAt: now, ticket: ticket, completion: completion)
        attempt(StreamRequest(consume send, pool: self), now: now)
    }

    /// A send through the pool across its attempts (resends of what APNs never processed).
    struct Send: Sendable {
        let request: PreparedRequest
        /// Until when it may wait for a connection or be resent.
        let deadline: MonotonicInstant
        /// How long an attempt has for its answer once sent (what `deadline` allowed when `send` was called).
        let budget: Duration
        let startedAt: MonotonicInstant
        let ticket: RequestTicket?
        let completion: Completion
        var resends = 0
    }

    /// - Parameter now: the caller's reading of the clock, if it just took one (one read per request).
    private func attempt(_ stream: StreamRequest, now: MonotonicInstant? = nil) {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        if let ticket = stream.send.ticket {
            let live = ticket.enter { [self] in
                let (waiter, lanes) = state.withLock { s in (s.machine.removeWaiter(id: id), s.machine.laneCountsDue(now: .now)) }
                if let lanes { metrics.record(lanes) }
                if let waiter { finish(waiter.payload, .failure(APNsClientError(.cancelled, "cancelled while waiting for a connection"))) }
            }
            guard live else { return finish(stream, .failure(APNsClientError(.cancelled, "cancelled before it was sent"))) }
        }
        // A request that has to wait waits as itself, one reference (no closure to resume it: that would cost
        // an allocation; nor its send as a value: moving it in and out of the queue copies and retains it).
        let (deadline, waitClass) = (stream.send.deadline, stream.send.request.waitClass)
        let (pick, actions) = withMachine(now: now) { machine, now in
            machine.request(id: id, deadline: deadline, class: waitClass, now: now) { stream }
        }
        perform(actions)
        switch pick {
        case .connection(let connection): submit(stream, on: connection)
        case .wait: metrics.queuedForLimit.increment()
        case .fail(let error): finish(stream, .failure(error))
        }
    }

    /// Sends on `connection` (which counted the request); it ends in `completed`.
    private func submit(_ stream: StreamRequest, on connection: APNsConnection, now reading: MonotonicInstant? = nil) {
        let now = reading ?? MonotonicInstant.now
        stream.assign(to: connection, deadline: max(stream.send.deadline, now + stream.send.budget), now: now)
        connection.submit(stream)
    }

    /// Ends attempts — an event loop turn's answers together, or one refused before it reached a loop: the
    /// pool's accounting and learning in one critical section, then resends of what APNs never processed
    /// (on another connection, while the deadline allows), then each caller. Each attempt in `batch` has
    /// ended (`StreamRequest.end()`) by the hand of whoever put it there: an attempt ends once.
    /// - Returns: the adaptive limit's no-queue baseline in seconds, if it has one (the loop's batch window
    ///   widens with the queue at APNs above it).
    @discardableResult
    func completed<Batch: Collection>(_ batch: Batch) -> Double? where Batch.Element == Ending {
        // Loads are read outside the pool's lock, once per connection of the batch (usually one).
        var loads: [(id: Int, load: ConnectionLoad)] = []
        for (request, _) in batch where !loads.contains(where: { $0.id == request.connection.id }) {
            loads.append((request.connection.id, request.connection.load))
        }
        var actions = Machine.Actions()
        // One reading for the batch: the limit's samples, the hand-offs, the latency metric.
        let now = MonotonicInstant.now
        // The limit's latency counts from the request's last byte out (`sentAt`): what waited for a stream or
        // send window before that waited in this connection, not at APNs (ARCHITECTURE.md).
        let baseline = withMachine(now: now) { machine, _ -> Double? in
            for (request, result) in batch {
                let outcome = Self.outcome(of: result)
                let load = loads.first { $0.id == request.connection.id }!.load
                machine.finished(
                    on: request.connection.id, lane: request.send.request.waitClass.lane, load: load, outcome: outcome,
                    latency: outcome == .cancelled ? nil : now - request.sentAt, now: now, into: &actions
                )
            }
            return machine.baseline?.seconds
        }
        perform(actions, now: now)
        for (request, result) in batch {
            if Self.resends(result), request.send.resends < configuration.pool.maxTransparentResends, now < request.send.deadline {
                metrics.transparentResends.increment()
                var send = request.send
                send.resends += 1
                attempt(StreamRequest(send, pool: self))
            } else {
                finish(request, result, now: now)
            }
        }
        return baseline
    }

    /// An attempt as it ends, with its answer or why it has none.
    typealias Ending = (StreamRequest, Result<APNsResponse, APNsClientError>)

    /// Whether an attempt that ended so may be sent again at once (APNs never processed it).
    private static func resends(_ result: Result<APNsResponse, APNsClientError>) -> Bool {
        guard case .failure(let error) = result else { return false }
        return error.transportFailure == .notProcessed || error.transportFailure == .streamRefused
    }

    /// The send's end: metrics, then its caller. `now`: a reading the caller just took, if any.
    /// Takes the attempt and reads its send in place: the send as an argument was a copy of the whole value,
    /// a retain and a release of each of its references, per request.
    func finish(_ stream: StreamRequest, _ result: Result<APNsResponse, APNsClientError>, now: MonotonicInstant? = nil) {
        metrics.streamsInUse.record(outstanding.subtract(1, ordering: .relaxed).newValue)
        switch result {
        case .success(let response):
            metrics.latency.recordNanoseconds(((now ?? .now) - stream.send.startedAt).nanoseconds)
            metrics.response(APNsResponseSummary(status: String(response.status), reason: response.reason?.rawValue ?? ""))
            credentialStatus.answered(response)
        case .failure:
            metrics.transportFailures.increment()
        }
        stream.send.ticket?.finished()
        stream.send.completion(result)
    }

    private static func outcome(of result: Result<APNsResponse, APNsClientError>) -> Machine.Outcome {
        switch result {
        case .success(let response): .answered(replaceConnection: DeliveryDecision(response: response).replacesConnection)
        case .failure(let error) where error.code == .cancelled: .cancelled
        case .failure(let error) where error.transportFailure == .timedOut: .timedOut
        case .failure: .failed
        }
    }

    /// Runs `body` on the state machine under the lock, with loads no staler than `loadRefreshInterval`;
    /// publishes the per-lane gauges when they are due (`laneCountsDue`), outside the lock.
    /// `now`: a reading the caller just took (else the clock is read under the lock).
    private func withMachine<R>(now reading: MonotonicInstant? = nil, _ body: (inout Machine, MonotonicInstant) -> R) -> R {
        let (result, lanes) = state.withLock { s in
            let now = reading ?? MonotonicInstant.now
            s.machine.refreshLoads(now: now) { $0.load }
            let result = body(&s.machine, now)
            return (result, s.machine.laneCountsDue(now: now))
        }
        if let lanes { metrics.record(lanes) }
        return result
    }

    /// Carries out the machine's decisions (outside the lock). `now`: a reading the caller just took, if any.
    private func perform(_ actions: Machine.Actions, now: MonotonicInstant? = nil) {
        if let limit = actions.newLimit { metrics.concurrencyLimit.record(limit) }
        for (connection, reason) in actions.retire {
            switch reason {
            case .streamIDsExhausted:
                logger.debug("retiring connection: its stream ids are used up", metadata: ["apns.connection": "\(connection.id)"])
            case .latencyOutlier:
                logger.notice("retiring latency outlier", metadata: ["apns.connection": "\(connection.id)", "latency": "\(connection.load.latency)"])
            case .spoiledByAnswer, .timeouts:
                logger.notice("retiring connection", metadata: ["apns.connection": "\(connection.id)", "reason": "\(reason)"])
            }
            connection.drain()
        }
        for _ in 0..<actions.open { openConnection() }
        if let delay = actions.reconnectAfter { scheduleReconnect(after: delay) }
        if actions.startSweeper { startWaiterSweeper() }
        for (waiter, error) in actions.fail { finish(waiter.payload, .failure(error)) }
        for (waiter, connection) in actions.handOff { submit(waiter.payload, on: connection, now: now) }
    }

    // MARK: - Opening and closing

    private func openConnection() {
        watchIdlenessIfNeeded()
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let connectionConfiguration = APNsConnectionConfiguration(
            endpoint: endpoint, trust: configuration.trust, proxy: configuration.proxy, settings: configuration.connection)
        metrics.connectionsOpening.increment()
        APNsConnection.open(
            id: id, configuration: connectionConfiguration, tls: tls, token: token, loop: loops.next(), live: live, logger: logger,
            onEvent: { [weak self] event in self?.handle(event, connectionID: id) },
            opened: { [self] result in
                switch result {
                case .success(let connection):
                    let load = connection.load
                    let (added, actions) = state.withLock { $0.machine.connected(id: id, connection: connection, load: load) }
                    metrics.connectionsOpened.increment()
                    recordConnectionGauges()
                    if !added { connection.drain() }
                    perform(actions)
                case .failure(let error):
                    logger.warning("APNs connect failed: \(error.message)")
                    metrics.connectFailures.increment()
                    let actions = state.withLock { $0.machine.connectFailed(error) }
                    perform(actions)
                    resumeClosedWaiters()
                }
            }
        )
    }

    private func scheduleReconnect(after delay: Duration) {
        timerLoop.schedule(after: delay) { [weak self] in
            guard let self else { return }
            perform(state.withLock { $0.machine.reconnectTimerFired() })
        }
    }

    private func handle(_ event: ConnectionEvent, connectionID: Int) {
        defer { recordConnectionGauges() }
        switch event {
        case .tokenRotated:
            metrics.tokenRotations.increment()
        case .goaway(_, _, let debug):
            metrics.goaways.increment()
            logger.notice("connection draining after GOAWAY", metadata: ["apns.connection": "\(connectionID)", "debug": "\(debug)"])
        case .closed:
            metrics.connectionsClosed.increment()
        }
        // A change of state: the pool's view of this connection must not wait for the next refresh.
        let actions = state.withLock { s -> Machine.Actions in
            let load = s.machine.connections[connectionID]?.load ?? ConnectionLoad(phase: .closed)
            return s.machine.connectionChanged(id: connectionID, load: load, event: event)
        }
        perform(actions)
        if case .closed = event { resumeClosedWaiters() }
    }

    var connectionCount: Int { state.withLock { $0.machine.entries.count } }

    /// Publishes connections by state (connecting, ready, draining) to the gauges.
    private func recordConnectionGauges() {
        let (connecting, ready, draining) = state.withLock { $0.machine.connectionStates }
        metrics.connectionsConnecting.record(connecting)
        metrics.connectionsReady.record(ready)
        metrics.connectionsDraining.record(draining)
    }

    var loads: [ConnectionLoad] { state.withLock { $0.machine.connections.values.map(\.load) } }
}
