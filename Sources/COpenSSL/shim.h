#ifndef APNS_RELAY_COPENSSL_SHIM_H
#define APNS_RELAY_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pkcs12.h>
#include <openssl/rand.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

// Function-like macros do not import into Swift; these wrappers stand in for them.
static inline long copenssl_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}
static inline int copenssl_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}
static inline void copenssl_OPENSSL_free(void *p) { OPENSSL_free(p); }
static inline long copenssl_BIO_get_mem_data(BIO *bio, char **out) { return BIO_get_mem_data(bio, out); }
static inline long copenssl_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
static inline void copenssl_SSL_CTX_set_read_ahead(SSL_CTX *ctx, int yes) { SSL_CTX_set_read_ahead(ctx, yes); }
static inline int copenssl_BN_num_bytes(const BIGNUM *bn) { return BN_num_bytes(bn); }

// The EC_KEY API is deprecated in OpenSSL 3.0 but ECDSA_do_sign_ex (the only way to pass our own
// RFC 6979 nonce) needs an EC_KEY; these wrappers keep the deprecation noise in one place.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static inline EC_KEY *copenssl_EVP_PKEY_get1_EC_KEY(EVP_PKEY *pkey) { return EVP_PKEY_get1_EC_KEY(pkey); }
static inline void copenssl_EC_KEY_free(EC_KEY *key) { EC_KEY_free(key); }
static inline const EC_GROUP *copenssl_EC_KEY_get0_group(const EC_KEY *key) { return EC_KEY_get0_group(key); }
static inline const BIGNUM *copenssl_EC_KEY_get0_private_key(const EC_KEY *key) { return EC_KEY_get0_private_key(key); }
static inline EC_KEY *copenssl_EC_KEY_new_by_curve_name(int nid) { return EC_KEY_new_by_curve_name(nid); }
static inline int copenssl_EC_KEY_set_private_key(EC_KEY *key, const BIGNUM *priv) { return EC_KEY_set_private_key(key, priv); }
static inline int copenssl_EC_KEY_set_public_key(EC_KEY *key, const EC_POINT *pub) { return EC_KEY_set_public_key(key, pub); }
static inline ECDSA_SIG *copenssl_ECDSA_do_sign_ex(const unsigned char *dgst, int len, const BIGNUM *kinv,
                                                   const BIGNUM *rp, EC_KEY *key) {
    return ECDSA_do_sign_ex(dgst, len, kinv, rp, key);
}
static inline int copenssl_ECDSA_do_verify(const unsigned char *dgst, int len, const ECDSA_SIG *sig, EC_KEY *key) {
    return ECDSA_do_verify(dgst, len, sig, key);
}
static inline unsigned char *copenssl_HMAC_SHA256(const void *key, int keylen, const unsigned char *d, size_t n,
                                                  unsigned char *md) {
    unsigned int len = 32;
    return HMAC(EVP_sha256(), key, keylen, d, n, md, &len);
}
#pragma GCC diagnostic pop
#endif
