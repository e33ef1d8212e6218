import APNsCore
import COpenSSL
import DequeModule
import Glibc
import Logging
import ServiceSupport
import Synchronization

/// Settings of one TLS + HTTP/2 connection to APNs (or the mock).
package struct APNsConnectionConfiguration: Sendable {
    /// Host to resolve and to name in SNI, certificate verification and `:authority`, and its port.
    package var endpoint: APNsClientConfiguration.Endpoint
    package var trust: ServerTrust
    /// Reach `host` through this HTTP proxy (a `CONNECT` tunnel); `nil`: directly.
    package var proxy: HTTPProxy?
    /// Timing and limits, the client's `connection` value as it is.
    package var settings: APNsClientConfiguration.Connection

    package init(
        endpoint: APNsClientConfiguration.Endpoint, trust: ServerTrust = .systemTrustStore, proxy: HTTPProxy? = nil,
        settings: APNsClientConfiguration.Connection = .init()
    ) {
        self.endpoint = endpoint
        self.trust = trust
        self.proxy = proxy
        self.settings = settings
    }

    var host: String { endpoint.host }
    var port: Int { endpoint.port }
}

/// Load and health of a connection, published by its event loop for the pool.
struct ConnectionLoad: Sendable {
    enum Phase: Sendable, Equatable { case connecting, ready, draining, closed }
    var phase: Phase = .connecting
    /// Requests accepted and not yet completed (queued locally or on the wire).
    var outstanding = 0
    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS.
    var maxConcurrentStreams = 1
    /// Connection-level send window left, bytes.
    var sendWindow = 65535
    /// Exponentially weighted response latency, seconds.
    var latency: Double = 0
    var completed = 0
    var timeouts = 0
    /// Set when the pool should stop using it (e.g. the token was refused); it keeps draining.
    var retired = false
}

/// What a connection tells its owner.
enum ConnectionEvent: Sendable {
    case goaway(lastStreamID: Int32, errorCode: UInt32, debug: String)
    case closed
    case tokenRotated
}

/// The pool's handle on one TLS + HTTP/2 connection, which lives on an event loop (`ConnectionIO`).
///
/// `submit` puts the request into the connection's locked inbox; only the first request into an empty inbox
/// wakes the loop, so a burst costs one wake-up. The loop calls its completion with the response, with the
/// rest of its turn's answers. No thread blocks and no task waits per request. Requests beyond the peer's
/// MAX_CONCURRENT_STREAMS wait on the loop (`StreamTable`).
final class APNsConnection: Sendable {
    struct Shared {
        /// A queue: the loop takes requests from its front one by one, moving each into its table.
        var inbox = Deque<StreamRequest>()
        var load = ConnectionLoad()
        var drainRequested = false
        var cancellationsPending = false
    }
    /// The pool's id for it (unique within the pool; in logs and metrics).
    let id: Int
    /// Unique in the process: how its event loop, which serves every pool's connections, knows it.
    let loopToken: Int
    let configuration: APNsConnectionConfiguration
    let loop: APNsEventLoop
    let logger: Logger
    private let shared: BlockingMutex<Shared>

    private init(id: Int, configuration: APNsConnectionConfiguration, loop: APNsEventLoop, logger: Logger) {
        self.id = id
        self.loopToken = loopTokens.wrappingAdd(1, ordering: .relaxed).newValue
        self.configuration = configuration
        self.loop = loop
        self.shared = BlockingMutex(Shared())
        var logger = logger
        logger[metadataKey: "apns.connection"] = "\(id)"
        self.logger = logger
    }

