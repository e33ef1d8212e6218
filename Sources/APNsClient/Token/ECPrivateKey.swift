import COpenSSL

/// Owns one OpenSSL `EC_KEY` (P-256) and lends it only through `withKey`.
///
/// The EC_KEY API is what `ECDSA_do_sign_ex` takes, which is the only OpenSSL 3.0 entry point that accepts a
/// caller-computed nonce (needed for deterministic RFC 6979 signatures).
final class ECPrivateKey {
    private let key: OpaquePointer

    /// Parses a PKCS#8 (or SEC1) PEM private key, as in Apple's `.p8` files.
    init(pem: [UInt8]) throws(APNsClientError) {
        ERR_clear_error()
        let pkey: OpaquePointer? = pem.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            // No passphrase callback: .p8 keys are not encrypted; an encrypted key fails here.
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let pkey else {
            let text = String(decoding: pem, as: UTF8.self)
            let hint = text.contains("-----BEGIN")
                ? (text.contains("ENCRYPTED") ? "it is encrypted; Apple's .p8 keys are not"
                                              : "its PEM block is not a readable private key")
                : "it holds no PEM block; an APNs .p8 key starts with -----BEGIN PRIVATE KEY-----"
            throw APNsClientError(.invalidCredential, "not a PEM private key: \(hint)", openSSLError: ERR_get_error())
        }
        defer { EVP_PKEY_free(pkey) }  // get1 below took its own reference to the EC_KEY.
        let apple = "APNs signs provider tokens with ES256: a PKCS#8 EC key on curve P-256, the .p8 file Apple's developer account (Keys) gives"
        guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_EC, let ec = copenssl_EVP_PKEY_get1_EC_KEY(pkey) else {
            let kind = switch EVP_PKEY_get_base_id(pkey) {
            case EVP_PKEY_RSA: "an RSA key"
            case EVP_PKEY_ED25519: "an Ed25519 key"
            default: "not an EC key"
            }
            ERR_clear_error()
            throw APNsClientError(.invalidCredential, "the key is \(kind), not P-256: \(apple)")
        }
        guard let group = copenssl_EC_KEY_get0_group(ec), EC_GROUP_get_curve_name(group) == NID_X9_62_prime256v1 else {
            let curve = copenssl_EC_KEY_get0_group(ec).flatMap { OBJ_nid2sn(EC_GROUP_get_curve_name($0)) }.map { String(cString: $0) } ?? "unknown"
            copenssl_EC_KEY_free(ec)
            throw APNsClientError(.invalidCredential, "the key is an EC key on curve \(curve), not P-256 (prime256v1): \(apple)")
        }
        self.key = ec
    }

    /// Builds a key from the raw 32-byte private scalar (tests: RFC 6979 vectors).
    init(rawPrivateKey: [UInt8]) throws(APNsClientError) {
        guard let ec = copenssl_EC_KEY_new_by_curve_name(NID_X9_62_prime256v1) else {
            throw APNsClientError(.invalidCredential, "cannot create a P-256 key", openSSLError: ERR_get_error())
        }
        let ok: Bool = rawPrivateKey.withUnsafeBufferPointer { buf in
            guard let d = BN_bin2bn(buf.baseAddress, Int32(buf.count), nil) else { return false }
            defer { BN_clear_free(d) }
            let group = copenssl_EC_KEY_get0_group(ec)
            guard let pub = EC_POINT_new(group) else { return false }
            defer { EC_POINT_free(pub) }
            return EC_POINT_mul(group, pub, d, nil, nil, nil) == 1
                && copenssl_EC_KEY_set_private_key(ec, d) == 1
                && copenssl_EC_KEY_set_public_key(ec, pub) == 1
        }
        guard ok else {
            copenssl_EC_KEY_free(ec)
            throw APNsClientError(.invalidCredential, "invalid raw P-256 private key", openSSLError: ERR_get_error())
        }
        self.key = ec
    }

    deinit { copenssl_EC_KEY_free(key) }

    func withKey<R>(_ body: (OpaquePointer) throws -> R) rethrows -> R { try body(key) }
}
