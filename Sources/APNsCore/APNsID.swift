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
                let digits = uppercase ? Self.upperDigits : Self.lowerDigits
                digits.withUnsafeBufferPointer { digits in
                    // The 16 digits of each half, last first, each into its place (dashes fall between them).
                    var word = low
                    for index in Self.digitPositions[16...].reversed() {
                        buffer[index] = digits[Int(word & 0xF)]
                        word >>= 4
                    }
                    word = high
                    for index in Self.digitPositions[..<16].reversed() {
                        buffer[index] = digits[Int(word & 0xF)]
                        word >>= 4
                    }
                }
                for index in Self.dashPositions { buffer[index] = UInt8(ascii: "-") }
                return body(UnsafeRawBufferPointer(buffer))
            }
        }
    }

    /// Where a canonical UUID's 32 digits are (8-4-4-4-12), and its dashes.
    private static let digitPositions: [Int] = (0..<36).filter { !dashPositions.contains($0) }
    private static let dashPositions = [8, 13, 18, 23]
    private static let lowerDigits = Array("0123456789abcdef".utf8)
    private static let upperDigits = Array("0123456789ABCDEF".utf8)

    /// Each byte's digit value (0–15) with `lowerBit` or `upperBit` for a letter, or `invalid`.
    private static let lowerBit: UInt8 = 0x10
    private static let upperBit: UInt8 = 0x20
    private static let invalid: UInt8 = 0x80
    private static let digitValues: [UInt8] = (0...255).map { byte -> UInt8 in
        switch UInt8(byte) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte) - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): (UInt8(byte) - UInt8(ascii: "a") + 10) | lowerBit
        case UInt8(ascii: "A")...UInt8(ascii: "F"): (UInt8(byte) - UInt8(ascii: "A") + 10) | upperBit
        default: invalid
        }
    }

    /// A canonical UUID's 32 hex digits in one case (8-4-4-4-12), or `nil`.
    private static func uuid(_ bytes: UnsafeRawBufferPointer) -> Storage? {
        guard bytes.count == 36, bytes[8] == UInt8(ascii: "-"), bytes[13] == UInt8(ascii: "-"),
            bytes[18] == UInt8(ascii: "-"), bytes[23] == UInt8(ascii: "-")
        else { return nil }
        return digitValues.withUnsafeBufferPointer { values in
            // Every digit's flags, or'ed together: one check for an invalid byte and for mixed case.
            var seen: UInt8 = 0
            var high: UInt64 = 0
            var low: UInt64 = 0
            for index in digitPositions[..<16] {
                let value = values[Int(bytes[index])]
                seen |= value
                high = high << 4 | UInt64(value & 0xF)
            }
            for index in digitPositions[16...] {
                let value = values[Int(bytes[index])]
                seen |= value
                low = low << 4 | UInt64(value & 0xF)
            }
            // Mixed case is kept as text, so that the id is written back exactly as it came.
            guard seen & invalid == 0, seen & (lowerBit | upperBit) != lowerBit | upperBit else { return nil }
            return .uuid(high: high, low: low, uppercase: seen & upperBit != 0)
        }
    }
}
