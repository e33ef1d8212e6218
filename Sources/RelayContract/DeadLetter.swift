/// A dead-letter record: the original message, plus headers that say where it came from and why it was
/// refused. Header names follow Kafka Connect's DLQ conventions so existing tooling reads them.
///
/// Only the relay writes names in its namespaces (`__connect.`, `apns-relay.`): an original header named so is
/// kept as `__original.` + its name (see ``Header/keptName(_:)``), so a producer cannot pose as the relay and
/// name, say, the topic `apns-relay replay` writes to. The dead letter's one block of those names is the relay's.
///
/// Always publishable: the record as a whole stays within ``Limits/maxBytes``. An original key over
/// ``Limits/maxKeyBytes`` is replaced by the source position, original headers over
/// ``Limits/maxOriginalHeaderBytes`` are left out, and the value is cut to what is left; each of these is said
/// in a header, never silent.
package struct DeadLetter: Sendable, Hashable {
    package enum Stage: String, Sendable, CaseIterable {
        /// Refused before parsing (e.g. larger than the configured maximum).
        case size
        /// Not JSON, or JSON that breaks `Schemas/notification-event`.
        case schema
        /// Valid against the schema but refused by an APNs rule (e.g. collapse id over 64 bytes).
        case apnsRules = "apns-rules"
    }

    /// The headers a dead letter adds to the original's: Kafka Connect's DLQ names where there is one, then
    /// the relay's own notes about what it had to cut. `apns-relay replay` reads them back.
    package enum Header {
        /// Kafka Connect's namespace (`__connect.errors.*` say where the record came from and why it failed):
        /// reserved as a whole, so that no tool reading a Connect-style dead letter is handed a producer's header.
        package static let connectNamespace = "__connect."
        /// The relay's prefix: notes on what the dead letter left out of the original.
        package static let relayPrefix = "apns-relay."
        /// Where an original header whose name is reserved is kept: `__original.__connect.errors.topic`.
        package static let originalPrefix = "__original."
        package static let topic = "__connect.errors.topic"
        package static let partition = "__connect.errors.partition"
        package static let offset = "__connect.errors.offset"
        package static let stage = "__connect.errors.stage"
        /// The relay's error code (`schema_violation`, `event_too_large`, an APNs reason, …).
        package static let errorCode = "__connect.errors.exception.class.name"
        package static let message = "__connect.errors.exception.message"
        /// The original key was too large and was replaced by the source position; its size.
        package static let originalKeySize = "apns-relay.original.key.size"
        /// The original headers were too large and were left out; how many there were.
        package static let originalHeadersDropped = "apns-relay.original.headers.dropped"
        /// The original value was cut; its full size.
        package static let originalSize = "apns-relay.original.size"
        package static let truncated = "apns-relay.truncated"

        /// Whether `name` is reserved: in a namespace only the relay writes in a dead letter (`__connect.`,
        /// `apns-relay.`).
        package static func isReserved(_ name: String) -> Bool {
            name.hasPrefix(connectNamespace) || name.hasPrefix(relayPrefix)
        }

        /// The name an original header is kept under: `__original.` + the name for one in the relay's
        /// namespaces, and for one already starting with `__original.` (so that ``originalName(ofKept:)`` gives
        /// back exactly what the producer sent); any other name as it is.
        package static func keptName(_ name: String) -> String {
            isReserved(name) || name.hasPrefix(originalPrefix) ? originalPrefix + name : name
        }

        /// The name the producer gave a header kept under `name` (the inverse of ``keptName(_:)``).
        package static func originalName(ofKept name: String) -> String {
            name.hasPrefix(originalPrefix) ? String(name.dropFirst(originalPrefix.count)) : name
        }
    }

    /// How large a dead letter may be.
    package struct Limits: Sendable, Hashable {
        /// Key + value + headers (keep it under the producer's `message.max.bytes`, 1,000,000 by default).
        package var maxBytes: Int
        package var maxKeyBytes: Int = RecordLimits.maxKeyBytes
        package var maxOriginalHeaderBytes: Int = RecordLimits.maxHeaderBytes
        /// Replace even a small or null original key by the source position.
        package var replacesKey = false

        package init(maxBytes: Int) {
            self.maxBytes = maxBytes
        }

        /// The form sent when Kafka refused the normal one for good: small enough for any sane topic.
        package static let fallback: Limits = {
            var limits = Limits(maxBytes: RecordLimits.fallbackBytes)
            limits.maxOriginalHeaderBytes = 0
            limits.replacesKey = true
            return limits
        }()
    }

    package var key: [UInt8]?
    package var value: [UInt8]?
    package var headers: [RecordHeader]

    /// - Parameter headersLeftOut: how many more headers the event had than `originalHeaders` (the consumer
    ///   copies a bounded prefix): the dead letter then keeps none of them, and says how many there were.
    package init(
        originalKey: [UInt8]?, originalValue: [UInt8]?, originalHeaders: [RecordHeader], headersLeftOut: Int = 0,
        source: SourcePosition, stage: Stage, errorCode: String, message: String, limits: Limits
    ) {
        // Renamed before anything else reads them: the size checks below count the names as written.
        let originalHeaders = originalHeaders.map { RecordHeader(name: Header.keptName($0.name), value: $0.value) }
        var headers = originalHeaders
        var notes: [RecordHeader] = [
            RecordHeader(name: Header.topic, value: Array(source.topic.utf8)),
            RecordHeader(name: Header.partition, value: Array(String(source.partition).utf8)),
            RecordHeader(name: Header.offset, value: Array(String(source.offset).utf8)),
            RecordHeader(name: Header.stage, value: Array(stage.rawValue.utf8)),
            RecordHeader(name: Header.errorCode, value: Array(errorCode.utf8)),
            RecordHeader(name: Header.message, value: Array(message.prefix(2048).utf8)),
        ]
        if limits.replacesKey || (originalKey?.count ?? 0) > limits.maxKeyBytes {
            key = source.recordKey
            if let originalKey {
                notes.append(RecordHeader(name: Header.originalKeySize, value: Array(String(originalKey.count).utf8)))
            }
        } else {
            key = originalKey
        }
        if headersLeftOut > 0 || RecordLimits.bytes(of: originalHeaders) > limits.maxOriginalHeaderBytes {
            headers = []
            notes.append(RecordHeader(name: Header.originalHeadersDropped, value: Array(String(originalHeaders.count + headersLeftOut).utf8)))
        }
        // What the value may take: the budget less the key, the headers and the notes about the cut.
        let cutNotes = 64
        let room = max(0, limits.maxBytes - (key?.count ?? 0) - RecordLimits.bytes(of: headers + notes) - cutNotes)
        if let originalValue, originalValue.count > room {
            value = Array(originalValue.prefix(room))
            notes.append(RecordHeader(name: Header.originalSize, value: Array(String(originalValue.count).utf8)))
            notes.append(RecordHeader(name: Header.truncated, value: Array("true".utf8)))
        } else {
            value = originalValue
        }
        self.headers = headers + notes
    }

    /// The record's size as Kafka counts it, near enough (key + value + header names and values).
    package var byteCount: Int { (key?.count ?? 0) + (value?.count ?? 0) + RecordLimits.bytes(of: headers) }
}
