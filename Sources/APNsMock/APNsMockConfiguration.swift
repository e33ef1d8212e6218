import APNsCore
import Crypto
import ServiceSupport

/// How an `APNsMockServer` listens, authenticates and validates.
package struct APNsMockConfiguration: Sendable {
    /// Address to bind; `127.0.0.1` for tests.
    package var host: String = "127.0.0.1"
    /// Port to bind; `0` picks a free one (read it from `start()`).
    package var port: Int = 0
    /// The environment the mock plays: `development` adds `apns-unique-id` to every device-push response and
    /// decides which registered tokens are from "the other" environment (400 BadDeviceToken); broadcast channels
    /// are created in it.
    package var environment: APNsEnvironment = .production
    /// Server certificate. `.selfSigned` generates one for `localhost`/`127.0.0.1` at start.
    package var tls: TLS = .selfSigned
    /// Provider-token keys the mock trusts (token authentication).
    package var providerKeys: [ProviderKey] = []
    /// Mutual TLS: when set, clients must present a certificate signed by one of these CAs, and the
    /// connection is authenticated by it (its subject UID, or CN, is the bundle id).
    package var clientCertificateTrustRootsPEM: String? = nil
    /// MAX_CONCURRENT_STREAMS advertised once a token connection has posted a valid token (at once on
    /// certificate connections). Token connections start at 1, as APNs does.
    package var maxConcurrentStreams: Int = 1000
    /// Answers flushed together leave in one TLS record (true), or each HTTP/2 frame in its own record
    /// (false: as a server that does not coalesce sends them; a client must read every record that arrived).
    package var coalescesWrites = true
    /// Also refuse (429 TooManyProviderTokenUpdates) a second, different token of the same key whose `iat` is
    /// within `tokenUpdateInterval` of a token the server already accepted on any connection.
    package var strictFleet: Bool = false
    /// A connection may change its provider token at most once per this interval.
    package var tokenUpdateInterval: Duration = .seconds(20 * 60)
    /// A token whose `iat` is older than this is expired.
    package var tokenLifetime: Duration = .seconds(60 * 60)
    /// How many accepted notifications `acceptedNotifications` keeps (oldest dropped first).
    package var acceptedHistoryLimit: Int = 10_000
    /// Event-loop threads serving connections.
    package var eventLoopThreads: Int = 1
    /// Time source; inject a `ManualWallClock`'s clock to move time in tests.
    package var clock: WallClock = .system
    /// Port of the HTTP/1.1 JSON control interface (`nil`: none; `0`: pick one).
    package var controlPort: Int? = nil
    /// Port of the broadcast channel-management API (`/1/apps/…`, like `api-manage-broadcast.push.apple.com`):
    /// `nil`: none; `0`: pick one (read `APNsMockServer.managementPort`). Same certificate, authentication,
    /// connection behaviour and faults as the push port.
    package var managementPort: Int? = nil
    /// Apps whose broadcast feature is off: their broadcast sends and channel-management requests are answered
    /// 400 FeatureNotEnabled.
    package var broadcastDisabledBundles: Set<String> = []
    /// Channels one app may have in one environment; APNs allows 10,000 (the next create is 400
    /// CannotCreateChannelConfig).
    package var maxChannelsPerApp: Int = 10_000

    package init() {}

    /// Which server certificate to present.
    package enum TLS: Sendable {
        /// Generate a self-signed certificate (CN and SAN `localhost`, SAN IP 127.0.0.1) at start and write it
        /// to a PEM file the client can trust (`APNsMockServer.caCertificatePEMPath`).
        case selfSigned
        /// A self-signed certificate kept in `directory` (`ca.pem`, `key.pem`): generated on the first start,
        /// reused by every later one, so clients that trust `ca.pem` reconnect to a restarted mock. Regenerated
        /// when it has less than a day of validity left.
        case selfSignedIn(directory: String)
        /// Use this PEM certificate chain and private key; `caPEMPath` is what clients should trust.
        case files(certificateChainPEMPath: String, privateKeyPEMPath: String, caPEMPath: String)
    }
}

/// A provider-token signing key the mock trusts: its public half, key id and team id.
package struct ProviderKey: Sendable {
    /// The 10-character Key ID (`kid`).
    package var keyID: String
    /// The 10-character Team ID (`iss`).
    package var teamID: String
    package var publicKey: P256.Signing.PublicKey
    /// Bundle ids this key may push to (topic-specific key); `nil` means any topic of the team.
    package var bundleIDs: Set<String>?
    /// The only environment this key may be used in (403 BadEnvironmentKeyInToken elsewhere); `nil`: both.
    package var environment: APNsEnvironment?

    package init(
        keyID: String,
        teamID: String,
        publicKey: P256.Signing.PublicKey,
        bundleIDs: Set<String>? = nil,
        environment: APNsEnvironment? = nil
    ) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKey = publicKey
        self.bundleIDs = bundleIDs
        self.environment = environment
    }

    /// Reads the public key from PEM (`-----BEGIN PUBLIC KEY-----`), or from a PKCS#8 private key PEM (`.p8`).
    package init(keyID: String, teamID: String, pem: String, bundleIDs: Set<String>? = nil, environment: APNsEnvironment? = nil) throws {
        let publicKey: P256.Signing.PublicKey
        if pem.contains("PRIVATE KEY") {
            publicKey = try P256.Signing.PrivateKey(pemRepresentation: pem).publicKey
        } else {
            publicKey = try P256.Signing.PublicKey(pemRepresentation: pem)
        }
        self.init(keyID: keyID, teamID: teamID, publicKey: publicKey, bundleIDs: bundleIDs, environment: environment)
    }
}
