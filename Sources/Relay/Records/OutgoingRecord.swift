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

    /// A result's message is capped here (`DeliveryResult.maxMessageBytes`), on the one way results become records.
    init(topic: String, key: ArraySlice<UInt8>?, value: Value, headers: [KafkaHeader] = [], fallback: Fallback? = nil) {
        self.topic = topic
        self.key = key
        if case .result(var result) = value, let message = result.message, message.utf8.count > DeliveryResult.maxMessageBytes {
            result.message = DeliveryResult.bounded(message)
            self.value = .result(result)
        } else {
            self.value = value
        }
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

extension DeliveryResult {
    /// The longest `message` a result record carries, in bytes: well within the schema's 4096 characters, and a
    /// few problems of an event at length. An event's problems can name or quote what the producer wrote (an
    /// unknown member, a value none of the allowed ones), so without a cap a result could be larger than its event.
    static let maxMessageBytes = 2048

    /// `message` within `maxMessageBytes`: its first problems whole (problems are separated by `"; "`, as the
    /// reference validator's explanation joins them) and `… and N more` for the rest; a first problem too long
    /// to fit is cut on a character boundary and ends with `…`.
    static func bounded(_ message: String, maxBytes: Int = maxMessageBytes) -> String {
        guard message.utf8.count > maxBytes else { return message }
        let separator = "; "
        let problems = message.split(separator: separator, omittingEmptySubsequences: false)
        // Room for the longest note that can follow: the count is at most the number of problems.
        let room = maxBytes - " … and \(problems.count) more".utf8.count
        var kept = 0
        var used = 0
        for problem in problems {
            let added = (kept == 0 ? 0 : separator.utf8.count) + problem.utf8.count
            guard used + added <= room else { break }
            used += added
            kept += 1
        }
        var text: String
        if kept == 0 {
            text = String(prefix(problems[0], maxBytes: room - "…".utf8.count)) + "…"
            kept = 1
        } else {
            text = problems[..<kept].joined(separator: separator)
        }
        if kept < problems.count { text += " … and \(problems.count - kept) more" }
        return text
    }

    /// The longest prefix of `text` within `maxBytes` of UTF-8 that ends on a character (scalar) boundary.
    private static func prefix(_ text: Substring, maxBytes: Int) -> Substring {
        let utf8 = text.utf8
        guard utf8.count > maxBytes else { return text }
        var end = utf8.index(utf8.startIndex, offsetBy: max(0, maxBytes))
        // Back to the first byte of a scalar (a continuation byte is 0b10xxxxxx).
        while end > utf8.startIndex, utf8[end] & 0xC0 == 0x80 { end = utf8.index(before: end) }
        return text[..<end]
    }
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
