import Crypto
import Foundation
import X509

/// APNs-style client certificates for tests: self-signed, the subject's UID the bundle id (as Apple's are),
/// with any validity, written as PEM files.
enum TestCertificate {
    /// Writes `<name>.crt` and `<name>.key` in `directory`. - Returns: their paths.
    static func write(
        in directory: URL, name: String, bundleID: String, notBefore: Date, notAfter: Date, key: P256.Signing.PrivateKey = .init()
    ) throws -> (certificate: String, key: String) {
        let subject = DistinguishedName([
            RelativeDistinguishedName(.init(type: [0, 9, 2342, 19_200_300, 100, 1, 1], utf8String: bundleID)),
            RelativeDistinguishedName(.init(type: .RDNAttributeType.commonName, utf8String: "Apple Push Services: \(bundleID)")),
        ])
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: notBefore, notValidAfter: notAfter, issuer: subject, subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256, extensions: try Certificate.Extensions { try ExtendedKeyUsage([.clientAuth]) },
            issuerPrivateKey: Certificate.PrivateKey(key))
        let certificatePath = directory.appendingPathComponent("\(name).crt").path
        let keyPath = directory.appendingPathComponent("\(name).key").path
        try certificate.serializeAsPEM().pemString.write(toFile: certificatePath, atomically: true, encoding: .utf8)
        try key.pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
        return (certificatePath, keyPath)
    }
}
