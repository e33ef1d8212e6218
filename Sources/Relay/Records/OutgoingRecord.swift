import Kafka
import RelayContract
import ServiceSupport

/// A record to publish, and what to publish instead if Kafka refuses it for good.
struct OutgoingRecord: Sendable {
    var topic: String
    /// A slice: a result's key is its event's, a slice of the consumed record's one buffer.
    var key: ArraySlice<UInt8>?
    var value: Value
    var headers: [KafkaHeader] = []
    /// A smaller form that always fits (source position as key, no original headers, value cut), for when
    /// Kafka refuses this one for good (too large for the broker's limits, invalid for the topic, e.g. a
    /// compacted one). `nil` when the record is already its smallest form. Built only when needed.
    var fallback: Fallback?

    init(topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader] = [], fallback: Fallback? = nil) {
        self.init(topic: topic, key: key?[...], value: .bytes(value), headers: headers, fallback: fallback)
    }

    init(topic: String, key: ArraySlice<UInt8>?, value: Value, headers: [KafkaHeader] = [], fallback: Fallback? = nil) {
        self.topic = topic
        self.key = key
        self.value = value
        self.headers = headers
        self.fallback = fallback
    }

    /// A record's value: its bytes, or a result, whose JSON is written only when the record is produced.
    enum Value: Sendable {
        case bytes([UInt8]?)
        /// Written into a buffer reused for every result (`ByteBufferPool.forRecords`): librdkafka copies the value, so
        /// no result keeps a buffer of its own (one allocation fewer per event); a retry writes it again.
        case result(DeliveryResult)
    }

    /// Lends the record's value to `body` (which may not keep it): its bytes, or its JSON written into one
    /// of `buffers`.
    func withValue<R, Failure: Error>(_ buffers: ByteBufferPool, _ body: ([UInt8]?) throws(Failure) -> R) throws(Failure) -> R {
        switch value {
        case .bytes(let bytes):
            return try body(bytes)
        case .result(let result):
            return try buffers.withBuffer { (buffer: inout [UInt8]) throws(Failure) -> R in
                result.writeJSON(into: &buffer)
                return try body(buffer)
            }
        }
    }

    /// How to build a record's smaller form, kept as values (no closure allocated per record).
    enum Fallback: Sendable {
        /// A result record's own result without its metadata and with its message cut to 512 characters,
        /// keyed by its source position.
        case result
        /// A record already encoded (a removal record without its metadata).
        case encoded(topic: String, key: [UInt8], value: [UInt8])
        /// Anything else (dead letters, whose small form is built from the original record).
        case build(@Sendable () -> OutgoingRecord)
    }

    /// The record's smaller form (`fallback`), `nil` when it has none.
    func smallerForm() -> OutgoingRecord? {
        switch fallback {
        case nil:
            return nil
        case .result:
            guard case .result(var small) = value else { return nil }
            small.metadata = nil
            small.message = small.message.map { String($0.prefix(512)) }
            return OutgoingRecord(topic: topic, key: small.source.recordKey[...], value: .result(small))
        case .encoded(let topic, let key, let value):
            return OutgoingRecord(topic: topic, key: key, value: value)
        case .build(let make):
            return make()
        }
    }
}

extension ByteBufferPool {
    /// The buffers result records are written into as they are produced: about one per thread producing at
    /// once (librdkafka copies the value, so a buffer is back before the next record); a buffer grown for a
    /// rare large record is not kept.
    static func forRecords() -> ByteBufferPool { ByteBufferPool(kept: 16, largestKept: 64 * 1024) }
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
