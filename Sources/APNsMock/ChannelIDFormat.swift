import APNsCore
import Foundation

/// How the mock issues and checks broadcast channel ids (apns-reference.md §10): random base64 strings
/// chosen by the server, sent back in the `apns-channel-id` header of broadcast sends and channel reads and
/// deletes. The syntax is `APNsCore.ChannelID`'s (the relay's) plus what a server that decodes the id needs:
/// a length that is a multiple of four.
enum ChannelIDFormat {
    /// A new id: 16 random bytes, standard base64 with padding (24 characters), like the ids APNs issues.
    static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<2).flatMap { _ in withUnsafeBytes(of: generator.next() as UInt64) { Array($0) } }
        return Data(bytes).base64EncodedString()
    }

    /// The `apns-channel-id` check shared by broadcast sends and channel reads and deletes: absent or empty →
    /// MissingChannelId; not strict standard base64 (alphabet A–Z a–z 0–9 + /, length a multiple of 4, `=`
    /// only as the last one or two characters) or longer than `ChannelID.maxCharacters` → BadChannelId.
    static func check(_ header: String?) -> RequestRejection? {
        guard let header, !header.isEmpty else { return .init(reason: .missingChannelId) }
        return isWellFormed(header) ? nil : .init(reason: .badChannelId)
    }

    static func isWellFormed(_ id: String) -> Bool {
        (try? APNsCore.ChannelID(base64: id)) != nil && id.utf8.count % 4 == 0
    }
}
