import Kafka
import RelayContract

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

extension RecordLimits {
    /// Header names and values, as they count toward a record's size.
    package static func bytes(of headers: [KafkaHeader]) -> Int {
        headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) }
    }
}

extension RecordHeader {
    init(_ header: KafkaHeader) { self.init(name: header.name, value: header.value) }
}

extension KafkaHeader {
    init(_ header: RecordHeader) { self.init(name: header.name, value: header.value) }
}
