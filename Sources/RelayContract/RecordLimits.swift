/// Bounds that keep every record the relay publishes within Kafka's limits whatever the input was.
package enum RecordLimits {
    /// Keys above this are replaced by the source position in results and dead letters.
    package static let maxKeyBytes = 16 * 1024
    /// Original headers above this (names + values) are left out of dead letters.
    package static let maxHeaderBytes = 64 * 1024
    /// The whole fallback form of a record.
    package static let fallbackBytes = 16 * 1024

    /// Header names and values, as they count toward a record's size.
    package static func bytes(of headers: [RecordHeader]) -> Int {
        headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) }
    }
}

/// A record header as the contract writes it (Kafka's, without depending on a Kafka client).
package struct RecordHeader: Hashable, Sendable {
    package var name: String
    package var value: [UInt8]?

    package init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }
}

extension SourcePosition {
    /// `topic/partition/offset`: a key that is never null and never large, for records whose own key is
    /// missing or unusable.
    package var recordKey: [UInt8] { Array("\(topic)/\(partition)/\(offset)".utf8) }
}
