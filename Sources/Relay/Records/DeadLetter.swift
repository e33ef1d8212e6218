import Kafka

/// A dead-letter record: the original message, untouched, plus headers that say where it came from and
/// why it was refused. Header names follow Kafka Connect's DLQ conventions so existing tooling reads them.
public struct DeadLetter: Sendable, Hashable {
    public enum Stage: String, Sendable {
        /// Refused before parsing (e.g. larger than the configured maximum).
        case size
        /// Not JSON, or JSON that breaks `Schemas/notification-event`.
        case schema
        /// Valid against the schema but refused by an APNs rule (e.g. collapse id over 64 bytes).
        case apnsRules = "apns-rules"
    }

    public var key: [UInt8]?
    public var value: [UInt8]?
    public var headers: [KafkaHeader]

    public init(
        originalKey: [UInt8]?, originalValue: [UInt8]?, originalHeaders: [KafkaHeader],
        source: SourcePosition, stage: Stage, errorCode: String, message: String, maxValueBytes: Int
    ) {
        key = originalKey
        var errorHeaders: [KafkaHeader] = [
            KafkaHeader(name: "__connect.errors.topic", value: Array(source.topic.utf8)),
            KafkaHeader(name: "__connect.errors.partition", value: Array(String(source.partition).utf8)),
            KafkaHeader(name: "__connect.errors.offset", value: Array(String(source.offset).utf8)),
            KafkaHeader(name: "__connect.errors.stage", value: Array(stage.rawValue.utf8)),
            KafkaHeader(name: "__connect.errors.exception.class.name", value: Array(errorCode.utf8)),
            KafkaHeader(name: "__connect.errors.exception.message", value: Array(message.utf8)),
        ]
        // A value larger than the producer may send is cut, and the cut is said, never silent.
        if let originalValue, originalValue.count > maxValueBytes {
            value = Array(originalValue.prefix(maxValueBytes))
            errorHeaders.append(KafkaHeader(name: "apns-relay.original.size", value: Array(String(originalValue.count).utf8)))
            errorHeaders.append(KafkaHeader(name: "apns-relay.truncated", value: Array("true".utf8)))
        } else {
            value = originalValue
        }
        headers = originalHeaders + errorHeaders
    }
}
