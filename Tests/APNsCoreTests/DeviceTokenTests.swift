import Testing
@testable import APNsCore

@Suite struct DeviceTokenTests {
    @Test(arguments: [64, 108, 160, 200])
    func acceptsEvenLengthHexOfAnySize(length: Int) throws {
        let hex = String(repeating: "aB", count: length / 2)
        let token = try DeviceToken(hex: hex)
        #expect(token.hex == hex.lowercased())
        #expect(token.byteCount == length / 2)
    }

    @Test func rejectsEmptyNonHexAndOddLength() {
        #expect(throws: DeviceToken.Invalid(reason: .empty)) { try DeviceToken(hex: "") }
        #expect(throws: DeviceToken.Invalid(reason: .notHex)) { try DeviceToken(hex: "zz") }
        #expect(throws: DeviceToken.Invalid(reason: .notHex)) { try DeviceToken(hex: "<abcd>") }
        #expect(throws: DeviceToken.Invalid(reason: .oddLength)) { try DeviceToken(hex: "abc") }
        // A character that is not a digit is named first, wherever it is, even when the length is odd too.
        #expect(throws: DeviceToken.Invalid(reason: .notHex)) { try DeviceToken(hex: "abz") }
        #expect(throws: DeviceToken.Invalid(reason: .notHex)) { try DeviceToken(hex: "gbc") }
        #expect(throws: DeviceToken.Invalid(reason: .notHex)) { try DeviceToken(hex: String(repeating: "ab", count: 60) + "@f") }
        #expect(throws: DeviceToken.Invalid(reason: .notHex)) { try DeviceToken(hex: "0G") }
        #expect(throws: DeviceToken.Invalid(reason: .notHex)) { try DeviceToken(hex: "é0") }
    }

    @Test func redactsForLogs() throws {
        let token = try DeviceToken(hex: String(repeating: "0123456789abcdef", count: 4))
        #expect(token.description == "01234567…")
        #expect(!"\(token)".contains(token.hex))
    }

    /// Short tokens sit in the value, long ones in an array: either way the bytes, the hex and equality are
    /// the token's (the bytes here written out by hand, not by the code under test).
    @Test func bytesAndHexOfInlineAndLongTokens() throws {
        let short = try DeviceToken(hex: "00FF10ab")
        #expect(short.withBytes { Array($0) } == [0x00, 0xFF, 0x10, 0xAB])
        #expect(short.hex == "00ff10ab" && short.hexCount == 8)
        var written: [UInt8] = Array("/3/device/".utf8)
        short.appendHex(to: &written)
        #expect(String(decoding: written, as: UTF8.self) == "/3/device/00ff10ab")
        let longHex = String(repeating: "0f", count: 40) + "e1"  // 41 bytes: past the inline capacity
        let long = try DeviceToken(hex: longHex)
        #expect(long.byteCount == 41 && long.withBytes { Array($0) } == Array(repeating: 0x0F, count: 40) + [0xE1])
        #expect(long.hex == longHex)
        #expect(try DeviceToken(hex: longHex.uppercased()) == long)
        let full = String(repeating: "a0", count: DeviceToken.inlineCapacity)
        #expect(try DeviceToken(hex: full) != DeviceToken(hex: full + "00"), "a trailing zero byte is part of the token")
        #expect(try DeviceToken(hex: "00") != DeviceToken(hex: "0000"))
        #expect(Set([try DeviceToken(hex: full), try DeviceToken(hex: full.uppercased())]).count == 1)
    }
}
