import APNsCore
import Foundation
import RelayContract
import Testing

/// `JSONWriter` against Foundation's parser: what it writes reads back as what went in, for every class
/// of byte a string can hold and every magnitude of integer (the expected values are the inputs, never
/// the writer's own output).
@Suite struct JSONWriterTests {
    private func parsed(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test(arguments: [
        0, 1, 9, 10, 11, 99, 100, 101, 999, 1_000, 65_535, 1_767_139_200_042, -1, -10, -99, -100, -1_234_567,
        Int64.max, Int64.min, Int64.max - 1, Int64.min + 1,
    ])
    func integersReadBackAsWritten(_ value: Int64) throws {
        var writer = JSONWriter()
        writer.field("n", value)
        let bytes = writer.finish()
        // Foundation reads big integers as NSNumber; compare the text, which must be Swift's own rendering.
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"n":\#(value)}"#)
        #expect((try parsed(bytes)["n"] as? NSNumber)?.int64Value == value)
    }

    /// Every byte below 0x20, the quote and the backslash are escaped; everything else (UTF-8 included) is
    /// copied as it is.
    @Test func everyControlCharacterQuoteAndBackslashIsEscaped() throws {
        let controls = String(decoding: (0..<0x20).map { UInt8($0) }, as: UTF8.self)
        let texts = [
            controls, "a\"b", "back\\slash", "tab\there", "line\nbreak\r", "café 😀", "", "plain-id-123",
            String(repeating: "\"", count: 40),
        ]
        for text in texts {
            var writer = JSONWriter(capacity: 1)  // the smallest start: members grow the buffer
            writer.field("text", text)
            writer.field(named: "key \"\(text.prefix(3))\"", text)
            let bytes = writer.finish()
            #expect(!bytes.contains { $0 < 0x20 }, "a raw control byte in \(bytes)")
            let json = try parsed(bytes)
            #expect(json["text"] as? String == text)
            #expect(json["key \"\(text.prefix(3))\""] as? String == text)
        }
    }

    /// Bytes that need no escaping, multi-byte UTF-8 among them, are written as they are.
    @Test func utf8AndPlainTextAreCopiedAsTheyAre() {
        var writer = JSONWriter()
        writer.field("text", "café 😀 <&> /")
        #expect(writer.finish() == Array(#"{"text":"café 😀 <&> /"}"#.utf8))
    }

    /// An APNs id is written as APNs sent it: a UUID from its 16 bytes, other text escaped.
    @Test func apnsIDsAreWrittenFromTheirBytesAndEscaped() {
        var writer = JSONWriter()
        writer.field("uuid", APNsID("7c0cd09d-9a4b-4b1e-9d6e-2f0e6f7b2c11"))
        writer.field("upper", APNsID("7C0CD09D-9A4B-4B1E-9D6E-2F0E6F7B2C11"))
        writer.field("text", APNsID("a\"b\n"))
        writer.field("none", nil as APNsID?)
        let expected = #"{"uuid":"7c0cd09d-9a4b-4b1e-9d6e-2f0e6f7b2c11","upper":"7C0CD09D-9A4B-4B1E-9D6E-2F0E6F7B2C11","#
            + #""text":"a\"b\n","none":null}"#
        #expect(String(decoding: writer.finish(), as: UTF8.self) == expected)
    }

    @Test func nullsRawValuesAndNestedObjects() throws {
        var buffer: [UInt8] = Array("left over from the last record".utf8)
        var writer = JSONWriter(reusing: &buffer, capacity: 8)
        writer.field("missing", nil as String?)
        writer.field("count", nil as Int?)
        writer.rawField("raw", Array(#"{"a":[1,2,{"b":null}]}"#.utf8))
        writer.rawField("empty", [])
        writer.object("nested") { nested in
            nested.field("x", 1 as Int?)
            nested.field("y", "z")
        }
        writer.field("after", 2 as Int?)
        buffer = writer.finish()
        let expected = #"{"missing":null,"count":null,"raw":{"a":[1,2,{"b":null}]},"empty":null,"#
            + #""nested":{"x":1,"y":"z"},"after":2}"#
        #expect(String(decoding: buffer, as: UTF8.self) == expected)
    }
}
