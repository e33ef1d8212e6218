import APNsCore
import Logging
import ServiceSupport

/// Everything an `APNsClient` needs: credential, where to connect, how to trust the server, pool limits.
public struct APNsClientConfiguration: Sendable {
    /// How requests authenticate.
    public enum Credential: Sendable, CustomStringConvertible {
        /// Provider token (JWT, ES256) from a `.p8` key, shared by every replica.
        case token(ProviderTokenSigner)
        /// TLS client certificate (mutual TLS); requests carry no `authorization` header.
        case certificate(ClientCertificate)

        public var description: String {
            switch self {
            case .token(let s): "token(\(s))"
            case .certificate(let c): "certificate(\(c))"
            }
        }
    }

    /// Host and port to connect to.
    public struct Endpoint: Sendable, Hashable {
        public var host: String
        public var port: Int
        public init(host: String, port: Int = 443) {
            self.host = host
            self.port = port
        }
    }

    /// Per-connection timing.
    public struct Connection: Sendable {
        public var connectTimeout: Duration = .seconds(10)
        public var pingInterval: Duration = .seconds(60)
        public var pingTimeout: Duration = .seconds(10)
        public var maxOutputBufferBytes: Int = 256 * 1024
        /// Retire a connection once its next stream id would pass this (see `APNsConnectionConfiguration`).
        public var maxStreamID: Int32 = Int32.max - 1_000_000
        public init() {}
    }

    /// Pool limits, per environment.
    public struct Pool: Sendable {
        /// Connections kept open (opened lazily on first use).
        public var minConnections = 1
        public var maxConnections = 64
        /// A pool nobody sent through for this long closes its connections and keeps none open (it opens
        /// again on the next request) instead of holding and reconnecting them forever; `nil`: never.
        public var idleTimeout: Duration? = .seconds(600)
        /// Transparent resends of requests APNs never processed (GOAWAY above last-stream-id, REFUSED_STREAM).
        public var maxTransparentResends = 3
        /// Connections opening at the same time (Apple treats connection storms as abuse).
        public var maxConcurrentConnects = 2
        /// Reconnect backoff after failed connects: base, doubling, capped, with full jitter.
        public var reconnectBackoffBase: Duration = .milliseconds(100)
        public var reconnectBackoffMax: Duration = .seconds(10)
        /// Retire a connection after this many request timeouts.
        public var maxTimeoutsPerConnection = 3
        /// Retire a connection whose latency is this many times the pool's median (with ≥ 3 connections).
        public var latencyOutlierFactor = 4.0
        /// Bound the requests in flight by a limit learned from APNs' latency (`ConcurrencyLimit`): a slow
        /// APNs then sees a short queue, and the rest wait here, unsent, instead of timing out there and
        /// being resent (a duplicate push). Off: only MAX_CONCURRENT_STREAMS × connections bounds them.
        public var adaptiveConcurrency = true
        /// Answers slower than this shrink the adaptive limit whatever APNs' usual latency; keep it well
        /// below the request timeout (the relay uses a quarter of it).
        public var congestionLatency: Duration = .milliseconds(2500)
        /// The part (0…0.9; outside, clamped) of the pool's in-flight capacity kept for urgent pushes
        /// (`DeliveryLane.urgent`): bulk ones hold at most `floor(capacity × (1 − urgentShare))` (at least
        /// one), where the capacity is the adaptive limit or, when smaller (or `adaptiveConcurrency` is
        /// off), MAX_CONCURRENT_STREAMS × usable connections. Urgent pushes may use everything. So a login
        /// code finds a free stream at once during a campaign instead of queueing behind it. 0 (the
        /// default): nothing is kept; lanes still order the requests that wait (urgent first).
        public var urgentShare = 0.0
        public init() {}
    }

    public var credential: Credential
    /// The credential's name in metrics (`credential` dimension) and logs; configuration names, never
    /// topics or tokens, so the series stay few.
    public var name = "default"
    /// Where each environment's requests go; default: Apple's push hosts on 443.
    public var endpoints: [APNsEnvironment: Endpoint]
    /// Where each environment's channel-management requests go (`ChannelManager`); default: Apple's
    /// management hosts (port 2196 in production, 2195 in development).
    public var managementEndpoints: [APNsEnvironment: Endpoint]
    /// Server certificate verification; use `.caFile(path)` for the mock.
    public var trust: ServerTrust = .systemTrustStore
    /// Reach APNs through an HTTP proxy (`CONNECT` tunnels; TLS stays end to end); `nil`: directly.
    public var proxy: HTTPProxy?
    public var connection = Connection()
    public var pool = Pool()
    /// The event loops the connections run on; `nil`: `APNsEventLoopGroup.shared` (one set per process,
    /// `APNsEventLoopGroup.defaultLoopCount()` threads).
    public var eventLoops: APNsEventLoopGroup?
    /// Wall clock for provider-token epochs (injectable for tests).
    public var clock: WallClock = .system
    public var tokenRotation = TokenRotationPolicy()

    public init(credential: Credential, trust: ServerTrust = .systemTrustStore) {
        self.credential = credential
        self.trust = trust
        self.endpoints = Dictionary(uniqueKeysWithValues: APNsEnvironment.allCases.map { ($0, Endpoint(host: $0.host)) })
        self.managementEndpoints = Dictionary(
            uniqueKeysWithValues: APNsEnvironment.allCases.map { ($0, Endpoint(host: $0.managementHost, port: $0.managementPort)) }
        )
    }

    /// Sends every environment's requests to `endpoint` (the mock).
    public mutating func route(allEnvironmentsTo endpoint: Endpoint) {
        for env in APNsEnvironment.allCases { endpoints[env] = endpoint }
    }
}
