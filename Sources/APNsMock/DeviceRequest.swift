import APNsCore
import NIOHPACK

/// The headers of a `/3/device/` request, read in one pass over the header block.
struct DeviceRequestHeaders {
    var method: String?
    var path: String?
    var apnsID: String?
    var topic: String?
    var pushType: String?
    var priority: String?
    var expiration: String?
    var collapseID: String?
    var authorization: String?
    /// A header was sent more than once.
    var hasDuplicate = false

    init(_ headers: HPACKHeaders) {
        for (name, value, _) in headers {
            // Dispatch on the name's length first: one string comparison per header instead of up to nine.
            switch name.utf8.count {
            case 5 where name == ":path": Self.set(&path, value, &hasDuplicate)
            case 7 where name == ":method": Self.set(&method, value, &hasDuplicate)
            case 7 where name == "apns-id": Self.set(&apnsID, value, &hasDuplicate)
            case 10 where name == "apns-topic": Self.set(&topic, value, &hasDuplicate)
            case 13 where name == "authorization": Self.set(&authorization, value, &hasDuplicate)
            case 13 where name == "apns-priority": Self.set(&priority, value, &hasDuplicate)
            case 14 where name == "apns-push-type": Self.set(&pushType, value, &hasDuplicate)
            case 15 where name == "apns-expiration": Self.set(&expiration, value, &hasDuplicate)
            case 16 where name == "apns-collapse-id": Self.set(&collapseID, value, &hasDuplicate)
            default: break
            }
        }
    }

    private static func set(_ field: inout String?, _ value: String, _ duplicate: inout Bool) {
        if field != nil { duplicate = true }
        field = value
    }
}

/// A request that passed every check before authentication.
struct CheckedDeviceRequest {
    var deviceToken: String
    var topic: String
    var bundleID: String
    var pushType: PushType
    var priority: Int?
    var expiration: Int64?
}

/// A refusal: the reason (its status comes from `APNsReason.status`) and, for 410, the timestamp.
struct RequestRejection: Error {
    var reason: APNsReason
    var timestampMilliseconds: Int64? = nil
}

/// The checks before authentication, in the order of apns-reference.md §11: apns-id → method → topic →
/// collapse-id → priority → push type (and its priority/topic rules, expiration) → path and device token
/// (and the registry) . DuplicateHeaders comes first: a repeated header makes every other check ambiguous.
enum DeviceRequestRules {
    static let pathPrefix: StaticString = "/3/device/"

    static func check(
        _ headers: DeviceRequestHeaders,
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
        var priority: Int?
        if let text = headers.priority {
            switch text {
            case "10": priority = 10
            case "5": priority = 5
            case "1": priority = 1
            default: return .failure(.init(reason: .badPriority))
            }
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
        var expiration: Int64?
        if let text = headers.expiration {
            guard let value = Int64(text), value >= 0 else { return .failure(.init(reason: .badExpirationDate)) }
            expiration = value
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
                    return .failure(.init(reason: .badDeviceToken))
                }
                if let registeredBundle, registeredBundle != bundleID {
                    return .failure(.init(reason: .deviceTokenNotForTopic))
                }
            case .unregistered(let since):
                return .failure(.init(reason: .unregistered, timestampMilliseconds: since))
            case .expired:
                return .failure(.init(reason: .expiredToken, timestampMilliseconds: nowMilliseconds))
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
    fileprivate var utf8Buffer: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: utf8Start, count: utf8CodeUnitCount) }
}
