import COpenSSL
import Foundation
import Logging

/// How the client checks the server's certificate.
package struct ServerTrust: Sendable, Hashable {
    enum Kind: Sendable, Hashable { case system, caFile(String), none }
    let kind: Kind

    /// The system trust store (Apple's servers chain to USERTrust RSA). Default.
    package static let systemTrustStore = ServerTrust(kind: .system)
    /// Only the CA certificates in this PEM file (e.g. the mock's CA).
    package static func caFile(_ path: String) -> ServerTrust { ServerTrust(kind: .caFile(path)) }
    /// No verification at all. Dangerous: logged at `critical` on every connection. Tests only.
    package static let insecureNoVerification = ServerTrust(kind: .none)
}

/// A TLS client certificate for certificate (mutual TLS) authentication.
package struct ClientCertificate: Sendable, Hashable, CustomStringConvertible {
    enum Source: Sendable, Hashable {
        case pem(certificateFile: String, privateKeyFile: String)
        case pkcs12(file: String, passphrase: String)
    }
    let source: Source

    /// Certificate (chain) and key as PEM files.
    package static func pem(certificateFile: String, privateKeyFile: String) -> ClientCertificate {
        ClientCertificate(source: .pem(certificateFile: certificateFile, privateKeyFile: privateKeyFile))
    }
    /// A PKCS#12 (.p12) file and its passphrase.
    package static func pkcs12(file: String, passphrase: String) -> ClientCertificate {
        ClientCertificate(source: .pkcs12(file: file, passphrase: passphrase))
    }

    package var description: String {
        switch source {
        case .pem(let cert, _): "ClientCertificate(pem: \(cert), key: <redacted>)"
        case .pkcs12(let file, _): "ClientCertificate(pkcs12: \(file), passphrase: <redacted>)"
        }
    }
}

/// Owns one `SSL_CTX`: TLS 1.2+, ALPN h2, peer verification, optional client certificate.
// @unchecked Sendable: the SSL_CTX is configured once in init and afterwards only used to create SSL objects,
// which OpenSSL documents as thread-safe; the certificate details are written in init only, then only read.
final class TLSContext: @unchecked Sendable {
    private let ctx: OpaquePointer
    let verifiesPeer: Bool
    /// The client certificate's validity and subject (certificate authentication).
    private(set) var clientCertificateDetails: CertificateDetails?
    /// The certificates of the CA file (`ServerTrust.caFile`), in file order.
    private(set) var caCertificates: [CertificateDetails] = []

