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
    }

    @Test func redactsForLogs() throws {
        let token = try DeviceToken(hex: String(repeating: "0123456789abcdef", count: 4))
        #expect(token.description == "01234567…")
        #expect(!"\(token)".contains(token.hex))
    }
}
