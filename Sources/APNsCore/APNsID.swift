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
                let letters: UInt8 = uppercase ? UInt8(ascii: "A") : UInt8(ascii: "a")
                var nibble = 0
                for index in 0..<36 {
                    if index == 8 || index == 13 || index == 18 || index == 23 {
                        buffer[index] = UInt8(ascii: "-")
                        continue
                    }
                    let word = nibble < 16 ? high : low
                    let value = UInt8(truncatingIfNeeded: word >> UInt64(60 - 4 * (nibble % 16))) & 0xF
                    buffer[index] = value < 10 ? UInt8(ascii: "0") + value : letters + value - 10
                    nibble += 1
                }
                return body(UnsafeRawBufferPointer(buffer))
            }
        }
    }

    /// A canonical UUID's 32 hex digits in one case (8-4-4-4-12), or `nil`.
    private static func uuid(_ bytes: UnsafeRawBufferPointer) -> Storage? {
        guard bytes.count == 36 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        var sawUpper = false
        var sawLower = false
        var nibble = 0
        for index in 0..<36 {
            let byte = bytes[index]
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return nil }
                continue
            }
            let value: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = byte - UInt8(ascii: "a") + 10; sawLower = true
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = byte - UInt8(ascii: "A") + 10; sawUpper = true
            default: return nil
            }
            if nibble < 16 { high = high << 4 | UInt64(value) } else { low = low << 4 | UInt64(value) }
            nibble += 1
        }
        // Mixed case is kept as text, so that the id is written back exactly as it came.
        guard !(sawUpper && sawLower) else { return nil }
        return .uuid(high: high, low: low, uppercase: sawUpper)
    }
}
