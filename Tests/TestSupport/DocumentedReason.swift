/// One `reason` APNs answers with: its HTTP status and what the relay does with such an answer, written out
/// by hand from the specification, never computed by the code under test.
///
/// Sources: Apple's "Handling notification responses from APNs" (the response error strings table, and its
/// advice: do not retry BadDeviceToken, DeviceTokenNotForTopic, Forbidden, ExpiredToken, Unregistered or
/// PayloadTooLarge; retry TooManyRequests with a delay; retry 5xx with a back-off), apns-reference.md §6
/// (statuses and connection effects) and §10 (broadcast and channel reasons), and ARCHITECTURE.md's data
/// flow (retryable: 429 TooManyRequests, 500, 503; final: the rest; 410 and BadDeviceToken/ExpiredToken
/// produce a removed-token record). Where those say nothing of the relay's handling (IdleTimeout, the
/// token-churn and key-binding reasons, the broadcast reasons), each `Handling` case names what it follows.
///
/// Both sides are held against this one table: APNsCore (`APNsReason.status`, `DeliveryDecision`) in
/// APNsCoreTests, the mock's answers in APNsMockTests and APNsClientTests. The mock answers from APNsCore's
/// table, so a test comparing one with the other would pass whatever that table said.
package struct DocumentedReason: Sendable, Hashable, CustomStringConvertible {
    /// What the relay does with an answer carrying the reason.
    package enum Handling: Sendable, Hashable {
        /// Final: sending the same request again gets the same answer.
        case reject
        /// Final, and the target is reported for removal (BadDeviceToken: ARCHITECTURE.md's removed-token
        /// record; ChannelNotRegistered: §10, a deleted channel id is never reissued, so a removed-channel
        /// record).
        case rejectAndRemoveTarget
        /// 410: the token is no longer active for the topic; a removed-token record carries APNs'
        /// `timestamp` (§6).
        case unregister
        /// Retry after a growing, jittered delay (Apple: 5xx and TooManyRequests).
        case retryWithBackoff
        /// The connection is unusable for this credential: retry on another one (§6's connection column:
        /// UnrelatedKeyIdInToken "open a new connection", TooManyProviderTokenUpdates "connection unusable",
        /// IdleTimeout "likely GOAWAY").
        case retryOnAnotherConnection
        /// The provider token is stale: retry with a fresh one (Apple: "a new token should be generated";
        /// ARCHITECTURE.md: the connection is replaced).
        case retryWithFreshToken
    }

    /// How sure the specification is of the row.
    package enum Source: Sendable, Hashable {
        /// Apple's response error strings table.
        case apple
        /// apns-reference.md, confirmed in two sources (the broadcast and channel reasons of §10, and the
        /// reason name seen in live responses beside the documented one).
        case reference
        /// apns-reference.md §10 "single-source, unconfirmed": a client should not need to know it by name.
        case unconfirmed
    }

    /// The `reason` string of the JSON body.
    package let reason: String
    /// The HTTP `:status` APNs sends with it.
    package let status: Int
    package let handling: Handling
    package let source: Source

    package init(_ reason: String, _ status: Int, _ handling: Handling, _ source: Source = .apple) {
        self.reason = reason
        self.status = status
        self.handling = handling
        self.source = source
    }

    package var description: String { "\(status) \(reason)" }

    /// The row for `reason`, if the specification names it.
    package static func named(_ reason: String) -> DocumentedReason? { all.first { $0.reason == reason } }

    /// Every reason, in the order of apns-reference.md §6 and §10.
    package static let all: [DocumentedReason] = [
        // 400: the request is wrong; sending it again gets the same answer.
        .init("BadCollapseId", 400, .reject),
        .init("BadDeviceToken", 400, .rejectAndRemoveTarget),
        .init("BadExpirationDate", 400, .reject),
        .init("BadMessageId", 400, .reject),
        .init("BadPriority", 400, .reject),
        .init("BadTopic", 400, .reject),
        .init("DeviceTokenNotForTopic", 400, .reject),
        .init("DuplicateHeaders", 400, .reject),
        .init("IdleTimeout", 400, .retryOnAnotherConnection),
        .init("InvalidPushType", 400, .reject),
        .init("MissingDeviceToken", 400, .reject),
        .init("MissingTopic", 400, .reject),
        .init("PayloadEmpty", 400, .reject),
        .init("TopicDisallowed", 400, .reject),
        // 403: the certificate or the provider token.
        .init("BadCertificate", 403, .reject),
        .init("BadCertificateEnvironment", 403, .reject),
        .init("ExpiredProviderToken", 403, .retryWithFreshToken),
        .init("Forbidden", 403, .reject),
        .init("InvalidProviderToken", 403, .reject),
        .init("MissingProviderToken", 403, .reject),
        .init("UnrelatedKeyIdInToken", 403, .retryOnAnotherConnection),
        .init("BadEnvironmentKeyIdInToken", 403, .reject),
        .init("BadEnvironmentKeyInToken", 403, .reject, .reference),
        // 404, 405
        .init("BadPath", 404, .reject),
        .init("MethodNotAllowed", 405, .reject),
        // 410
        .init("ExpiredToken", 410, .unregister),
        .init("Unregistered", 410, .unregister),
        // 413
        .init("PayloadTooLarge", 413, .reject),
        // 429
        .init("TooManyProviderTokenUpdates", 429, .retryOnAnotherConnection),
        .init("TooManyRequests", 429, .retryWithBackoff),
        // 500, 503
        .init("InternalServerError", 500, .retryWithBackoff),
        .init("ServiceUnavailable", 503, .retryWithBackoff),
        .init("Shutdown", 503, .retryWithBackoff),
        // Broadcast sends and channel management (§10).
        .init("FeatureNotEnabled", 400, .reject, .reference),
        .init("MissingChannelId", 400, .reject, .reference),
        .init("BadChannelId", 400, .reject, .reference),
        .init("ChannelNotRegistered", 400, .rejectAndRemoveTarget, .reference),
        .init("MissingPushType", 400, .reject, .reference),
        .init("CannotCreateChannelConfig", 400, .reject, .reference),
        .init("BadRequestParams", 400, .reject, .unconfirmed),
        .init("BadRequestPayload", 400, .reject, .unconfirmed),
        .init("TopicMismatch", 403, .reject, .unconfirmed),
        .init("MissingChannelQueueSize", 400, .reject, .unconfirmed),
    ]
}
