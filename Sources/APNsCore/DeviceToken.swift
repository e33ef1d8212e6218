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
        var hex = hex
        let token = hex.withUTF8 { utf8 in
            Result { () throws(Invalid) in try DeviceToken(hexUTF8: UnsafeRawBufferPointer(utf8)) }
        }
        self = try token.get()
    }

    /// As `init(hex:)`, from the text's UTF-8 bytes (the event decoder's, read in place): the token's one
    /// allocation is its lower-case `String`, written directly.
    package init(hexUTF8 utf8: UnsafeRawBufferPointer) throws(Invalid) {
        guard !utf8.isEmpty else { throw Invalid(reason: .empty) }
        var invalid: Invalid.Reason?
        let lowered = String(unsafeUninitializedCapacity: utf8.count) { buffer in
            for (index, byte) in utf8.enumerated() {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"):
                    buffer[index] = byte
                case UInt8(ascii: "A")...UInt8(ascii: "F"):
                    buffer[index] = byte + 32
                default:
                    invalid = .notHex
                    return 0
                }
            }
            return utf8.count
        }
        if let invalid { throw Invalid(reason: invalid) }
        guard utf8.count % 2 == 0 else { throw Invalid(reason: .oddLength) }
        self.hex = lowered
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
