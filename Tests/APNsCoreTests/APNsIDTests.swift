import APNsCore
import Testing

/// An APNs id is written back exactly as APNs sent it, whichever form it was kept in.
@Suite struct APNsIDTests {
    @Test(arguments: [
        ("123e4567-e89b-12d3-a456-426614174000", true),  // lower case: kept as 16 bytes
        ("7C0CD09D-9A4B-4B1E-9D6E-2F0E6F7B2C12", true),  // upper case, as APNs has answered: kept as 16 bytes
        ("ffffffff-ffff-ffff-ffff-ffffffffffff", true),
        ("00000000-0000-0000-0000-000000000000", true),  // digits only: either case writes them back
        ("123E4567-e89b-12d3-a456-426614174000", false),  // mixed case: kept as text
        ("123e4567e89b12d3a456426614174000", false),  // no dashes: text
        ("123e4567-e89b-12d3-a456-42661417400g", false),  // not hex: text
        ("g23e4567-e89b-12d3-a456-426614174000", false),  // not hex in the first half: text
        ("123E4567-E89B-12D3-A456-42661417400G", false),  // upper case, not hex: text
        ("123e4567-e89b-12d3-a456-4266141740~0", false),  // a byte just above the letters' range: text
        ("123e4567-e89b-12d3-a456-4266141740é", false),  // 36 bytes, two of them above 0x7F: text
        ("123e4567-e89b-12d3-a456_426614174000", false),  // a dash missing: text
        ("x", false),
        ("", false),
    ])
    func theTextComesBackAsItCame(_ text: String, compact: Bool) {
        #expect(APNsID(text).description == text)
        #expect(APNsID(text).isCompact == compact)
        let fromBytes = Array(text.utf8).withUnsafeBytes { APNsID(utf8: $0) }
        #expect(fromBytes.description == text)
        #expect(fromBytes.isCompact == compact)
        #expect(fromBytes == APNsID(text))
    }

    @Test func idsCompareByValueAndCase() {
        #expect(APNsID("123e4567-e89b-12d3-a456-426614174000") != APNsID("123E4567-E89B-12D3-A456-426614174000"))
        #expect(APNsID("123e4567-e89b-12d3-a456-426614174000") != APNsID("123e4567-e89b-12d3-a456-426614174001"))
    }

    @Test func aResponseReadsItsIDsAsText() {
        var response = APNsResponse(status: 200, apnsID: "7C0CD09D-9A4B-4B1E-9D6E-2F0E6F7B2C12")
        #expect(response.apnsID == "7C0CD09D-9A4B-4B1E-9D6E-2F0E6F7B2C12")
        #expect(response.apnsUniqueID == nil)
        response.apnsUniqueID = "u"
        #expect(response.uniqueID == APNsID("u"))
    }
}
