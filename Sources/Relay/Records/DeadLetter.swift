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
    public var headers: [(String, [UInt8])]

    public init(
        originalKey: [UInt8]?, originalValue: [UInt8]?, originalHeaders: [(String, [UInt8])],
        source: SourcePosition, stage: Stage, errorCode: String, message: String, maxValueBytes: Int
    ) {
        key = originalKey
        var errorHeaders: [(String, [UInt8])] = [
            ("__connect.errors.topic", Array(source.topic.utf8)),
            ("__connect.errors.partition", Array(String(source.partition).utf8)),
            ("__connect.errors.offset", Array(String(source.offset).utf8)),
            ("__connect.errors.stage", Array(stage.rawValue.utf8)),
            ("__connect.errors.exception.class.name", Array(errorCode.utf8)),
            ("__connect.errors.exception.message", Array(message.utf8)),
        ]
        // A value larger than the producer may send is cut, and the cut is said, never silent.
        if let originalValue, originalValue.count > maxValueBytes {
            value = Array(originalValue.prefix(maxValueBytes))
            errorHeaders.append(("apns-relay.original.size", Array(String(originalValue.count).utf8)))
            errorHeaders.append(("apns-relay.truncated", Array("true".utf8)))
        } else {
            value = originalValue
        }
        headers = originalHeaders + errorHeaders
    }

    public static func == (lhs: DeadLetter, rhs: DeadLetter) -> Bool {
        lhs.key == rhs.key && lhs.value == rhs.value
            && lhs.headers.map(\.0) == rhs.headers.map(\.0) && lhs.headers.map(\.1) == rhs.headers.map(\.1)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(key)
        hasher.combine(value)
    }
}
