/// The `reason` of an APNs error response (apns-reference.md §6 and §10).
///
/// Decoding never fails: a string this version does not know becomes `.unknown(string)`, so a new reason
/// from Apple is reported faithfully instead of breaking the relay.
package enum APNsReason: Hashable, Sendable, CustomStringConvertible {
    // 400
    case badCollapseId, badDeviceToken, badExpirationDate, badMessageId, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
    case missingTopic, payloadEmpty, topicDisallowed
    // 403
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden, invalidProviderToken
    case missingProviderToken, unrelatedKeyIdInToken, badEnvironmentKeyIdInToken, badEnvironmentKeyInToken
    // 404, 405
    case badPath, methodNotAllowed
    // 410
    case expiredToken, unregistered
    // 413
    case payloadTooLarge
    // 429
    case tooManyProviderTokenUpdates, tooManyRequests
    // 500, 503
    case internalServerError, serviceUnavailable, shutdown
    // Broadcast and channel management (§10)
    case featureNotEnabled, missingChannelId, badChannelId, channelNotRegistered, missingPushType
    case cannotCreateChannelConfig
    /// A reason this version does not know, verbatim.
    case unknown(String)

    private static let known: [APNsReason] = [
        .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
        .missingTopic, .payloadEmpty, .topicDisallowed,
        .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
        .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken, .badEnvironmentKeyInToken,
        .badPath, .methodNotAllowed, .expiredToken, .unregistered, .payloadTooLarge,
        .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError, .serviceUnavailable, .shutdown,
        .featureNotEnabled, .missingChannelId, .badChannelId, .channelNotRegistered, .missingPushType,
        .cannotCreateChannelConfig,
    ]
    private static let byName: [String: APNsReason] = Dictionary(
        uniqueKeysWithValues: known.map { ($0.rawValue, $0) }
    )

    /// All reasons this version knows, in reference order.
    package static var allKnown: [APNsReason] { known }

    package init(rawValue: String) {
        self = Self.byName[rawValue] ?? .unknown(rawValue)
    }

    /// The string APNs uses.
    package var rawValue: String {
        switch self {
        case .badCollapseId: "BadCollapseId"
        case .badDeviceToken: "BadDeviceToken"
        case .badExpirationDate: "BadExpirationDate"
        case .badMessageId: "BadMessageId"
        case .badPriority: "BadPriority"
        case .badTopic: "BadTopic"
        case .deviceTokenNotForTopic: "DeviceTokenNotForTopic"
        case .duplicateHeaders: "DuplicateHeaders"
        case .idleTimeout: "IdleTimeout"
        case .invalidPushType: "InvalidPushType"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .payloadEmpty: "PayloadEmpty"
        case .topicDisallowed: "TopicDisallowed"
        case .badCertificate: "BadCertificate"
        case .badCertificateEnvironment: "BadCertificateEnvironment"
        case .expiredProviderToken: "ExpiredProviderToken"
        case .forbidden: "Forbidden"
        case .invalidProviderToken: "InvalidProviderToken"
        case .missingProviderToken: "MissingProviderToken"
        case .unrelatedKeyIdInToken: "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyIdInToken: "BadEnvironmentKeyIdInToken"
        case .badEnvironmentKeyInToken: "BadEnvironmentKeyInToken"
        case .badPath: "BadPath"
        case .methodNotAllowed: "MethodNotAllowed"
        case .expiredToken: "ExpiredToken"
        case .unregistered: "Unregistered"
        case .payloadTooLarge: "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: "TooManyProviderTokenUpdates"
        case .tooManyRequests: "TooManyRequests"
        case .internalServerError: "InternalServerError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .shutdown: "Shutdown"
        case .featureNotEnabled: "FeatureNotEnabled"
        case .missingChannelId: "MissingChannelId"
        case .badChannelId: "BadChannelId"
        case .channelNotRegistered: "ChannelNotRegistered"
        case .missingPushType: "MissingPushType"
        case .cannotCreateChannelConfig: "CannotCreateChannelConfig"
        case .unknown(let raw): raw
        }
    }

    /// The HTTP status APNs sends with this reason (for the mock and for tests); `nil` for `.unknown`.
    package var status: Int? {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
            .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
            .missingTopic, .payloadEmpty, .topicDisallowed, .featureNotEnabled, .missingChannelId,
            .badChannelId, .channelNotRegistered, .missingPushType, .cannotCreateChannelConfig:
            400
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden,
            .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken,
            .badEnvironmentKeyInToken:
            403
        case .badPath: 404
        case .methodNotAllowed: 405
        case .expiredToken, .unregistered: 410
        case .payloadTooLarge: 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: 429
        case .internalServerError: 500
        case .serviceUnavailable, .shutdown: 503
        case .unknown: nil
        }
    }

    package var description: String { rawValue }

    /// APNs refused the credential itself — its provider token, key, certificate, or the environment the key
    /// is restricted to — not this push: every push of the credential to that environment gets the same
    /// answer until the configuration changes. (ExpiredProviderToken is not one: a fresh token cures it.)
    package var refusesCredential: Bool {
        switch self {
        case .invalidProviderToken, .missingProviderToken, .badEnvironmentKeyInToken, .badEnvironmentKeyIdInToken,
            .badCertificate, .badCertificateEnvironment:
            true
        default:
            false
        }
    }
}
