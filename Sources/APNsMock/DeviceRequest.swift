import APNsCore

/// A device push that passed every check before authentication.
struct CheckedDeviceRequest: AuthenticatedRequest {
    var deviceToken: String
    var topic: String
    var bundleID: String
    var pushType: PushType
    var priority: Int?
    var expiration: Int64?

    var authenticatedPushType: PushType? { pushType }
}

/// The checks before authentication, in the order of apns-reference.md §11: apns-id → method → topic →
/// collapse-id → priority → push type (and its priority/topic rules, expiration) → path and device token
/// (and the registry). DuplicateHeaders comes first: a repeated header makes every other check ambiguous.
/// `APNsConnectionHandler` only sends requests here whose `:path` starts with `pathPrefix` (see `RequestRoute`).
enum DeviceRequestRules {
    static let pathPrefix: StaticString = "/3/device/"

    static func check(
        _ headers: RequestHeaders,
        defaultTopic: String?,
        environment: APNsEnvironment,
        registry: DeviceRegistry,
        nowMilliseconds: Int64
    ) -> Result<CheckedDeviceRequest, RequestRejection> {
        if headers.hasDuplicate { return .failure(.init(reason: .duplicateHeaders)) }
        if let apnsID = headers.apnsID, !APNsNotification.isCanonicalUUID(apnsID) {
            return .failure(.init(reason: .badMessageId))
        }
        guard headers.method == "POST" else { return .failure(.init(reason: .methodNotAllowed)) }
        let topic: String
        if let sent = headers.topic, !sent.isEmpty {
            topic = sent
        } else if let defaultTopic {
            topic = defaultTopic
        } else {
            return .failure(.init(reason: .missingTopic))
        }
        if let collapseID = headers.collapseID, collapseID.utf8.count > 64 {
            return .failure(.init(reason: .badCollapseId))
        }
        let priority: Int?
        switch HeaderValueRules.priority(headers.priority) {
        case .success(let value): priority = value
        case .failure(let rejection): return .failure(rejection)
        }
        let pushType: PushType
        if let text = headers.pushType {
            guard let known = PushType(rawValue: text) else { return .failure(.init(reason: .invalidPushType)) }
            pushType = known
        } else {
            pushType = .alert
        }
        if pushType == .background, priority != 5 { return .failure(.init(reason: .badPriority)) }
        let suffix = pushType.topicSuffix
        if !suffix.isEmpty {
            guard topic.utf8.count > suffix.utf8.count, topic.hasSuffix(suffix) else {
                return .failure(.init(reason: .badTopic))
            }
        }
        let expiration: Int64?
        switch HeaderValueRules.expiration(headers.expiration) {
        case .success(let value): expiration = value
        case .failure(let rejection): return .failure(rejection)
        }
        // Path and device token, scanned over the path's UTF-8 bytes in place.
        guard var path = headers.path else { return .failure(.init(reason: .badPath)) }
        let hasUpper: Bool
        switch path.withUTF8({ scanDeviceToken(path: $0) }) {
        case .failure(let rejection): return .failure(rejection)
        case .success(let upper): hasUpper = upper
        }
        var deviceToken = String(Substring(path.utf8.dropFirst(pathPrefix.utf8CodeUnitCount)))
        if hasUpper { deviceToken = deviceToken.lowercased() }
        let bundleID = suffix.isEmpty ? topic : String(topic.dropLast(suffix.count))
        if let state = registry.state(ofLowercased: deviceToken) {
            switch state {
            case .active(let registeredBundle, let registeredEnvironment):
                if let registeredEnvironment, registeredEnvironment != environment {
                    return .failure(.init(reason: .badDeviceToken, deviceToken: deviceToken))
                }
                if let registeredBundle, registeredBundle != bundleID {
                    return .failure(.init(reason: .deviceTokenNotForTopic, deviceToken: deviceToken))
                }
            case .unregistered(let since):
                return .failure(.init(reason: .unregistered, timestampMilliseconds: since, deviceToken: deviceToken))
            case .expired:
                return .failure(.init(reason: .expiredToken, timestampMilliseconds: nowMilliseconds, deviceToken: deviceToken))
            case .failing(let reason):
                return .failure(.init(reason: reason, deviceToken: deviceToken))
            }
        }
        return .success(
            CheckedDeviceRequest(
                deviceToken: deviceToken,
                topic: topic,
                bundleID: bundleID,
                pushType: pushType,
                priority: priority,
                expiration: expiration
            )
        )
    }

    /// Checks `/3/device/<hex token>`; success tells whether the token has upper-case digits.
    private static func scanDeviceToken(path: UnsafeBufferPointer<UInt8>) -> Result<Bool, RequestRejection> {
        let prefix = pathPrefix.utf8Buffer
        guard path.count >= prefix.count, path.prefix(prefix.count).elementsEqual(prefix) else {
            return .failure(.init(reason: .badPath))
        }
        let token = path[prefix.count...]
        if token.isEmpty { return .failure(.init(reason: .missingDeviceToken)) }
        var hasUpper = false
        for byte in token {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): continue
            case UInt8(ascii: "A")...UInt8(ascii: "F"): hasUpper = true
            case UInt8(ascii: "/"), UInt8(ascii: "?"): return .failure(.init(reason: .badPath))
            default: return .failure(.init(reason: .badDeviceToken))
            }
        }
        if token.count % 2 != 0 { return .failure(.init(reason: .badDeviceToken)) }
        return .success(hasUpper)
    }

    /// The checks after authentication: empty and oversized payloads.
    static func checkPayload(size: Int, pushType: PushType) -> RequestRejection? {
        if size == 0 { return .init(reason: .payloadEmpty) }
        if size > pushType.maxPayloadBytes { return .init(reason: .payloadTooLarge) }
        return nil
    }
}

extension StaticString {
    var utf8Buffer: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: utf8Start, count: utf8CodeUnitCount) }
}
