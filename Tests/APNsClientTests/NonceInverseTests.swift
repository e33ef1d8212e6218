import COpenSSL
import Testing
@testable import APNsClient

/// k⁻¹ mod n for the ES256 signer, computed as kⁿ⁻² mod n in constant time (n, the P-256 group order, is prime).
@Suite struct NonceInverseTests {
    /// The P-256 group order n (SEC 2, FIPS 186-4 D.1.2.3).
    static let order = "FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551"

    /// Values whose inverse is known without the code under test: 1⁻¹ = 1, (n−1)⁻¹ = n−1, 2⁻¹ = (n+1)/2; and the
    /// RFC 6979 A.2.5 nonces, whose inverse is checked by k·k⁻¹ ≡ 1.
    @Test(arguments: [
        ("1", "1"),
        ("FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632550", "FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632550"),
        ("2", "7FFFFFFF800000007FFFFFFFFFFFFFFFDE737D56D38BCF4279DCE5617E3192A9"),
        ("A6E3C57DD01ABE90086538398355DD4C3B17AA873382B0F24D6129493D8AAD60", nil),
        ("D16B6AE827F17175E040871A1C7EC3500192C4C92677336EC2537ACAEE0008E0", nil),
    ] as [(String, String?)])
    func invertsModuloTheGroupOrder(k: String, expected: String?) throws {
        let ctx = try #require(BN_CTX_new())
        defer { BN_CTX_free(ctx) }
        var n: OpaquePointer? = nil
        var a: OpaquePointer? = nil
        _ = BN_hex2bn(&n, Self.order)
        _ = BN_hex2bn(&a, k)
        let (order, value) = (try #require(n), try #require(a))
        let inverse = try #require(BN_new())
        let product = try #require(BN_new())
        defer { BN_free(order); BN_free(value); BN_free(inverse); BN_free(product) }
        BN_set_flags(value, BN_FLG_CONSTTIME)

        #expect(DeterministicECDSA.inverse(inverse, of: value, primeModulus: order, ctx: ctx))
        #expect(BN_mod_mul(product, value, inverse, order, ctx) == 1)
        #expect(BN_is_one(product) == 1, "k·k⁻¹ mod n is not 1 for k = \(k)")
        if let expected {
            var e: OpaquePointer? = nil
            _ = BN_hex2bn(&e, expected)
            let wanted = try #require(e)
            defer { BN_free(wanted) }
            #expect(BN_cmp(inverse, wanted) == 0)
        }
    }

    @Test func zeroHasNoInverse() throws {
        let ctx = try #require(BN_CTX_new())
        defer { BN_CTX_free(ctx) }
        var n: OpaquePointer? = nil
        _ = BN_hex2bn(&n, Self.order)
        let order = try #require(n)
        let zero = try #require(BN_new())
        let inverse = try #require(BN_new())
        defer { BN_free(order); BN_free(zero); BN_free(inverse) }
        #expect(!DeterministicECDSA.inverse(inverse, of: zero, primeModulus: order, ctx: ctx))
    }
}
