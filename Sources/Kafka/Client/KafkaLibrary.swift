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
}
