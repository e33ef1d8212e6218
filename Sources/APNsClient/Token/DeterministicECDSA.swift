import COpenSSL

/// ECDSA P-256/SHA-256 with the RFC 6979 (§3.2) deterministic nonce.
///
/// OpenSSL 3.0 ignores the "nonce-type" parameter, so the nonce is derived here (HMAC-SHA256 DRBG over the
/// private key and the message hash) and handed to `ECDSA_do_sign_ex` as k⁻¹ and r = (k·G).x mod n.
/// Same key + same message ⇒ same signature, which is what lets every replica mint the same token.
enum DeterministicECDSA {
    struct Signature: Equatable {
        /// The nonce, for the RFC 6979 known-answer tests only: with it and the signature anyone can compute the
        /// private key, so no caller outside the tests may keep it.
        var k: [UInt8]
        var r: [UInt8]
        var s: [UInt8]
        /// JWS form: r‖s, 64 bytes.
        var raw: [UInt8] { r + s }
    }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBufferPointer { b in out.withUnsafeMutableBufferPointer { o in _ = SHA256(b.baseAddress, b.count, o.baseAddress) } }
        return out
    }

    /// Signs SHA-256(`message`) with `key`. Returns nil only if OpenSSL fails (out of memory).
    ///
    /// Every secret intermediate (the private key's octets, the HMAC-DRBG state K and V, the nonce k and k⁻¹)
    /// lives in memory that is cleansed before returning; k⁻¹ is computed in constant time.
    static func sign(message: [UInt8], key: ECPrivateKey) -> Signature? {
        key.withKey { ec -> Signature? in
            guard let group = copenssl_EC_KEY_get0_group(ec), let priv = copenssl_EC_KEY_get0_private_key(ec),
                let ctx = BN_CTX_secure_new() ?? BN_CTX_new()
            else { return nil }
            defer { BN_CTX_free(ctx) }
            guard let order = BN_new(), let h = BN_new(), let k = BN_new(), let kinv = BN_new(), let x = BN_new(),
                let rp = BN_new()
            else { return nil }
            defer { BN_free(order); BN_free(h); BN_clear_free(k); BN_clear_free(kinv); BN_free(x); BN_free(rp) }
            // k enters the scalar multiplication and the inversion: both take their constant-time paths for it.
            BN_set_flags(k, BN_FLG_CONSTTIME)
            guard EC_GROUP_get_order(group, order, ctx) == 1 else { return nil }

            let digest = sha256(message)
            // bits2octets(h1) = int2octets(bits2int(h1) mod q); qlen == hlen == 256 so bits2int is the identity.
            guard BN_bin2bn(digest, 32, h) != nil, BN_nnmod(h, h, order, ctx) == 1 else { return nil }
            var hOctets = [UInt8](repeating: 0, count: 32)
            guard BN_bn2binpad(h, &hOctets, 32) == 32 else { return nil }

            let secrets = SecretScratch()
            // int2octets(x): 32 bytes, big-endian.
            guard BN_bn2binpad(priv, secrets.x, 32) == 32 else { return nil }
            let (K, V) = (secrets.K, secrets.V)
            K.update(repeating: 0x00, count: 32)
            V.update(repeating: 0x01, count: 32)
            // RFC 6979 §3.2 d–g: K = HMAC_K(V ‖ 0x00 ‖ x ‖ h1), V = HMAC_K(V), then again with 0x01.
            for separator: UInt8 in [0x00, 0x01] {
                secrets.hmacIntoK(separator: separator, hash: hOctets)
                secrets.hmacIntoV()
            }
            var kBytes = [UInt8](repeating: 0, count: 32)
            while true {
                secrets.hmacIntoV()  // tlen reaches qlen (256 bits) after one block.
                guard BN_bin2bn(V, 32, k) != nil else { return nil }
                if BN_is_zero(k) == 0 && BN_cmp(k, order) < 0 { break }
                secrets.hmacIntoK(separator: 0x00)
                secrets.hmacIntoV()
            }
            kBytes.withUnsafeMutableBufferPointer { $0.baseAddress!.update(from: V, count: 32) }

            // rp = (k·G).x mod n, kinv = k⁻¹ mod n.
            guard let point = EC_POINT_new(group) else { return nil }
            defer { EC_POINT_clear_free(point) }
            guard EC_POINT_mul(group, point, k, nil, nil, ctx) == 1,
                EC_POINT_get_affine_coordinates(group, point, x, nil, ctx) == 1,
                BN_nnmod(rp, x, order, ctx) == 1,
                inverse(kinv, of: k, primeModulus: order, ctx: ctx)
            else { return nil }

            guard let sig = copenssl_ECDSA_do_sign_ex(digest, 32, kinv, rp, ec) else { return nil }
            defer { ECDSA_SIG_free(sig) }
            var rOut = [UInt8](repeating: 0, count: 32)
            var sOut = [UInt8](repeating: 0, count: 32)
            guard let r = ECDSA_SIG_get0_r(sig), let s = ECDSA_SIG_get0_s(sig),
                BN_bn2binpad(r, &rOut, 32) == 32, BN_bn2binpad(s, &sOut, 32) == 32
            else { return nil }
            return Signature(k: kBytes, r: rOut, s: sOut)
        }
    }

    /// `result` = `a`⁻¹ mod `n` for a prime `n`, as aⁿ⁻² mod n (Fermat) by Montgomery exponentiation in constant
    /// time: `BN_mod_inverse`'s binary extended Euclid branches on the bits of a secret nonce.
    /// - Returns: false if OpenSSL fails (out of memory), or `a` is 0 mod n.
    static func inverse(_ result: OpaquePointer, of a: OpaquePointer, primeModulus n: OpaquePointer, ctx: OpaquePointer) -> Bool {
        guard let exponent = BN_dup(n) else { return false }
        defer { BN_free(exponent) }  // n − 2 is public.
        guard BN_sub_word(exponent, 2) == 1,
            BN_mod_exp_mont_consttime(result, a, exponent, n, ctx, nil) == 1
        else { return false }
        return BN_is_zero(result) == 0
    }

    /// The HMAC-DRBG's state and the private key's octets, in one allocation that is cleansed when released.
    // Raw memory rather than arrays: an array reassigned or grown leaves its old, uncleared buffer to the allocator.
    private final class SecretScratch {
        private static let size = 32 * 4 + 32 + 1 + 32 + 32  // K, V, x, HMAC output, message (V ‖ sep ‖ x ‖ h1).
        private let base = UnsafeMutablePointer<UInt8>.allocate(capacity: SecretScratch.size)
        var K: UnsafeMutablePointer<UInt8> { base }
        var V: UnsafeMutablePointer<UInt8> { base + 32 }
        var x: UnsafeMutablePointer<UInt8> { base + 64 }
        private var output: UnsafeMutablePointer<UInt8> { base + 96 }
        private var message: UnsafeMutablePointer<UInt8> { base + 128 }

        init() { base.initialize(repeating: 0, count: Self.size) }

        deinit {
            OPENSSL_cleanse(base, Self.size)
            base.deallocate()
        }

        /// K = HMAC_K(V ‖ separator), or HMAC_K(V ‖ separator ‖ x ‖ h1) when `hash` (h1's octets) is given.
        func hmacIntoK(separator: UInt8, hash: [UInt8]? = nil) {
            message.update(from: V, count: 32)
            message[32] = separator
            var length = 33
            if let hash {
                (message + length).update(from: x, count: 32)
                hash.withUnsafeBufferPointer { (message + length + 32).update(from: $0.baseAddress!, count: 32) }
                length += 64
            }
            _ = copenssl_HMAC_SHA256(K, 32, message, length, output)
            K.update(from: output, count: 32)
            OPENSSL_cleanse(message, length)
        }

        /// V = HMAC_K(V).
        func hmacIntoV() {
            _ = copenssl_HMAC_SHA256(K, 32, V, 32, output)
            V.update(from: output, count: 32)
        }
    }

    /// Verifies a raw r‖s signature over SHA-256(`message`) (used by tests and as a self-check).
    static func verify(message: [UInt8], raw: [UInt8], key: ECPrivateKey) -> Bool {
        guard raw.count == 64, let sig = ECDSA_SIG_new() else { return false }
        defer { ECDSA_SIG_free(sig) }
        guard let r = BN_bin2bn(raw, 32, nil) else { return false }
        guard let s = BN_bin2bn(Array(raw[32...]), 32, nil) else { BN_free(r); return false }
        guard ECDSA_SIG_set0(sig, r, s) == 1 else { BN_free(r); BN_free(s); return false }  // set0 took r and s.
        let digest = sha256(message)
        return key.withKey { copenssl_ECDSA_do_verify(digest, 32, sig, $0) == 1 }
    }
}
