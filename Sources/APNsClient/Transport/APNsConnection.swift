import APNsCore
import CNGHTTP2
import Glibc
import Logging
import ServiceSupport
import Synchronization

/// Settings of one TLS + HTTP/2 connection to APNs (or the mock).
public struct APNsConnectionConfiguration: Sendable {
    /// Host to resolve and to name in SNI, certificate verification and `:authority`.
    public var host: String
    public var port: Int
    public var trust: ServerTrust
    /// Reach `host` through this HTTP proxy (a `CONNECT` tunnel); `nil`: directly.
    public var proxy: HTTPProxy?
    /// TCP connect, TLS handshake and the server's first SETTINGS, together.
    public var connectTimeout: Duration = .seconds(10)
    /// Send a PING when nothing was received for this long.
    public var pingInterval: Duration = .seconds(60)
    /// Close the connection (`connectionLost`) if a PING is not answered within this.
    public var pingTimeout: Duration = .seconds(10)
    /// Bytes of encrypted output buffered before nghttp2 is no longer drained (bounds memory on slow peers).
    public var maxOutputBufferBytes: Int = 256 * 1024
    /// The connection retires (takes no new requests, finishes its streams, is replaced by the pool) once its
    /// next client stream id would pass this. HTTP/2 client ids are odd and end at 2^31−1: at 10k requests/s
    /// one connection uses them up in about 30 hours, after which every request on it would fail at once.
    public var maxStreamID: Int32 = Int32.max - 1_000_000

    public init(host: String, port: Int = 443, trust: ServerTrust = .systemTrustStore) {
        self.host = host
        self.port = port
        self.trust = trust
    }
}

/// Load and health of a connection, published by its I/O thread for the pool.
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
    case ready
    case goaway(lastStreamID: Int32, errorCode: UInt32, debug: String)
    case closed
    case tokenRotated
}

/// One TLS + HTTP/2 connection, driven by its own I/O thread.
///
/// `submit` hands the request to the I/O thread through a locked inbox and an eventfd; the I/O thread calls
/// its completion with the response. No thread blocks and no task waits per request. Requests beyond the peer's
/// MAX_CONCURRENT_STREAMS wait in a local queue on the I/O thread.
final class APNsConnection: Sendable {
    struct Shared {
        var inbox: [StreamRequest] = []
        var load = ConnectionLoad()
        var drainRequested = false
        var cancellationsPending = false
    }
    let id: Int
    let configuration: APNsConnectionConfiguration
    let shared: BlockingMutex<Shared>
    let wakeFD: Int32
    let logger: Logger

    private init(id: Int, configuration: APNsConnectionConfiguration, logger: Logger) throws(APNsClientError) {
        self.id = id
        self.configuration = configuration
        self.shared = BlockingMutex(Shared())
        let fd = cnghttp2_eventfd_nonblocking()
        guard fd >= 0 else { throw APNsClientError(transport: .connectFailed, "eventfd failed", underlyingCode: Int(errno)) }
        self.wakeFD = fd
        var logger = logger
        logger[metadataKey: "apns.connection"] = "\(id)"
        self.logger = logger
    }

    deinit { close(wakeFD) }

    /// Opens a connection: fresh DNS lookup, TCP, TLS (SNI, ALPN h2, verification), HTTP/2 preface, and
    /// waits for the server's first SETTINGS.
    /// - Throws: `APNsClientError` with `TransportFailure.connectFailed`.
    static func connect(
        id: Int, configuration: APNsConnectionConfiguration, tls: TLSContext, token: TokenSource?,
        liveThreads: ThreadCount, logger: Logger, onEvent: @escaping @Sendable (ConnectionEvent) -> Void
    ) async throws -> APNsConnection {
        let connection = try APNsConnection(id: id, configuration: configuration, logger: logger)
        try await withCheckedThrowingContinuation { (ready: CheckedContinuation<Void, any Error>) in
            let io = ConnectionIO(connection: connection, tls: tls, token: token, onEvent: onEvent, ready: ready)
            liveThreads.value.add(1, ordering: .relaxed)
            do {
                try IOThread.start(name: "apns-conn-\(id)") { io.run(liveThreads: liveThreads) }
            } catch {
                // The I/O thread never ran, so nothing else resumes `ready`.
                liveThreads.value.subtract(1, ordering: .relaxed)
                ready.resume(throwing: error)
            }
        }
        return connection
    }

    /// Hands one prepared request to the I/O thread; `completion` runs once with its response, at most at
    /// `deadline` (on the I/O thread, or right here when the connection does not take requests any more).
    /// Only the first request put into an empty inbox wakes the thread: a burst costs one wake-up.
    func submit(
        _ request: PreparedRequest, deadline: ContinuousClock.Instant, ticket: RequestTicket?,
        completion: @escaping StreamRequest.Completion
    ) {
        let stream = StreamRequest(prepared: request, deadline: deadline, completion: completion)
        if let ticket {
            // The I/O thread owns the request: flag it and let the thread reset the stream (RST_STREAM CANCEL).
            let live = ticket.enter { [self] in
                stream.cancelled.store(true, ordering: .releasing)
                shared.withLock { $0.cancellationsPending = true }
                wake()
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
            // The I/O thread takes the whole inbox at once: only the first request after that needs a wake.
            return (true, s.inbox.count == 1)
        }
        guard accepted else {
            stream.fail(.notProcessed, "connection \(id) is not accepting requests")
            return
        }
        if wakeNeeded { wake() }
    }

    var load: ConnectionLoad { shared.withLock { $0.load } }

    /// Marks the connection unusable for new requests; pending ones complete; then it closes.
    func drain() {
        shared.withLock { $0.drainRequested = true; $0.load.retired = true }
        wake()
    }

    func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }
}

/// Where a token-authenticated connection gets its `authorization` header.
struct TokenSource: Sendable {
    let signer: ProviderTokenSigner
    let clock: WallClock
    let policy: TokenRotationPolicy
}

/// How many threads of a kind are running (an `Atomic` that closures can share).
final class ThreadCount: Sendable {
    let value = Atomic<Int>(0)
    var current: Int { value.load(ordering: .acquiring) }
}

/// Starts detached POSIX threads for blocking I/O loops (never the cooperative pool).
enum IOThread {
    private final class Box {
        let body: () -> Void
        let name: String
        init(_ name: String, _ body: @escaping () -> Void) { self.body = body; self.name = String(name.prefix(15)) }
    }

    /// - Throws: `APNsClientError` (`connectFailed`) when the thread cannot be created (resource exhaustion:
    ///   too many threads or no memory); the pool backs off and retries like any failed connect.
    static func start(name: String, _ body: @escaping () -> Void) throws(APNsClientError) {
        // Retained here, released by the thread when it takes ownership.
        let box = Unmanaged.passRetained(Box(name, body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { arg in
            let box = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
            _ = box.name.withCString { cnghttp2_set_thread_name($0) }
            box.body()
            return nil
        }, box)
        guard rc == 0 else {
            Unmanaged<Box>.fromOpaque(box).release()
            throw APNsClientError(transport: .connectFailed, "cannot start the connection's I/O thread: \(String(cString: strerror(rc)))", underlyingCode: Int(rc))
        }
        pthread_detach(thread)
    }
}
