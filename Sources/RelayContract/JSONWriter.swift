import APNsCore

/// Appends JSON to a byte buffer: the few shapes our records need, with correct string escaping.
///
/// Records embed the producer's `metadata` verbatim (already validated JSON), which `JSONEncoder` cannot
/// do, and writing bytes directly keeps the per-event cost to a few hundred nanoseconds.
package struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    private var needsComma = false

    package init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    /// Writes into `buffer`, emptied first (its capacity kept): `finish()` hands it back. For a caller that
    /// reuses one buffer for many records.
    package init(reusing buffer: inout [UInt8], capacity: Int) {
        swap(&bytes, &buffer)
        bytes.removeAll(keepingCapacity: true)
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    package mutating func field(_ key: String, _ value: String?) {
        writeKey(key)
        if let value { writeString(value) } else { writeNull() }
    }

    /// An APNs id, written from its bytes (a UUID is never a `String` on the way).
    package mutating func field(_ key: String, _ id: APNsID?) {
        writeKey(key)
        guard let id else { return writeNull() }
        id.withUTF8 { utf8 in
            // A UUID needs no escaping; other text goes through `writeString`.
            if utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                writeString(String(decoding: utf8, as: UTF8.self))
            } else {
                bytes.append(UInt8(ascii: "\""))
                bytes.append(contentsOf: utf8)
                bytes.append(UInt8(ascii: "\""))
            }
        }
    }

    package mutating func field(_ key: String, _ value: Int64?) {
        writeKey(key)
        if let value { bytes.append(contentsOf: String(value).utf8) } else { writeNull() }
    }

    package mutating func field(_ key: String, _ value: Int?) {
        field(key, value.map(Int64.init))
    }

    /// Writes `raw` as the value unchanged; `raw` must already be valid JSON (or `nil` for null).
    package mutating func rawField(_ key: String, _ raw: [UInt8]?) {
        writeKey(key)
        if let raw, !raw.isEmpty { bytes.append(contentsOf: raw) } else { writeNull() }
    }

    /// Writes a nested object whose fields `body` writes.
    package mutating func object(_ key: String, _ body: (inout JSONWriter) -> Void) {
        writeKey(key)
        // Into the same buffer (a nested writer would allocate a buffer of its own).
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
        body(&self)
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    package mutating func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    private mutating func writeKey(_ key: String) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
        writeString(key)
        bytes.append(UInt8(ascii: ":"))
    }

    private mutating func writeNull() {
        bytes.append(contentsOf: "null".utf8)
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    private mutating func writeString(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        // Nearly every string needs no escaping (ids, topics, keys): copied in one go when so.
        let copied = string.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
            guard !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
            bytes.append(contentsOf: utf8)
            return true
        }
        if copied == true {
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                bytes.append(Self.hex[Int(byte >> 4)])
                bytes.append(Self.hex[Int(byte & 0xF)])
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
