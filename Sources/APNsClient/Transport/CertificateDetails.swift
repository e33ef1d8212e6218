import COpenSSL
import Foundation

/// What a certificate says about itself, read with OpenSSL: its validity and whom it is for. For an APNs
/// client certificate the subject's UID is the app's bundle id (its default topic; the certificate also
/// covers that app's `.voip` and `.complication` topics).
package struct CertificateDetails: Sendable, Hashable {
    /// Not before / not after, in seconds since the epoch.
    package var notBefore: Int64
    package var notAfter: Int64
    /// The subject's UID (an APNs certificate's bundle id), or its common name when it has no UID.
    package var bundleID: String?
    package var commonName: String?

    /// Reads `certificate` (an `X509*`).
    init(_ certificate: OpaquePointer) {
        notBefore = Self.seconds(X509_get0_notBefore(certificate)) ?? 0
        notAfter = Self.seconds(X509_get0_notAfter(certificate)) ?? 0
        let name = X509_get_subject_name(certificate)
        bundleID = Self.entry(name, NID_userId)
        commonName = Self.entry(name, NID_commonName)
    }

    /// Every certificate of a PEM file (a CA bundle), in order.
    static func all(inPEMFile path: String) -> [CertificateDetails] {
        guard let bio = BIO_new_file(path, "r") else { return [] }
        defer { BIO_free(bio) }
        var found: [CertificateDetails] = []
        while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
            found.append(CertificateDetails(certificate))
            X509_free(certificate)
        }
        ERR_clear_error()  // the loop ends on "no start line"
        return found
    }

    /// "2027-03-01 12:00 UTC".
    package static func date(_ seconds: Int64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm 'UTC'"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    private static func seconds(_ time: UnsafePointer<ASN1_TIME>?) -> Int64? {
        guard let time else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Int64(timegm(&parts))
    }

    private static func entry(_ name: OpaquePointer?, _ nid: Int32) -> String? {
        guard let name else { return nil }
        let index = X509_NAME_get_index_by_NID(name, nid, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry),
              let bytes = ASN1_STRING_get0_data(data)
        else { return nil }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(ASN1_STRING_length(data))), as: UTF8.self)
    }
}
