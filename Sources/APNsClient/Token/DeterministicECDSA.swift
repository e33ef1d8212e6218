import COpenSSL

/// ECDSA P-256/SHA-256 with the RFC 6979 (§3.2) deterministic nonce.
///
/// OpenSSL 3.0 ignores the "nonce-type" parameter, so the nonce is derived here (HMAC-SHA256 DRBG over the
/// private key and the message hash) and handed to `ECDSA_do_sign_ex` as k⁻¹ and r = (k·G).x mod n.
/// Same key + same message ⇒ same signature, which is what lets every replica mint the same token.
enum DeterministicECDSA {
    struct Signature: Equatable {
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

    static func hmac(_ key: [UInt8], _ parts: [UInt8]...) -> [UInt8] {
        let data = parts.flatMap { $0 }
        var out = [UInt8](repeating: 0, count: 32)
        key.withUnsafeBufferPointer { k in
            data.withUnsafeBufferPointer { d in
                out.withUnsafeMutableBufferPointer { o in
                    _ = copenssl_HMAC_SHA256(k.baseAddress, Int32(k.count), d.baseAddress, d.count, o.baseAddress)
                }
            }
        }
        return out
    }

    /// Signs SHA-256(`message`) with `key`. Returns nil only if OpenSSL fails (out of memory).
    static func sign(message: [UInt8], key: ECPrivateKey) -> Signature? {
        key.withKey { ec -> Signature? in
            guard let group = copenssl_EC_KEY_get0_group(ec), let priv = copenssl_EC_KEY_get0_private_key(ec),
                let ctx = BN_CTX_new()
            else { return nil }
            defer { BN_CTX_free(ctx) }
            guard let order = BN_new(), let h = BN_new(), let k = BN_new(), let kinv = BN_new(), let x = BN_new(),
                let rp = BN_new()
            else { return nil }
            defer { BN_free(order); BN_free(h); BN_clear_free(k); BN_clear_free(kinv); BN_free(x); BN_free(rp) }
            guard EC_GROUP_get_order(group, order, ctx) == 1 else { return nil }

            let digest = sha256(message)
            // int2octets(x): 32 bytes, big-endian.
            var xOctets = [UInt8](repeating: 0, count: 32)
            guard BN_bn2binpad(priv, &xOctets, 32) == 32 else { return nil }
            defer { for i in xOctets.indices { xOctets[i] = 0 } }
            // bits2octets(h1) = int2octets(bits2int(h1) mod q); qlen == hlen == 256 so bits2int is the identity.
            guard BN_bin2bn(digest, 32, h) != nil, BN_nnmod(h, h, order, ctx) == 1 else { return nil }
            var hOctets = [UInt8](repeating: 0, count: 32)
            guard BN_bn2binpad(h, &hOctets, 32) == 32 else { return nil }

            var v = [UInt8](repeating: 0x01, count: 32)
            var kk = [UInt8](repeating: 0x00, count: 32)
            kk = hmac(kk, v, [0x00], xOctets, hOctets)
            v = hmac(kk, v)
            kk = hmac(kk, v, [0x01], xOctets, hOctets)
            v = hmac(kk, v)
            var kBytes = [UInt8]()
            while true {
                v = hmac(kk, v)  // tlen reaches qlen (256 bits) after one block.
                kBytes = v
                guard BN_bin2bn(kBytes, 32, k) != nil else { return nil }
                if BN_is_zero(k) == 0 && BN_cmp(k, order) < 0 { break }
                kk = hmac(kk, v, [0x00])
                v = hmac(kk, v)
            }

            // rp = (k·G).x mod n, kinv = k⁻¹ mod n.
            guard let point = EC_POINT_new(group) else { return nil }
            defer { EC_POINT_free(point) }
            guard EC_POINT_mul(group, point, k, nil, nil, ctx) == 1,
                EC_POINT_get_affine_coordinates(group, point, x, nil, ctx) == 1,
                BN_nnmod(rp, x, order, ctx) == 1,
                BN_mod_inverse(kinv, k, order, ctx) != nil
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
