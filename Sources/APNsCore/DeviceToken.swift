/// An APNs device token: the hex encoding of the token bytes, as the provider API wants it in `:path`.
///
/// Apple says never to hard-code the size (32 bytes historically; 54, 80 and up to 100 bytes have been
/// announced or seen), so validation checks only what is always true: non-empty, hex digits, even length.
/// The stored form is lower-case, which is what APNs clients send.
package struct DeviceToken: Hashable, Sendable, CustomStringConvertible {
    /// Lower-case hex, even length, at least two characters.
    package let hex: String

    /// Validates and normalises `hex` to lower case.
    /// - Throws: `DeviceToken.Invalid` naming the first rule the string breaks.
    package init(hex: String) throws(Invalid) {
        guard !hex.isEmpty else { throw Invalid(reason: .empty) }
        var lowered = [UInt8]()
        lowered.reserveCapacity(hex.utf8.count)
        for byte in hex.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"):
                lowered.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "F"):
                lowered.append(byte + 32)
            default:
                throw Invalid(reason: .notHex)
            }
        }
        guard lowered.count % 2 == 0 else { throw Invalid(reason: .oddLength) }
        self.hex = String(decoding: lowered, as: UTF8.self)
    }

    /// The number of token bytes (half the hex length).
    package var byteCount: Int { hex.utf8.count / 2 }

    /// Shortened form for logs: device tokens are personal data, so logs carry only a prefix.
    package var redacted: String { String(hex.prefix(8)) + "…" }

    package var description: String { redacted }

    /// Why a string is not a device token.
    package struct Invalid: Error, Hashable, Sendable, CustomStringConvertible {
        package enum Reason: String, Sendable {
            case empty = "device token is empty"
            case notHex = "device token has a character that is not a hex digit"
            case oddLength = "device token has an odd number of hex digits"
        }
        package let reason: Reason
        package var description: String { reason.rawValue }
    }
}
