import CRdKafka

/// The librdkafka this process runs with: the shared library loaded at start, which may be newer than the
/// headers it was built against (`LD_LIBRARY_PATH`, the image's package).
package enum KafkaLibrary {
    /// `rd_kafka_version_str()`, e.g. `2.0.2`.
    package static var version: String { String(cString: rd_kafka_version_str()) }

    /// Whether the loaded librdkafka is `major.minor` or later (`rd_kafka_version()`: `0xMMmmrrpp`).
    package static func isAtLeast(_ major: Int, _ minor: Int) -> Bool {
        let number = Int(rd_kafka_version())
        return (number >> 24 & 0xff, number >> 16 & 0xff) >= (major, minor)
    }

    /// librdkafka 2.3 and later postpone the fetch for a partition whose queue is full by
    /// `fetch.queue.backoff.ms` (1 s by default), where 2.0 waits for its broker thread's next wake-up (at the
    /// latest a second): with the property set low, a drained queue is refilled within it, and the
    /// `FetchNudger` that wakes 2.0's fetcher (a ListOffsets request per drain) has nothing left to do.
    package static var hasFetchQueueBackoff: Bool { isAtLeast(2, 3) }

    /// librdkafka's `builtin.features`: what this build can do (`ssl`, `sasl_scram`, `oidc`, …).
    package static let builtinFeatures: Set<String> = {
        guard let configuration = rd_kafka_conf_new() else { return [] }
        defer { rd_kafka_conf_destroy(configuration) }
        var text = [CChar](repeating: 0, count: 1024)
        var size = text.count
        guard rd_kafka_conf_get(configuration, "builtin.features", &text, &size) == RD_KAFKA_CONF_OK else { return [] }
        let bytes = text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return Set(String(decoding: bytes, as: UTF8.self).split(separator: ",").map(String.init))
    }()

    /// Whether this build can fetch OAUTHBEARER tokens from an OIDC token endpoint itself
    /// (`sasl.oauthbearer.method=oidc`): only builds with libcurl can (Debian 12's 2.0.2 cannot).
    package static var hasOIDC: Bool { builtinFeatures.contains("oidc") }
}
