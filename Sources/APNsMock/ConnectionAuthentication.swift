import APNsCore

/// What authentication needs to know about a request that passed its syntax checks.
protocol AuthenticatedRequest {
    /// The topic a certificate must cover (device pushes: `apns-topic`; broadcasts and channel management:
    /// the bundle id from the path).
    var topic: String { get }
    /// The app a topic-specific provider key must cover.
    var bundleID: String { get }
    /// The push type, when the request carries one (channel management does not): some types are token-only
    /// or certificate-only.
    var authenticatedPushType: PushType? { get }
}

/// How one connection authenticates and what it is bound to (apns-reference.md §8, §11).
///
/// Token connections are bound to the team and key of their first valid token. A connection may change its
/// token at most once per update interval, counted from when its current token was adopted.
struct ConnectionAuthentication {
    enum Mode {
        case token
        /// Certificate connection covering these topics (bundle id plus its .voip and .complication).
        case certificate(topics: Set<String>)
    }

    var mode: Mode
    /// The whole `authorization` value of the current token, compared as a String (memcmp fast path).
    private var currentAuthorization: String?
    private var currentIssuedAt: Int64 = 0
    private var currentSinceMilliseconds: Int64 = 0
    private var currentBundleIDs: Set<String>?
    private var boundTeam: String?
    private var boundKey: String?
    /// Set once a request carried a valid credential (raises MAX_CONCURRENT_STREAMS).
    private(set) var hasValidCredential = false

    init(mode: Mode) {
        self.mode = mode
        if case .certificate = mode { hasValidCredential = true }
    }

    /// The default topic of a single-app certificate connection.
    var defaultTopic: String? {
        guard case .certificate(let topics) = mode else { return nil }
        return topics.min(by: { $0.utf8.count < $1.utf8.count })
    }

    /// Authenticates one request; on success a changed token becomes the connection's token.
    mutating func authenticate(
        authorization: String?,
        request: some AuthenticatedRequest,
        authority: ProviderTokenAuthority,
        environment: APNsEnvironment,
        nowMilliseconds: Int64,
        lifetimeSeconds: Int64,
        updateIntervalMilliseconds: Int64
    ) -> APNsReason? {
        let pushType = request.authenticatedPushType
        if case .certificate(let topics) = mode {
            if let pushType, !pushType.allowedWithCertificate { return .invalidPushType }
            return topics.contains(request.topic) ? nil : .topicDisallowed
        }
        if let pushType, !pushType.allowedWithToken { return .invalidPushType }
        guard let authorization, authorization.utf8.count > 7, authorization.hasPrefix("bearer ") else {
            return .missingProviderToken
        }
        let nowSeconds = nowMilliseconds / 1000
        // Fast path: the connection's current token, already verified and admitted.
        if let currentAuthorization, currentAuthorization == authorization {
            if currentIssuedAt + lifetimeSeconds < nowSeconds { return .expiredProviderToken }
            if let currentBundleIDs, !currentBundleIDs.contains(request.bundleID) { return .invalidProviderToken }
            return nil
        }
        let tokenString = String(authorization.dropFirst(7))
        let verified: VerifiedProviderToken
        switch authority.verify(tokenString) {
        case .success(let token): verified = token
        case .failure(let rejection): return rejection.reason
        }
        // Apple documents BadEnvironmentKeyIdInToken; live servers answer BadEnvironmentKeyInToken (observed).
        if let keyEnvironment = verified.environment, keyEnvironment != environment { return .badEnvironmentKeyInToken }
        if verified.issuedAt + lifetimeSeconds < nowSeconds { return .expiredProviderToken }
        if let boundTeam, boundTeam != verified.teamID { return .invalidProviderToken }
        if let boundKey, boundKey != verified.keyID { return .unrelatedKeyIdInToken }
        if let bundleIDs = verified.bundleIDs, !bundleIDs.contains(request.bundleID) { return .invalidProviderToken }
        if currentAuthorization != nil, nowMilliseconds - currentSinceMilliseconds < updateIntervalMilliseconds {
            return .tooManyProviderTokenUpdates
        }
        guard authority.admitToFleet(tokenString, verified) else { return .tooManyProviderTokenUpdates }
        if currentAuthorization != nil { authority.noteConnectionTokenUpdate() }
        currentAuthorization = authorization
        currentIssuedAt = verified.issuedAt
        currentSinceMilliseconds = nowMilliseconds
        currentBundleIDs = verified.bundleIDs
        boundTeam = verified.teamID
        boundKey = verified.keyID
        hasValidCredential = true
        return nil
    }
}
