import APNsCore
import Foundation

/// Broadcast channel ids (apns-reference.md §10): random base64 strings chosen by the server, sent back in the
/// `apns-channel-id` header of broadcast sends and channel reads and deletes.
enum ChannelID {
    /// Longest id accepted in `apns-channel-id`. Apple documents no limit beyond "too long" (BadChannelId);
    /// 128 characters is far above the 24 the server issues.
    static let maxLength = 128

    /// A new id: 16 random bytes, standard base64 with padding (24 characters), like the ids APNs issues.
    static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<2).flatMap { _ in withUnsafeBytes(of: generator.next() as UInt64) { Array($0) } }
        return Data(bytes).base64EncodedString()
    }

    /// The `apns-channel-id` check shared by broadcast sends and channel reads and deletes: absent or empty →
    /// MissingChannelId; not strict standard base64 (alphabet A–Z a–z 0–9 + /, length a multiple of 4, `=`
    /// only as the last one or two characters) or longer than `maxLength` → BadChannelId.
    static func check(_ header: String?) -> RequestRejection? {
        guard let header, !header.isEmpty else { return .init(reason: .missingChannelId) }
        return isWellFormed(header) ? nil : .init(reason: .badChannelId)
    }

    static func isWellFormed(_ id: String) -> Bool {
        let bytes = id.utf8
        guard bytes.count <= maxLength, bytes.count % 4 == 0 else { return false }
        var padding = 0
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "="):
                padding += 1
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
                // A data character after padding: `=` was not at the end.
                if padding > 0 { return false }
            default:
                return false
            }
        }
        return padding <= 2
    }
}