    /// - Parameter now: seconds since the epoch; a client certificate not valid at `now` is refused.
    init(
        trust: ServerTrust, clientCertificate: ClientCertificate?, logger: Logger, now: Int64 = Int64(Date().timeIntervalSince1970)
    ) throws(APNsClientError) {
        ERR_clear_error()
        guard let ctx = SSL_CTX_new(TLS_client_method()) else {
            throw APNsClientError(.tls, "SSL_CTX_new failed", openSSLError: ERR_get_error())
        }
        self.ctx = ctx  // deinit frees it from here on, including when a later step throws.
        self.verifiesPeer = trust.kind != .none
        guard copenssl_SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 else {
            throw APNsClientError(.tls, "cannot require TLS 1.2", openSSLError: ERR_get_error())
        }
        // The session keeps its read and write buffers (SSL_MODE_RELEASE_BUFFERS would free and reallocate ~34 KiB
        // around every read and write: measured as malloc consolidation and heap trimming on a loop serving many
        // connections one answer at a time), and reads ahead: one read(2) takes every record that has arrived,
        // not a 5-byte header and then a body per record.
        _ = copenssl_SSL_CTX_set_mode(ctx, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
        copenssl_SSL_CTX_set_read_ahead(ctx, 1)
        // ALPN wire format: length-prefixed protocol names.
        let alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        guard SSL_CTX_set_alpn_protos(ctx, alpn, UInt32(alpn.count)) == 0 else {  // 0 is success here.
            throw APNsClientError(.tls, "cannot set ALPN", openSSLError: ERR_get_error())
        }
        switch trust.kind {
        case .system:
            guard SSL_CTX_set_default_verify_paths(ctx) == 1 else {
                throw APNsClientError(.tls, "cannot load the system trust store", openSSLError: ERR_get_error())
            }
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        case .caFile(let path):
            guard SSL_CTX_load_verify_locations(ctx, path, nil) == 1 else {
                throw APNsClientError(.tls, "cannot load CA file \(path)", openSSLError: ERR_get_error())
            }
            caCertificates = CertificateDetails.all(inPEMFile: path)
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        case .none:
            logger.critical("TLS peer verification is DISABLED for APNs connections; never use this in production")
            SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
        }
        if let clientCertificate {
            try Self.load(clientCertificate, into: ctx)
            if let certificate = SSL_CTX_get0_certificate(ctx) {
                let details = CertificateDetails(certificate)
                clientCertificateDetails = details
                let subject = details.bundleID ?? details.commonName ?? "without a subject UID"
                if details.notAfter <= now {
                    throw APNsClientError(.invalidCredential, "the client certificate (\(subject)) expired on \(CertificateDetails.date(details.notAfter)): "
                        + "APNs refuses it; make a new one in Apple's developer account (Certificates) and replace the file")
                }
                if details.notBefore > now {
                    throw APNsClientError(.invalidCredential, "the client certificate (\(subject)) is not valid before \(CertificateDetails.date(details.notBefore)) (is this host's clock right?)")
                }
            }
        }
    }

    private static func load(_ certificate: ClientCertificate, into ctx: OpaquePointer) throws(APNsClientError) {
        switch certificate.source {
        case .pem(let certFile, let keyFile):
            guard SSL_CTX_use_certificate_chain_file(ctx, certFile) == 1 else {
                throw APNsClientError(.invalidCredential, "cannot load client certificate \(certFile)", openSSLError: ERR_get_error())
            }
            guard let bio = BIO_new_file(keyFile, "r") else {
                throw APNsClientError(.invalidCredential, "cannot open the client key \(keyFile)", openSSLError: ERR_get_error())
            }
            defer { BIO_free(bio) }
            guard let key = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else {
                throw APNsClientError(.invalidCredential, "the client key \(keyFile) is not a PEM private key (an encrypted one is not read)", openSSLError: ERR_get_error())
            }
            defer { EVP_PKEY_free(key) }
            if let certificate = SSL_CTX_get0_certificate(ctx), X509_check_private_key(certificate, key) != 1 {
                ERR_clear_error()
                throw APNsClientError(.invalidCredential, "the private key does not belong to the client certificate (they come from different certificate requests)")
            }
            guard SSL_CTX_use_PrivateKey(ctx, key) == 1 else {
                throw APNsClientError(.invalidCredential, "cannot use the client key \(keyFile)", openSSLError: ERR_get_error())
            }
        case .pkcs12(let file, let passphrase):
            guard let bio = BIO_new_file(file, "rb") else {
                throw APNsClientError(.invalidCredential, "cannot open PKCS#12 file \(file)", openSSLError: ERR_get_error())
            }
            defer { BIO_free(bio) }
            guard let p12 = d2i_PKCS12_bio(bio, nil) else {
                throw APNsClientError(.invalidCredential, "cannot parse PKCS#12 file \(file)", openSSLError: ERR_get_error())
            }
            defer { PKCS12_free(p12) }
            var pkey: OpaquePointer?
            var cert: OpaquePointer?
            var chain: OpaquePointer?
            guard PKCS12_parse(p12, passphrase, &pkey, &cert, &chain) == 1, let pkey, let cert else {
                throw APNsClientError(.invalidCredential, "cannot decrypt PKCS#12 file (wrong passphrase?)", openSSLError: ERR_get_error())
            }
            // PKCS12_parse hands us owned references; SSL_CTX_use_* take their own, so free ours after.
            defer {
                EVP_PKEY_free(pkey)
                X509_free(cert)
                if let chain { OPENSSL_sk_pop_free(chain, { X509_free(OpaquePointer($0)) }) }
            }
            guard SSL_CTX_use_certificate(ctx, cert) == 1, SSL_CTX_use_PrivateKey(ctx, pkey) == 1 else {
                throw APNsClientError(.invalidCredential, "PKCS#12 certificate or key rejected", openSSLError: ERR_get_error())
            }
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            throw APNsClientError(.invalidCredential, "the private key does not belong to the client certificate (they come from different certificate requests)", openSSLError: ERR_get_error())
        }
    }

    deinit { SSL_CTX_free(ctx) }

    func withContext<R>(_ body: (OpaquePointer) throws -> R) rethrows -> R { try body(ctx) }
}
