import APNsCore
import Logging
import ServiceSupport

/// Everything an `APNsClient` needs: credential, where to connect, how to trust the server, pool limits.
package struct APNsClientConfiguration: Sendable {
    /// How requests authenticate.
    package enum Credential: Sendable, CustomStringConvertible {
        /// Provider token (JWT, ES256) from a `.p8` key, shared by every replica.
        case token(ProviderTokenSigner)
        /// TLS client certificate (mutual TLS); requests carry no `authorization` header.
        case certificate(ClientCertificate)

        package var description: String {
            switch self {
            case .token(let s): "token(\(s))"
            case .certificate(let c): "certificate(\(c))"
            }
        }
    }

    /// Host and port to connect to.
    package struct Endpoint: Sendable, Hashable {
        package var host: String
        package var port: Int
        package init(host: String, port: Int = 443) {
            self.host = host
            self.port = port
        }
    }

    /// Per-connection timing and limits; each connection gets this value as it is.
    package struct Connection: Sendable {
        /// TCP connect, TLS handshake and the server's first SETTINGS, together.
        package var connectTimeout: Duration = .seconds(10)
        /// Send a PING when nothing was received for this long.
        package var pingInterval: Duration = .seconds(60)
        /// Close the connection (`connectionLost`) if a PING is not answered within this.
        package var pingTimeout: Duration = .seconds(10)
        /// Bytes of encrypted output buffered before nghttp2 is no longer drained (bounds memory on slow peers).
        package var maxOutputBufferBytes: Int = 256 * 1024
        /// The connection retires (takes no new requests, finishes its streams, is replaced by the pool) once
        /// its next client stream id would pass this. HTTP/2 client ids are odd and end at 2^31−1: at 10k
        /// requests/s one connection uses them up in about 30 hours, after which every request on it would
        /// fail at once.
        package var maxStreamID: Int32 = Int32.max - 1_000_000
        package init() {}

        /// Requests one connection carries before its stream ids run out (client ids are odd).
        var streamBudget: Int { (Int(maxStreamID) + 1) / 2 }
    }

    /// Pool limits, per environment; the pool's state machine decides with this value as it is.
    package struct Pool: Sendable {
        /// Connections kept open (opened lazily on first use).
        package var minConnections = 1
        package var maxConnections = 64
        /// A pool nobody sent through for this long closes its connections and keeps none open (it opens
        /// again on the next request) instead of holding and reconnecting them forever; `nil`: never.
        package var idleTimeout: Duration? = .seconds(600)
        /// Transparent resends of requests APNs never processed (GOAWAY above last-stream-id, REFUSED_STREAM).
        package var maxTransparentResends = 3
        /// Connections opening at the same time (Apple treats connection storms as abuse).
        package var maxConcurrentConnects = 2
        /// Reconnect backoff after failed connects: base, doubling, capped, with full jitter.
        package var reconnectBackoffBase: Duration = .milliseconds(100)
        package var reconnectBackoffMax: Duration = .seconds(10)
        /// Retire a connection after this many request timeouts.
        package var maxTimeoutsPerConnection = 3
        /// Retire a connection whose latency is this many times the pool's median (with ≥ 3 connections).
        package var latencyOutlierFactor = 4.0
        /// Bound the requests in flight by a limit learned from APNs' latency (`ConcurrencyLimit`): a slow
        /// APNs then sees a short queue, and the rest wait here, unsent, instead of timing out there and
        /// being resent (a duplicate push). Off: only MAX_CONCURRENT_STREAMS × connections bounds them.
        package var adaptiveConcurrency = true
        /// The adaptive limit's settings, when `adaptiveConcurrency` is on.
        package var adaptiveLimit = ConcurrencyLimit.Configuration()
        /// Answers slower than this shrink the adaptive limit whatever APNs' usual latency; keep it well
        /// below the request timeout (the relay uses a quarter of it). The limit's `ceiling`.
        package var congestionLatency: Duration {
            get { adaptiveLimit.ceiling }
            set { adaptiveLimit.ceiling = newValue }
        }
        /// The part (0…0.9; outside, clamped) of the pool's in-flight capacity kept for urgent pushes
        /// (`DeliveryLane.urgent`): bulk ones hold at most `floor(capacity × (1 − urgentShare))` (at least
        /// one), where the capacity is the adaptive limit or, when smaller (or `adaptiveConcurrency` is
        /// off), MAX_CONCURRENT_STREAMS × usable connections. Urgent pushes may use everything. So a login
        /// code finds a free stream at once during a campaign instead of queueing behind it. 0 (the
        /// default): nothing is kept; lanes still order the requests that wait (urgent first).
        package var urgentShare = 0.0
        package init() {}
    }

    package var credential: Credential
    /// The credential's name in metrics (`credential` dimension) and logs; configuration names, never
    /// topics or tokens, so the series stay few.
    package var name = "default"
    /// Where each environment's requests go; default: Apple's push hosts on 443.
    package var endpoints: [APNsEnvironment: Endpoint]
    /// Where each environment's channel-management requests go (`ChannelManager`); default: Apple's
    /// management hosts (port 2196 in production, 2195 in development).
    package var managementEndpoints: [APNsEnvironment: Endpoint]
    /// Server certificate verification; use `.caFile(path)` for the mock.
    package var trust: ServerTrust = .systemTrustStore
    /// Reach APNs through an HTTP proxy (`CONNECT` tunnels; TLS stays end to end); `nil`: directly.
    package var proxy: HTTPProxy?
    package var connection = Connection()
    package var pool = Pool()
    /// Wall clock for provider-token epochs (injectable for tests).
    package var clock: WallClock = .system
    package var tokenRotation = TokenRotationPolicy()

    package init(credential: Credential, trust: ServerTrust = .systemTrustStore) {
        self.credential = credential
        self.trust = trust
        self.endpoints = Dictionary(uniqueKeysWithValues: APNsEnvironment.allCases.map { ($0, Endpoint(host: $0.host)) })
        self.managementEndpoints = Dictionary(
            uniqueKeysWithValues: APNsEnvironment.allCases.map { ($0, Endpoint(host: $0.managementHost, port: $0.managementPort)) }
        )
    }

    /// Sends every environment's requests to `endpoint` (the mock).
    package mutating func route(allEnvironmentsTo endpoint: Endpoint) {
        for env in APNsEnvironment.allCases { endpoints[env] = endpoint }
    }
}
