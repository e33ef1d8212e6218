/// An id APNs answers with (`apns-id`, `apns-request-id`, `apns-unique-id`). APNs sends UUIDs: one is kept as
/// its 16 bytes and its case, so reading it from an answer and writing it into a result allocates nothing.
/// Any other text (mixed case, not a UUID) is kept as it came.
package struct APNsID: Hashable, Sendable, CustomStringConvertible {
    private enum Storage: Hashable, Sendable {
        case uuid(high: UInt64, low: UInt64, uppercase: Bool)
        case text(String)
    }

    private let storage: Storage

    package init(_ text: String) {
        var utf8 = text
        storage = utf8.withUTF8 { Self.uuid(UnsafeRawBufferPointer($0)) } ?? .text(text)
    }

    /// From a header value's bytes, as nghttp2 hands them over.
    package init(utf8 bytes: UnsafeRawBufferPointer) {
        storage = Self.uuid(bytes) ?? .text(String(decoding: bytes, as: UTF8.self))
    }

    /// Whether the id is kept as its 16 bytes (a canonical UUID in one case), not as text (for tests).
    package var isCompact: Bool {
        if case .uuid = storage { true } else { false }
    }

    /// The text, as APNs sent it.
    package var description: String { withUTF8 { String(decoding: $0, as: UTF8.self) } }

    /// Lends the id's UTF-8 bytes (a UUID is written into a buffer on the stack).
    package func withUTF8<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        switch storage {
        case .text(let text):
            var text = text
            return text.withUTF8 { body(UnsafeRawBufferPointer($0)) }
        case .uuid(let high, let low, let uppercase):
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { buffer in
                // Computed, not looked up: a table in a global array is retained and released at each use.
                let letters: UInt8 = uppercase ? UInt8(ascii: "A") - 10 : UInt8(ascii: "a") - 10
                for digit in 0..<32 {
                    let word = digit < 16 ? high : low
                    let nibble = UInt8(truncatingIfNeeded: word >> (60 - 4 * UInt64(digit % 16))) & 0xF
                    buffer[Self.position(ofDigit: digit)] = nibble < 10 ? UInt8(ascii: "0") + nibble : letters + nibble
                }
                (buffer[8], buffer[13], buffer[18], buffer[23]) = (UInt8(ascii: "-"), UInt8(ascii: "-"), UInt8(ascii: "-"), UInt8(ascii: "-"))
                return body(UnsafeRawBufferPointer(buffer))
            }
        }
    }

    /// Where a canonical UUID's `digit`th hex digit (0–31) is in its text: 8-4-4-4-12, dashes between.
    @inline(__always)
    private static func position(ofDigit digit: Int) -> Int {
        digit + (digit >= 8 ? 1 : 0) + (digit >= 12 ? 1 : 0) + (digit >= 16 ? 1 : 0) + (digit >= 20 ? 1 : 0)
    }

    /// A byte's digit value (0–15) with `lowerBit` or `upperBit` for a letter, or `invalid`.
    private static let lowerBit: UInt8 = 0x10
    private static let upperBit: UInt8 = 0x20
    private static let invalid: UInt8 = 0x80
    @inline(__always)
    private static func digitValue(_ byte: UInt8) -> UInt8 {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): (byte - UInt8(ascii: "a") + 10) | lowerBit
        case UInt8(ascii: "A")...UInt8(ascii: "F"): (byte - UInt8(ascii: "A") + 10) | upperBit
        default: invalid
        }
    }

    /// A canonical UUID's 32 hex digits in one case (8-4-4-4-12), or `nil`.
    private static func uuid(_ bytes: UnsafeRawBufferPointer) -> Storage? {
        guard bytes.count == 36, bytes[8] == UInt8(ascii: "-"), bytes[13] == UInt8(ascii: "-"),
            bytes[18] == UInt8(ascii: "-"), bytes[23] == UInt8(ascii: "-")
        else { return nil }
        // Every digit's flags, or'ed together: one check for an invalid byte and for mixed case.
        var seen: UInt8 = 0
        var high: UInt64 = 0
        var low: UInt64 = 0
        for digit in 0..<32 {
            let value = digitValue(bytes[position(ofDigit: digit)])
            seen |= value
            if digit < 16 { high = high << 4 | UInt64(value & 0xF) } else { low = low << 4 | UInt64(value & 0xF) }
        }
        // Mixed case is kept as text, so that the id is written back exactly as it came.
        guard seen & invalid == 0, seen & (lowerBit | upperBit) != lowerBit | upperBit else { return nil }
        return .uuid(high: high, low: low, uppercase: seen & upperBit != 0)
    }
}
