import APNsCore
import CEventJSON

/// Decodes notification events (`Schemas/notification-event.schema.json`) on the hot path.
///
/// simdjson (through `CEventJSON`) checks the JSON, the types and the top-level keys and finds every
/// field plus the exact bytes of `payload` and `metadata`; the schema's value rules (required fields,
/// patterns, enums, lengths, ranges) are checked here in Swift. The reference `SchemaValidator` must
/// reach the same verdict on every input; the differential test holds them to it.
///
/// Beyond the schema, events over `maxEventBytes`, nested deeper than `maxDepth`, with a byte order
/// mark, or with a top-level member name twice are refused.
///
/// Not thread-safe: the decoder owns a parser and a reusable buffer. Use one per thread (or per
/// consumer loop).
package final class EventDecoder {
    /// Largest event accepted, in bytes.
    package static let maxEventBytes = Int(CEJ_MAX_EVENT_BYTES)
    /// Deepest nesting of objects and arrays accepted; the event object is level 1.
    package static let maxDepth = Int(CEJ_MAX_DEPTH)

    /// Owned: created in `init`, destroyed in `deinit`, never lent out.
    private let handle: OpaquePointer
    private let explainer: SchemaValidator?

    /// - Parameter explainer: when given, the message and pointer of a refused event come from this
    ///   reference validator (slower, more detailed; invalid events are rare). The code stays the fast
    ///   path's.
    /// - Throws: `EventDecodingError` with code `internal_error` when the parser cannot be allocated.
    package init(explainer: SchemaValidator? = nil) throws(EventDecodingError) {
        guard let handle = cej_decoder_create() else {
            throw EventDecodingError(code: .internalError, pointer: "", message: "cannot allocate the JSON parser")
        }
        self.handle = handle
        self.explainer = explainer
    }

    deinit {
        cej_decoder_destroy(handle)
    }

    /// Decodes and validates one event.
    /// - Throws: `EventDecodingError` naming the first problem found.
    /// The event's `payload` is a slice of `bytes`, not a copy.
    package func decode(_ bytes: [UInt8]) throws(EventDecodingError) -> NotificationEvent {
        try decode(bytes[...])
    }

    /// As `decode(_:)` for `[UInt8]`, from a slice (a consumed record's value): the payload is a slice of it.
    package func decode(_ bytes: ArraySlice<UInt8>) throws(EventDecodingError) -> NotificationEvent {
        var decoded: NotificationEvent?
        var failure = EventDecodingError(code: .internalError, pointer: "", message: "no result")
        bytes.withUnsafeBytes { buffer in
            do throws(EventDecodingError) {
                decoded = try decode(buffer, source: bytes)
            } catch {
                failure = error
            }
        }
        guard let decoded else { throw failure }
        return decoded
    }

    /// Decodes and validates one event from memory the caller owns (e.g. a Kafka message).
    /// - Throws: `EventDecodingError` naming the first problem found.
    package func decode(_ bytes: UnsafeRawBufferPointer) throws(EventDecodingError) -> NotificationEvent {
        try decode(bytes, source: nil)
    }

    /// - Parameter source: the array `bytes` points into, if any: the payload is then sliced from it.
    private func decode(_ bytes: UnsafeRawBufferPointer, source: ArraySlice<UInt8>?) throws(EventDecodingError) -> NotificationEvent {
        var event = cej_event()
        let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let status = cej_decode_event(handle, base, bytes.count, &event)
        do throws(EventDecodingError) {
            guard status == Int32(CEJ_OK) else {
                throw Self.error(status: status, event: event, size: bytes.count)
            }
            return try EventRules.check(event, input: bytes, source: source)
        } catch {
            guard let explainer, error.code != .internalError else { throw error }
            throw Self.explained(error, by: explainer, bytes: bytes)
        }
    }

    /// Replaces the fast path's message with the reference validator's, keeping the stable code.
    package static func explained(_ error: EventDecodingError, by explainer: SchemaValidator, bytes: ArraySlice<UInt8>) -> EventDecodingError {
        guard error.code != .internalError else { return error }
        return bytes.withUnsafeBytes { explained(error, by: explainer, bytes: $0) }
    }

    private static func explained(
        _ error: EventDecodingError, by explainer: SchemaValidator, bytes: UnsafeRawBufferPointer
    ) -> EventDecodingError {
        let details = explainer.validate(bytes)
        guard let first = details.first else { return error }
        let message = details.map(\.description).joined(separator: "; ")
        return EventDecodingError(code: error.code, pointer: first.pointer, message: message)
    }

    private static func error(status: Int32, event: cej_event, size: Int) -> EventDecodingError {
        let pointer = event.error_field == 0 ? "" : "/" + EventRules.name(ofField: event.error_field)
        switch Int(status) {
        case Int(CEJ_INVALID_JSON):
            return .init(code: .invalidJSON, pointer: pointer, message: "not valid JSON")
        case Int(CEJ_INVALID_UTF8):
            return .init(code: .invalidUTF8, pointer: "", message: "not valid UTF-8")
        case Int(CEJ_TOO_LARGE):
            return .init(
                code: .eventTooLarge, pointer: "",
                message: "event is \(size) bytes; at most \(maxEventBytes) allowed")
        case Int(CEJ_TOO_DEEP):
            return .init(code: .tooDeep, pointer: pointer, message: "nesting deeper than \(maxDepth) levels")
        case Int(CEJ_DUPLICATE_KEY):
            return .init(code: .duplicateKey, pointer: pointer, message: "member appears more than once")
        case Int(CEJ_NOT_OBJECT):
            return .init(code: .schemaViolation, pointer: "", message: "event must be a JSON object")
        case Int(CEJ_UNKNOWN_KEY):
            let key = EventRules.string(event.error_key)
            return .init(
                code: .schemaViolation, pointer: "/" + EventRules.escapePointerToken(key),
                message: "unknown member \"\(key)\" (the schema allows no other members)")
        case Int(CEJ_WRONG_TYPE):
            return .init(
                code: .schemaViolation, pointer: pointer,
                message: "must be \(EventRules.expectedType(ofField: event.error_field))")
        case Int(CEJ_INTEGER_OUT_OF_RANGE):
            return .init(code: .schemaViolation, pointer: pointer, message: "integer out of range")
        default:
            return .init(code: .internalError, pointer: "", message: "JSON decoder failed (status \(status))")
        }
    }
}
