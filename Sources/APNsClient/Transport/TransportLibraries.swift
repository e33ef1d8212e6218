import CNGHTTP2
import COpenSSL

/// The HTTP/2 and TLS libraries this process runs with (loaded at start; possibly newer than the headers).
package enum TransportLibraries {
    /// `nghttp2_version(0)`'s `version_str`, e.g. `1.52.0`.
    package static var nghttp2: String {
        guard let info = nghttp2_version(0), let text = info.pointee.version_str else { return "unknown" }
        return String(cString: text)
    }

    /// `OpenSSL_version(OPENSSL_VERSION)` without its "OpenSSL " prefix, e.g. `3.0.20 1 Jul 2025`.
    package static var openSSL: String {
        guard let text = OpenSSL_version(OPENSSL_VERSION) else { return "unknown" }
        let full = String(cString: text)
        return full.hasPrefix("OpenSSL ") ? String(full.dropFirst("OpenSSL ".count)) : full
    }
}
