import Kafka

/// A record to publish, and what to publish instead if Kafka refuses it for good.
struct OutgoingRecord: Sendable {
    var topic: String
    var key: [UInt8]?
    var value: [UInt8]?
    var headers: [KafkaHeader] = []
    /// A smaller form that always fits (source position as key, no original headers, value cut), for when
    /// Kafka refuses this one for good (too large for the broker's limits, invalid for the topic, e.g. a
    /// compacted one). `nil` when the record is already its smallest form. Built only when needed.
    var fallback: (@Sendable () -> OutgoingRecord)?
}

/// Bounds that keep every record the relay publishes within Kafka's limits whatever the input was.
package enum RecordLimits {
    /// Keys above this are replaced by the source position in results and dead letters.
    package static let maxKeyBytes = 16 * 1024
    /// Original headers above this (names + values) are left out of dead letters.
    package static let maxHeaderBytes = 64 * 1024
    /// The whole fallback form of a record.
    package static let fallbackBytes = 16 * 1024

    /// Header names and values, as they count toward a record's size.
    package static func bytes(of headers: [KafkaHeader]) -> Int {
        headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) }
    }
}

extension SourcePosition {
    /// `topic/partition/offset`: a key that is never null and never large, for records whose own key is
    /// missing or unusable.
    var recordKey: [UInt8] { Array("\(topic)/\(partition)/\(offset)".utf8) }
}
