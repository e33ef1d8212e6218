import APNsCore
import NIOHPACK

/// The headers of one APNs request — device push, broadcast send or channel management — read in one pass
/// over the header block, so routing and checking never parse a request's headers twice.
struct RequestHeaders {
    var method: String?
    var path: String?
    /// `apns-id` (device pushes).
    var apnsID: String?
    /// `apns-request-id` (broadcast sends and channel management).
    var requestID: String?
    var topic: String?
    var pushType: String?
    var priority: String?
    var expiration: String?
    var collapseID: String?
    var channelID: String?
    var authorization: String?
    /// A header was sent more than once.
    var hasDuplicate = false

    init(_ headers: HPACKHeaders) {
        for (name, value, _) in headers {
            // Dispatch on the name's length first: one or two string comparisons per header instead of up to
            // eleven. Within a length the device-push header comes first (the benchmarked path).
            switch name.utf8.count {
            case 5 where name == ":path": Self.set(&path, value, &hasDuplicate)
            case 7 where name == ":method": Self.set(&method, value, &hasDuplicate)
            case 7 where name == "apns-id": Self.set(&apnsID, value, &hasDuplicate)
            case 10 where name == "apns-topic": Self.set(&topic, value, &hasDuplicate)
            case 13 where name == "authorization": Self.set(&authorization, value, &hasDuplicate)
            case 13 where name == "apns-priority": Self.set(&priority, value, &hasDuplicate)
            case 14 where name == "apns-push-type": Self.set(&pushType, value, &hasDuplicate)
            case 15 where name == "apns-expiration": Self.set(&expiration, value, &hasDuplicate)
            case 15 where name == "apns-request-id": Self.set(&requestID, value, &hasDuplicate)
            case 15 where name == "apns-channel-id": Self.set(&channelID, value, &hasDuplicate)
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

/// A refusal: the reason (its status comes from `APNsReason.status`) and, for 410, the timestamp.
struct RequestRejection: Error {
    var reason: APNsReason
    var timestampMilliseconds: Int64? = nil
    /// The request's device token, when the rejection came after it was read (the registry's answers), so
    /// the request is counted for its token.
    var deviceToken: String? = nil
}

/// Header values whose rules are the same for device pushes and broadcast sends (apns-reference.md §2, §10).
enum HeaderValueRules {
    /// `apns-priority`: absent (APNs uses 10), or exactly `10`, `5` or `1`; otherwise BadPriority.
    static func priority(_ text: String?) -> Result<Int?, RequestRejection> {
        guard let text else { return .success(nil) }
        switch text {
        case "10": return .success(10)
        case "5": return .success(5)
        case "1": return .success(1)
        default: return .failure(.init(reason: .badPriority))
        }
    }

    /// `apns-expiration`: absent, or non-negative decimal UNIX seconds; otherwise BadExpirationDate.
    static func expiration(_ text: String?) -> Result<Int64?, RequestRejection> {
        guard let text else { return .success(nil) }
        guard let value = Int64(text), value >= 0 else { return .failure(.init(reason: .badExpirationDate)) }
        return .success(value)
    }
}
