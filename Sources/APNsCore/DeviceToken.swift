/// An APNs device token: the token's bytes, written as lower-case hex where APNs wants text (`:path`).
///
/// Apple says never to hard-code the size (32 bytes historically; 54, 80 and up to 100 bytes have been
/// announced or seen), so validation checks only what is always true: non-empty, hex digits, even length.
///
/// Held as bytes, not as its hex `String`: a token of up to `inlineCapacity` bytes (the usual 32-byte tokens)
/// sits inside the value, so an event's token costs no allocation and no reference counting; a longer
/// one has an array. The hex is written where it goes (`appendHex(to:)`, `withHex(_:)`); `hex` makes a
/// `String` for the rest (tools, tests).
package struct DeviceToken: Hashable, Sendable, CustomStringConvertible {
    /// Tokens of at most this many bytes are stored inline.
    package static let inlineCapacity = 32
    private var inline: InlineBytes
    /// The bytes of a token longer than `inlineCapacity`.
    private var overflow: [UInt8]?
    /// The number of token bytes (half the hex length).
    package let byteCount: Int

    private struct InlineBytes: Hashable {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        static func == (a: Self, b: Self) -> Bool { a.words == b.words }
        func hash(into hasher: inout Hasher) {
            hasher.combine(words.0)
            hasher.combine(words.1)
            hasher.combine(words.2)
            hasher.combine(words.3)
        }
    }

    /// Validates `hex` (either case).
    /// - Throws: `DeviceToken.Invalid` naming the first rule the string breaks.
    package init(hex: String) throws(Invalid) {
        var hex = hex
        let token = hex.withUTF8 { utf8 in
            Result { () throws(Invalid) in try DeviceToken(hexUTF8: UnsafeRawBufferPointer(utf8)) }
        }
        self = try token.get()
    }

    /// As `init(hex:)`, from the text's UTF-8 bytes (the event decoder's, read in place): one pass that
    /// checks and decodes each pair of digits.
    package init(hexUTF8 utf8: UnsafeRawBufferPointer) throws(Invalid) {
        guard !utf8.isEmpty else { throw Invalid(reason: .empty) }
        let count = utf8.count / 2
        /// Decodes the pairs into `bytes`; `false` at the first character that is not a hex digit.
        func decode(into bytes: UnsafeMutableRawBufferPointer) -> Bool {
            for index in 0..<count {
                let high = Self.nibble(utf8[2 * index]), low = Self.nibble(utf8[2 * index + 1])
                guard high | low < 16 else { return false }
                bytes[index] = high << 4 | low
            }
            return true
        }
        var inline = InlineBytes()
        var overflow: [UInt8]?
        let digits: Bool
        if count <= Self.inlineCapacity {
            digits = withUnsafeMutableBytes(of: &inline.words, decode)
        } else {
            var ok = false
            overflow = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                ok = decode(into: UnsafeMutableRawBufferPointer(buffer))
                initialized = ok ? count : 0
            }
            digits = ok
        }
        // Every character must be a digit (the last of an odd count too) before the length is judged.
        guard digits, utf8.count % 2 == 0 || Self.nibble(utf8[utf8.count - 1]) < 16 else { throw Invalid(reason: .notHex) }
        guard utf8.count % 2 == 0 else { throw Invalid(reason: .oddLength) }
        self.inline = inline
        self.overflow = overflow
        self.byteCount = count
    }

    /// The value of hex digit `digit` (either case); 16 or more for any other character.
    @inline(__always)
    private static func nibble(_ digit: UInt8) -> UInt8 {
        let decimal = digit &- UInt8(ascii: "0")
        if decimal < 10 { return decimal }
        let letter = (digit | 0x20) &- UInt8(ascii: "a")
        return letter < 6 ? letter &+ 10 : 0xFF
    }

    /// Lends the token's bytes.
    package func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        if let overflow { return try overflow.withUnsafeBytes(body) }
        var words = inline.words
        return try withUnsafeBytes(of: &words) { try body(UnsafeRawBufferPointer(rebasing: $0.prefix(byteCount))) }
    }

    /// The length of the hex form.
    package var hexCount: Int { 2 * byteCount }

    /// The lower-case hex digit of `nibble` (0–15).
    @inline(__always)
    private static func digit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble
    }

    /// Calls `body` with each character of the hex form (lower case), in order.
    @inline(__always)
    package func forEachHexDigit(_ body: (UInt8) -> Void) {
        withBytes { bytes in
            for byte in bytes {
                body(Self.digit(byte >> 4))
                body(Self.digit(byte & 0x0F))
            }
        }
    }

    /// Appends the hex form (lower case) to `output`.
    package func appendHex(to output: inout [UInt8]) {
        output.reserveCapacity(output.count + hexCount)
        forEachHexDigit { output.append($0) }
    }

    /// The hex form (lower case), as APNs wants it in `:path`: a `String` made for the caller.
    package var hex: String {
        String(unsafeUninitializedCapacity: hexCount) { buffer in
            var index = 0
            forEachHexDigit { digit in
                buffer[index] = digit
                index += 1
            }
            return index
        }
    }

    /// Shortened form for logs: device tokens are personal data, so logs carry only a prefix.
    package var redacted: String {
        var prefix: [UInt8] = []
        withBytes { bytes in
            for byte in bytes.prefix(4) {
                prefix.append(Self.digit(byte >> 4))
                prefix.append(Self.digit(byte & 0x0F))
            }
        }
        return String(decoding: prefix, as: UTF8.self) + "…"
    }

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
