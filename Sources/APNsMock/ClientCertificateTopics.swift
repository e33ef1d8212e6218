import NIOSSL
import X509

/// Topics a client certificate covers: its subject UID (APNs certificates carry the bundle id there), or the
/// CN when there is no UID, plus that bundle's `.voip` and `.complication` topics.
enum ClientCertificateTopics {
    static func topics(of certificate: NIOSSLCertificate?) -> Set<String> {
        guard let certificate,
            let der = try? certificate.toDERBytes(),
            let parsed = try? Certificate(derEncoded: der)
        else { return [] }
        var uid: String?
        var commonName: String?
        for relativeName in parsed.subject {
            for attribute in relativeName {
                if attribute.type == [0, 9, 2342, 19_200_300, 100, 1, 1] {
                    uid = attribute.value.description
                } else if attribute.type == .RDNAttributeType.commonName {
                    commonName = attribute.value.description
                }
            }
        }
        guard let bundleID = uid ?? commonName, !bundleID.isEmpty else { return [] }
        return [bundleID, bundleID + ".voip", bundleID + ".complication"]
    }
}
