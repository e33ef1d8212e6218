import Crypto
import Foundation
import X509

/// A self-signed certificate for `localhost` and 127.0.0.1 that is its own CA (clients trust the same PEM).
struct SelfSignedCertificate {
    var certificatePEM: String
    var privateKeyPEM: String

    static func generate() throws -> SelfSignedCertificate {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName {
            OrganizationName("apns-mock")
            CommonName("localhost")
        }
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(365 * 86400),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(digitalSignature: true, keyCertSign: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName("localhost"), .ipAddress(.init(contentBytes: [127, 0, 0, 1]))])
                SubjectKeyIdentifier(hash: Certificate.PublicKey(key.publicKey))
            },
            issuerPrivateKey: Certificate.PrivateKey(key)
        )
        return SelfSignedCertificate(
            certificatePEM: try certificate.serializeAsPEM().pemString,
            privateKeyPEM: key.pemRepresentation
        )
    }
}
