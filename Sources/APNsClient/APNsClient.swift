import APNsCore
import Glibc
import Logging
import ServiceSupport
import Synchronization

/// Sends device pushes and broadcasts to APNs over pooled TLS + HTTP/2 connections (nghttp2 over OpenSSL).
///
/// One client per credential (token key or certificate); it keeps one pool per environment. Thread-safe.
/// The relay owns retries: `send` returns every APNs answer (including errors) and throws only when no
/// answer came, with a `TransportFailure` to feed `DeliveryDecision(failure:)`.
package final class APNsClient: Sendable {
    package let configuration: APNsClientConfiguration
    private let pools: [APNsEnvironment: ConnectionPool]
    private let logger: Logger
    /// The client certificate's validity and subject (certificate authentication; `nil` with a token).
    package let clientCertificate: CertificateDetails?
    /// The certificates of the CA file the client trusts (`ServerTrust.caFile`), in file order.
    package let caCertificates: [CertificateDetails]

    /// - Parameter eventLoops: where the client's connections run (the process's one group; see
    ///   `APNsEventLoopGroup`). Nothing is sent until the group runs.
    /// - Throws: `APNsClientError` (`.tls`, `.invalidCredential`) if the TLS context or certificate cannot be set up.
    package init(
        configuration: APNsClientConfiguration, eventLoops loops: APNsEventLoopGroup, logger: Logger = Logger(label: "apns.client")
    ) throws(APNsClientError) {
        _ = Self.ignoreBrokenPipes
        self.configuration = configuration
        self.logger = logger
        let certificate: ClientCertificate?
        let token: TokenSource?
        switch configuration.credential {
        case .token(let signer):
            certificate = nil
            token = TokenSource(signer: signer, clock: configuration.clock, policy: configuration.tokenRotation)
        case .certificate(let c):
            certificate = c
            token = nil
        }
        let tls = try TLSContext(
            trust: configuration.trust, clientCertificate: certificate, logger: logger, now: Int64(configuration.clock.now()))
        clientCertificate = tls.clientCertificateDetails
        caCertificates = tls.caCertificates
        var pools: [APNsEnvironment: ConnectionPool] = [:]
        for env in APNsEnvironment.allCases {
            let endpoint = configuration.endpoints[env] ?? .init(host: env.host)
            var poolLogger = logger
            poolLogger[metadataKey: "apns.environment"] = "\(env.rawValue)"
            let metrics = ClientMetrics(credential: configuration.name, environment: env.rawValue)
            pools[env] = ConnectionPool(
                environment: env, endpoint: endpoint, configuration: configuration, tls: tls, token: token, loops: loops, logger: poolLogger, metrics: metrics)
        }
        self.pools = pools
    }

    /// Sends one notification to its environment; `completion` runs once with APNs' answer (success or
    /// error response) or with why none came.
    ///
    /// The hot path for callers with many requests in flight: no task and no continuation per request.
    /// `completion` runs on a connection's event loop (or on the thread that ended a wait): it must not
    /// block. Requests wait in the client (without a thread) while every connection is full or the
    /// adaptive concurrency limit is reached, at most until `deadline` (then nothing went out: `.notSent`,
    /// or `.connectFailed` with the connect's cause when no connection could be made). Once sent, the request has as long for its answer as `deadline` allowed when `send` was
    /// called (`.timedOut` after that: APNs may have it). Requests APNs provably did not process are resent
    /// on another connection before `deadline`; nothing else is retried here.
    ///
    /// Failures are `APNsClientError` with `code == .transport` and a `transportFailure` (`.notSent`,
    /// `.timedOut`, `.connectFailed`, `.connectionLost`, `.notProcessed`, `.streamRefused`), or `.shutdown`.
    package func send(
        _ notification: APNsNotification, deadline: MonotonicInstant,
        completion: @escaping @Sendable (Result<APNsResponse, APNsClientError>) -> Void
    ) {
        send(notification, deadline: deadline, ticket: nil, completion: .typed(completion))
    }

    /// As `send(_:deadline:completion:)`, for a caller that takes any error (the relay's `NotificationSender`):
    /// the error is handed over as it is, with no closure per request to convert it.
    package func sendReportingAnyError(
        _ notification: APNsNotification, deadline: MonotonicInstant,
        completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    ) {
        send(notification, deadline: deadline, ticket: nil, completion: .erased(completion))
    }

    /// As `sendReportingAnyError(_:deadline:completion:)`, telling `handler` (retained until then): a caller
    /// with an object per request allocates nothing more to hear its answer.
    /// `now`: the caller's reading of the clock, which `deadline` was computed from (the request's start).
    package func send(_ notification: APNsNotification, deadline: MonotonicInstant, now: MonotonicInstant, answeringTo handler: any APNsAnswerHandler) {
        send(notification, deadline: deadline, now: now, ticket: nil, completion: .handler(handler))
    }

    private func send(
        _ notification: APNsNotification, deadline: MonotonicInstant, now: MonotonicInstant? = nil, ticket: RequestTicket?,
        completion: ConnectionPool.Completion
    ) {
        let pool = pools[notification.environment]!
        let prepared = PreparedRequest(notification: notification, authority: pool.endpoint.host, buffer: pool.requestBuffers.take())
        send(prepared, on: pool, deadline: deadline, now: now, ticket: ticket, completion: completion)
    }

    private func send(
        _ prepared: consuming PreparedRequest, on pool: ConnectionPool, deadline: MonotonicInstant, now: MonotonicInstant? = nil,
        ticket: RequestTicket?, completion: ConnectionPool.Completion
    ) {
        pool.send(prepared, deadline: deadline, now: now, ticket: ticket, completion: completion)
    }

    /// Sends one notification and returns APNs' answer (see `send(_:deadline:completion:)`).
    /// - Throws: `APNsClientError` (see `send(_:deadline:completion:)`), or `CancellationError` when the
    ///   calling task is cancelled (the request's stream is reset, or its wait ends).
    package func send(_ notification: APNsNotification, deadline: MonotonicInstant) async throws -> APNsResponse {
        try await awaitAnswer { ticket, completion in send(notification, deadline: deadline, ticket: ticket, completion: .typed(completion)) }
    }

    /// Sends a request that is not a push (channel management, on the management hosts this client's
    /// `endpoints` name) and returns the answer with its body (at most `maxResponseBody` bytes).
    /// - Throws: as `send(_:deadline:)`.
    func request(
        _ method: String, _ path: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        environment: APNsEnvironment, deadline: MonotonicInstant, maxResponseBody: Int
    ) async throws -> APNsResponse {
        let pool = pools[environment]!
        let prepared = PreparedRequest(
            method: method, path: path, authority: pool.endpoint.host, headers: headers, body: body, maxResponseBody: maxResponseBody
        )
        return try await awaitAnswer { ticket, completion in send(prepared, on: pool, deadline: deadline, ticket: ticket, completion: .typed(completion)) }
    }

    /// Runs `start` with a cancellation ticket and waits for its completion.
    private func awaitAnswer(
        _ start: (RequestTicket, @escaping @Sendable (Result<APNsResponse, APNsClientError>) -> Void) -> Void
    ) async throws -> APNsResponse {
        let ticket = RequestTicket()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<APNsResponse, APNsClientError>, Never>) in
                start(ticket) { continuation.resume(returning: $0) }
            }
        } onCancel: {
            ticket.cancel()
        }
        if case .failure(let error) = result, error.code == .cancelled { throw CancellationError() }
        return try result.get()
    }

    /// `send(_:deadline:)` with a deadline `timeout` from now.
    package func send(_ notification: APNsNotification, timeout: Duration = .seconds(10)) async throws -> APNsResponse {
        try await send(notification, deadline: .now.advanced(by: timeout))
    }

    /// From now on no request goes out: those waiting for a stream or a connection, and any sent later, end
    /// with `.notSent` when a connection would start them (or at their deadline); those already sent finish.
    /// For a caller that can no longer use answers (the relay draining while Kafka is unreachable: every
    /// push it started then would be pushed again by whoever redoes the event). It cannot be undone.
    package func holdUnsentRequests() {
        for pool in pools.values { pool.holdsUnsent.store(true, ordering: .relaxed) }
    }

    /// Stops taking requests, lets in-flight ones finish until `deadline`, then closes every connection.
    package func shutdown(deadline: MonotonicInstant = .now.advanced(by: .seconds(10))) async {
        for pool in pools.values { await pool.shutdown(deadline: deadline) }
    }

    /// OpenSSL writes to its sockets with write(2), and a write to a connection the peer has closed raises
    /// SIGPIPE, whose default action ends the process (a mock APNs that dropped every connection killed
    /// `apns-relay send` this way in `make image-check`, where nothing had set SIGPIPE to ignored before).
    /// The error comes back as EPIPE and is handled; the signal is ignored, process-wide, once, as NIO does.
    private static let ignoreBrokenPipes: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Connections (connecting or open) not yet done with OpenSSL: zero once `shutdown` returned (then the
    /// process may exit without racing OpenSSL's exit-time clean-up).
    var liveConnections: Int { pools.values.reduce(0) { $0 + $1.live.current } }

    /// Requests in flight and waiting per lane in one environment's pool (for tests; the gauges
    /// `apns_client_requests_in_flight` and `apns_client_requests_waiting` publish the same).
    func requestsByLane(for environment: APNsEnvironment) -> ConnectionPool.Machine.LaneCounts {
        pools[environment]!.state.withLock { $0.machine.laneCounts }
    }

    /// Open connections per environment (for tests, benchmarks and readiness).
    package func connectionCount(for environment: APNsEnvironment) -> Int { pools[environment]!.connectionCount }

    /// The peers' current MAX_CONCURRENT_STREAMS, one per open connection.
    package func maxConcurrentStreams(for environment: APNsEnvironment) -> [Int] {
        pools[environment]!.loads.filter { $0.phase == .ready }.map(\.maxConcurrentStreams)
    }

    /// The adaptive concurrency limit per environment and the latency it compares with (`nil` when it is off;
    /// for tests).
    func concurrencyLimit(for environment: APNsEnvironment) -> (limit: Int, baseline: Duration?)? {
        pools[environment]!.state.withLock { $0.machine.limit.map { ($0.limit, $0.baseline) } }
    }

    /// Finished pushes' header buffers waiting for the next pushes (`ByteBufferPool`; for tests).
    func freeRequestBuffers(for environment: APNsEnvironment) -> Int { pools[environment]!.requestBuffers.count }
}

