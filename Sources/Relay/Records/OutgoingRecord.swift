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
    var fallback: Fallback?

    /// How to build a record's smaller form, kept as values (no closure allocated per record): call it.
    enum Fallback: Sendable {
        /// The result without its metadata and with its message cut to 512 characters, keyed by its source
        /// position.
        case result(DeliveryResult, topic: String)
        /// A record already encoded (a removal record without its metadata).
        case encoded(topic: String, key: [UInt8], value: [UInt8])
        /// Anything else (dead letters, whose small form is built from the original record).
        case build(@Sendable () -> OutgoingRecord)

        func callAsFunction() -> OutgoingRecord {
            switch self {
            case .result(var small, let topic):
                small.metadata = nil
                small.message = small.message.map { String($0.prefix(512)) }
                return OutgoingRecord(topic: topic, key: small.source.recordKey, value: small.jsonBytes())
            case .encoded(let topic, let key, let value):
                return OutgoingRecord(topic: topic, key: key, value: value)
            case .build(let make):
                return make()
            }
        }
    }
}

/// An event's records: its result first, and at most one other (a removed-token or removed-channel record,
/// or a dead letter). A value of its own rather than an array: no allocation per event.
struct EventRecords: Sendable {
    var result: OutgoingRecord
    var other: OutgoingRecord?

    var count: Int { other == nil ? 1 : 2 }

    /// Applies `change` to each record, the result first.
    mutating func update(_ change: (inout OutgoingRecord) -> Void) {
        change(&result)
        if other != nil { change(&other!) }
    }

    /// As an array, for the transactional path's batches.
    var array: [OutgoingRecord] { other.map { [result, $0] } ?? [result] }
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
