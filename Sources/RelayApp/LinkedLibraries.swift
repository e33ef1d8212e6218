import APNsClient
import Kafka
import ServiceSupport

/// The C libraries that do the relay's protocol work, as loaded at run time: what `--version` prints and the
/// relay logs at start, so a report of a librdkafka or OpenSSL bug can be matched to what actually ran.
package enum LinkedLibraries {
    /// `[("librdkafka", "2.0.2"), ("nghttp2", "1.52.0"), ("OpenSSL", "3.0.20 …")]`.
    package static var versions: [(name: String, version: String)] {
        [("librdkafka", KafkaLibrary.version), ("nghttp2", TransportLibraries.nghttp2), ("OpenSSL", TransportLibraries.openSSL)]
    }

    /// `librdkafka 2.0.2, nghttp2 1.52.0, OpenSSL 3.0.20 …`.
    package static var summary: String { versions.map { "\($0.name) \($0.version)" }.joined(separator: ", ") }

    /// `--version`: the product's version on the first line (the chart's appVersion), then a library a line.
    package static var versionText: String {
        ([ProductVersion.string] + versions.map { "\($0.name) \($0.version)" }).joined(separator: "\n")
    }
}
