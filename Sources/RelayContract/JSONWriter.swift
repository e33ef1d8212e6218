import APNsCore

/// Appends JSON to a byte buffer: the few shapes our records need, with correct string escaping.
///
/// Records embed the producer's `metadata` verbatim (already validated JSON), which `JSONEncoder` cannot
/// do, and writing bytes directly keeps the per-event cost to a few hundred nanoseconds. Each member is
/// written in one reservation of the buffer (`Array.append(addingCapacity:initializingWith:)`: one
/// uniqueness and capacity check per member, not per byte), keys are `StaticString`s written without a
/// scan, and integers are written two digits at a time (a result record into a reused buffer: 592 → ~320 ns
/// in the stages bench, #39).
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

    package mutating func field(_ key: StaticString, _ value: String?) {
        guard var value else { return null(key) }
        value.withUTF8 { utf8 in
            let text = UnsafeRawBufferPointer(utf8)
            let length = Self.quotedLength(text)
            member(key, bound: length) { Self.writeString(text, quotedLength: length, &$0) }
        }
    }

    /// An APNs id, written from its bytes (a UUID is never a `String` on the way).
    package mutating func field(_ key: StaticString, _ id: APNsID?) {
        guard let id else { return null(key) }
        id.withUTF8 { utf8 in
            let length = Self.quotedLength(utf8)
            member(key, bound: length) { Self.writeString(utf8, quotedLength: length, &$0) }
        }
    }

    /// A member whose key is not known at compile time (a log line's metadata): the key is escaped too.
    package mutating func field(named key: String, _ value: String) {
        var key = key, value = value
        let comma = needsComma
        needsComma = true
        key.withUTF8 { keyUTF8 in
            value.withUTF8 { valueUTF8 in
                let name = UnsafeRawBufferPointer(keyUTF8), text = UnsafeRawBufferPointer(valueUTF8)
                let nameLength = Self.quotedLength(name), textLength = Self.quotedLength(text)
                bytes.append(addingCapacity: 2 + nameLength + textLength) { out in
                    if comma { out.append(UInt8(ascii: ",")) }
                    Self.writeString(name, quotedLength: nameLength, &out)
                    out.append(UInt8(ascii: ":"))
                    Self.writeString(text, quotedLength: textLength, &out)
                }
            }
        }
    }

    package mutating func field(_ key: StaticString, _ value: Int64?) {
        guard let value else { return null(key) }
        member(key, bound: 20) { Self.writeInteger(value, &$0) }
    }

    package mutating func field(_ key: StaticString, _ value: Int?) {
        field(key, value.map(Int64.init))
    }

    /// Writes `raw` as the value unchanged; `raw` must already be valid JSON (or `nil` for null).
    package mutating func rawField(_ key: StaticString, _ raw: [UInt8]?) {
        guard let raw, !raw.isEmpty else { return null(key) }
        raw.withUnsafeBytes { raw in
            member(key, bound: raw.count) { Self.copy(raw, &$0) }
        }
    }

    /// Writes a nested object whose fields `body` writes, into the same buffer.
    package mutating func object(_ key: StaticString, _ body: (inout JSONWriter) -> Void) {
        member(key, bound: 1) { $0.append(UInt8(ascii: "{")) }
        needsComma = false
        body(&self)
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    package mutating func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    private mutating func null(_ key: StaticString) {
        member(key, bound: 4) { out in
            for byte in "null".utf8 { out.append(byte) }
        }
    }

    /// Writes `,"key":` and the value `write` writes, in one reservation: `bound` is the most the value takes.
    @inline(__always)
    private mutating func member(_ key: StaticString, bound: Int, _ write: (inout OutputSpan<UInt8>) -> Void) {
        let comma = needsComma
        needsComma = true
        // (`withUTF8Buffer`: a one-scalar `StaticString` has no pointer to its bytes.)
        key.withUTF8Buffer { name in
            // Keys are written as they are: every one is a plain name in our code.
            assert(Self.quotedLength(UnsafeRawBufferPointer(name)) == name.count + 2, "JSONWriter: key \(key) needs escaping")
            bytes.append(addingCapacity: name.count + 4 + bound) { out in
                if comma { out.append(UInt8(ascii: ",")) }
                out.append(UInt8(ascii: "\""))
                Self.copy(UnsafeRawBufferPointer(name), &out)
                out.append(UInt8(ascii: "\""))
                out.append(UInt8(ascii: ":"))
                write(&out)
            }
        }
    }

    /// How many bytes `text` takes written as a JSON string: its quotes, and each byte that needs escaping
    /// as its escape (`\"`, `\\`, `\n`, `\r`, `\t`: two bytes; any other byte below 0x20: `\u00XX`, six).
    private static func quotedLength(_ text: UnsafeRawBufferPointer) -> Int {
        var extra = 0
        // One pass without early exit (nearly every string needs no escaping).
        for byte in text {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"): extra += 1
            case 0..<0x20: extra += 5
            default: break
            }
        }
        return text.count + 2 + extra
    }

    private static func copy(_ source: UnsafeRawBufferPointer, _ out: inout OutputSpan<UInt8>) {
        guard !source.isEmpty else { return }
        out.withUnsafeMutableBufferPointer { buffer, count in
            precondition(source.count <= buffer.count - count, "JSONWriter: a field's bound was too small")
            UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[count...])).copyMemory(from: source)
            count += source.count
        }
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// Writes `text` quoted and escaped; `quotedLength` is `quotedLength(text)`.
    private static func writeString(_ text: UnsafeRawBufferPointer, quotedLength: Int, _ out: inout OutputSpan<UInt8>) {
        out.append(UInt8(ascii: "\""))
        if quotedLength == text.count + 2 {  // nothing to escape (ids, topics): one copy
            copy(text, &out)
        } else {
            for byte in text {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(byte)
                case UInt8(ascii: "\n"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
                case UInt8(ascii: "\r"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "r"))
                case UInt8(ascii: "\t"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "t"))
                case 0..<0x20:
                    for escape in "\\u00".utf8 { out.append(escape) }
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 0xF)])
                default:
                    out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// "00", "01", … "99": an integer is written two digits at a time.
    private static let digitPairs: StaticString = """
        00010203040506070809101112131415161718192021222324252627282930313233343536373839\
        40414243444546474849505152535455565758596061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899
        """

    /// Decimal digits, most significant first.
    private static func writeInteger(_ value: Int64, _ out: inout OutputSpan<UInt8>) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for Int64's 19 digits
        let pairs = digitPairs.utf8Start
        withUnsafeMutableBytes(of: &digits) { buffer in
            var index = buffer.count
            while magnitude >= 10 {
                let pair = Int(magnitude % 100) * 2
                magnitude /= 100
                index -= 2
                buffer[index] = pairs[pair]
                buffer[index + 1] = pairs[pair + 1]
            }
            if magnitude > 0 || index == buffer.count {
                index -= 1
                buffer[index] = UInt8(ascii: "0") + UInt8(magnitude)
            }
            copy(UnsafeRawBufferPointer(rebasing: buffer[index...]), &out)
        }
    }
}