    /// Opens a connection: on a connector thread of its own, a fresh DNS lookup, TCP, the proxy's tunnel if
    /// any, TLS (SNI, ALPN h2, verification); then on `loop`, the HTTP/2 preface, until the server's first
    /// SETTINGS. `opened` runs once, on the loop (or the connector thread, for a connect that failed there),
    /// with the ready connection or why there is none (`TransportFailure.connectFailed`).
    ///
    /// `live` counts the connection from now until nothing of it uses OpenSSL any more: the connector thread
    /// has ended its OpenSSL use and the socket, if any, is freed. Whoever is told of the end (`opened`'s
    /// failure, `.closed`) hears it after that: a process may exit then without racing OpenSSL's clean-up.
    static func open(
        id: Int, configuration: APNsConnectionConfiguration, tls: TLSContext, token: TokenSource?, loop: APNsEventLoop,
        live: LiveCount, logger: Logger, onEvent: @escaping @Sendable (ConnectionEvent) -> Void,
        opened: @escaping @Sendable (Result<APNsConnection, APNsClientError>) -> Void
    ) {
        let connection = APNsConnection(id: id, configuration: configuration, loop: loop, logger: logger)
        let deadline = MonotonicInstant.now.advanced(by: configuration.settings.connectTimeout)
        live.increment()
        do throws(DedicatedThread.StartFailure) {
            try DedicatedThread.start(name: "apns-connect") {
                let socket: TLSSocket
                do throws(APNsClientError) {
                    socket = try TLSSocket.connect(configuration, tls: tls, deadline: deadline)
                } catch {
                    OPENSSL_thread_stop()
                    live.decrement()
                    return opened(.failure(error))
                }
                // This thread is done with OpenSSL before the loop may end the connection and report it (a
                // process may exit then); the socket needs nothing of this thread's state.
                OPENSSL_thread_stop()
                // The socket moves to the loop; this thread never touches it again.
                let moved = LoopConfined(socket)
                let accepted = loop.execute { core in
                    moved.claim()
                    let io = ConnectionIO(
                        connection: connection, core: core, socket: moved.value, token: token, connectDeadline: deadline,
                        live: live, onEvent: onEvent, onReady: { result in opened(result.map { connection }) }
                    )
                    io.start()
                }
                if !accepted {
                    moved.value.close(clean: false)
                    live.decrement()
                    opened(.failure(APNsClientError(transport: .connectFailed, "the APNs event loop has stopped")))
                }
            }
        } catch {
            live.decrement()
            // The pool backs off and retries as after any failed connect.
            opened(.failure(APNsClientError(transport: .connectFailed, "\(error)", underlyingCode: Int(error.code))))
        }
    }

    /// Hands one request to the connection; it ends once with its response, at most at its deadline (on the
    /// loop, or right here when the connection does not take requests any more).
    func submit(_ stream: StreamRequest) {
        if let ticket = stream.send.ticket {
            // The loop owns the request: flag it and let the loop reset the stream (RST_STREAM CANCEL).
            let live = ticket.enter { [self] in
                stream.cancelled.store(true, ordering: .releasing)
                let wake = shared.withLock { s -> Bool in
                    defer { s.cancellationsPending = true }
                    return s.inbox.isEmpty && !s.cancellationsPending
                }
                if wake { loop.wake(connection: loopToken) }
            }
            guard live else {
                stream.completeCancelled()
                return
            }
        }
        let (accepted, wakeNeeded) = shared.withLock { s -> (Bool, Bool) in
            guard s.load.phase == .ready, !s.drainRequested else { return (false, false) }
            s.inbox.append(stream)
            s.load.outstanding += 1
            // The loop takes the whole inbox at once: only the first request after that needs a wake.
            return (true, s.inbox.count == 1 && !s.cancellationsPending)
        }
        guard accepted else {
            stream.fail(.notProcessed, "connection \(id) is not accepting requests")
            return
        }
        if wakeNeeded { loop.wake(connection: loopToken) }
    }

    var load: ConnectionLoad { shared.withLock { $0.load } }

    /// Marks the connection unusable for new requests; pending ones complete; then it closes.
    func drain() {
        shared.withLock { $0.drainRequested = true; $0.load.retired = true }
        loop.wake(connection: loopToken)
    }

    // MARK: - For the loop

    /// Takes the requests submitted since the last call, and whether a drain or a cancellation is pending.
    func takeInbox(into requests: inout Deque<StreamRequest>) -> (drain: Bool, cancellations: Bool) {
        shared.withLock { s in
            swap(&requests, &s.inbox)
            defer { s.cancellationsPending = false }
            return (s.drainRequested, s.cancellationsPending)
        }
    }

    func publish(_ stats: ConnectionIO.Stats, sendWindow: Int, maxConcurrentStreams: Int) {
        shared.withLock { s in
            s.load.outstanding -= stats.completed
            s.load.completed += stats.completed
            s.load.timeouts += stats.timeouts
            s.load.sendWindow = sendWindow
            s.load.latency = stats.latencyEWMA
            s.load.maxConcurrentStreams = maxConcurrentStreams
        }
    }

    func becameReady(maxConcurrentStreams: Int) {
        shared.withLock { $0.load.phase = .ready; $0.load.maxConcurrentStreams = maxConcurrentStreams }
    }

    func receivedGoaway() { shared.withLock { $0.load.phase = .draining } }

    /// Stops taking requests (its stream ids are used up); it drains and closes.
    func retire() { shared.withLock { $0.drainRequested = true; $0.load.retired = true } }

    /// The connection ended: no more requests; returns those submitted but never taken by the loop.
    func closed() -> [StreamRequest] {
        shared.withLock { s in
            s.load.phase = .closed
            s.load.outstanding = 0
            defer { s.inbox.removeAll() }
            return Array(s.inbox)
        }
    }
}

/// Where `APNsConnection.loopToken`s come from.
private let loopTokens = Atomic<Int>(0)

/// Where a token-authenticated connection gets its `authorization` header.
struct TokenSource: Sendable {
    let signer: ProviderTokenSigner
    let clock: WallClock
    let policy: TokenRotationPolicy
}
