/// A broadcast channel id: the base64 string APNs chose when the channel was created
/// (apns-reference.md §10). Sent as the `apns-channel-id` header, never in a path.
///
/// APNs documents only "base64", so validation checks what is always true of it: non-empty, the standard
/// base64 alphabet, at most two `=` and only at the end, and at most `maxCharacters`. Whether the length is a
/// multiple of four (padding present) is left to APNs, which answers BadChannelId.
package struct ChannelID: Hashable, Sendable, CustomStringConvertible {
    /// The longest id accepted: APNs' ids are 24 characters today (16 bytes); the margin allows growth.
    package static let maxCharacters = 128

    package let base64: String

    /// - Throws: `ChannelID.Invalid` naming the first rule the string breaks.
    package init(base64: String) throws(Invalid) {
        let bytes = base64.utf8
        guard !bytes.isEmpty else { throw Invalid(reason: .empty) }
        guard bytes.count <= Self.maxCharacters else { throw Invalid(reason: .tooLong) }
        var padding = 0
        for byte in bytes {
            if byte == UInt8(ascii: "=") {
                padding += 1
                continue
            }
            guard padding == 0, Self.isBase64Digit(byte) else { throw Invalid(reason: .notBase64) }
        }
        guard padding <= 2, padding < bytes.count else { throw Invalid(reason: .notBase64) }
        self.base64 = base64
    }

    package var description: String { base64 }

    static func isBase64Digit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
            true
        default:
            false
        }
    }

    /// Why a string is not a channel id.
    package struct Invalid: Error, Hashable, Sendable, CustomStringConvertible {
        package enum Reason: String, Sendable {
            case empty = "channel id is empty"
            case tooLong = "channel id is longer than 128 characters"
            case notBase64 = "channel id is not base64 (A-Z a-z 0-9 + / with at most two = at the end)"
        }
        package let reason: Reason
        package var description: String { reason.rawValue }
    }
}

/// Where a notification goes: one device, or every Live Activity subscribed to a broadcast channel.
package enum PushTarget: Hashable, Sendable, CustomStringConvertible {
    /// A device push: `POST /3/device/<token>` with `apns-topic`.
    case device(DeviceToken)
    /// A broadcast (iOS 18): `POST /4/broadcasts/apps/<bundle id>` with `apns-channel-id`.
    case channel(ChannelID)

    /// The target for logs: a redacted token (personal data) or the channel id (not personal).
    package var description: String {
        switch self {
        case .device(let token): "device \(token.redacted)"
        case .channel(let channel): "channel \(channel.base64)"
        }
    }
}
