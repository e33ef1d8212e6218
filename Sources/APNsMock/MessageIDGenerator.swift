/// Cheap `apns-id` / `apns-unique-id` values: a random 64-bit prefix per generator and a counter, formatted
/// as a canonical UUID: upper-case for `apns-id` (APNs has answered upper-case ids), lower-case for
/// `apns-unique-id`. Foundation's `UUID()` costs ~20% of
/// the mock's throughput; this costs one small string.
struct MessageIDGenerator {
    private let prefix: UInt64
    private var counter: UInt64

    init() {
        var generator = SystemRandomNumberGenerator()
        prefix = generator.next()
        counter = generator.next() & 0x0000_FFFF_FFFF_FFFF
    }

    mutating func next(lowercase: Bool = false) -> String {
        counter &+= 1
        let high = prefix
        let low = counter
        return String(unsafeUninitializedCapacity: 36) { buffer in
            let digits: StaticString = lowercase ? "0123456789abcdef" : "0123456789ABCDEF"
            var out = 0
            digits.withUTF8Buffer { digits in
                for nibble in 0..<32 {
                    if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 {
                        buffer[out] = UInt8(ascii: "-")
                        out += 1
                    }
                    let word = nibble < 16 ? high : low
                    let shift = UInt64(60 - 4 * (nibble % 16))
                    buffer[out] = digits[Int((word >> shift) & 0xF)]
                    out += 1
                }
            }
            return out
        }
    }
}
