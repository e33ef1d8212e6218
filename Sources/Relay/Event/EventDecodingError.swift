/// Why an input event was refused before anything was sent to APNs.
///
/// `code` is stable and machine-readable (it becomes the `reason` of the delivery result and a
/// dead-letter header); `pointer` is a JSON pointer to the offending value (`""` for the whole event);
/// `message` is for people and may change.
package struct EventDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable error code; compare with the static members.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        package let rawValue: String

        private init(_ rawValue: String) { self.rawValue = rawValue }

        /// Not JSON: syntax, bad escape, control character in a string, trailing data, byte order mark.
        package static let invalidJSON = Code("invalid_json")
        /// The bytes are not UTF-8.
        package static let invalidUTF8 = Code("invalid_utf8")
        /// Larger than `EventDecoder.maxEventBytes`.
        package static let eventTooLarge = Code("event_too_large")
        /// Nesting deeper than `EventDecoder.maxDepth`.
        package static let tooDeep = Code("too_deep")
        /// A member name repeated at the top level of the event.
        package static let duplicateKey = Code("duplicate_key")
        /// Valid JSON that breaks a rule of `Schemas/notification-event.schema.json`.
        package static let schemaViolation = Code("schema_violation")
        /// The decoder itself failed (out of memory); not the event's fault.
        package static let internalError = Code("internal_error")

        package var description: String { rawValue }
    }

    package let code: Code
    /// JSON pointer (RFC 6901) of the offending value, e.g. `/deviceToken`; `""` is the whole event.
    package let pointer: String
    package let message: String

    package init(code: Code, pointer: String, message: String) {
        self.code = code
        self.pointer = pointer
        self.message = message
    }

    /// Whether trying the same bytes again could succeed: only when the decoder itself failed.
    package var isRetriable: Bool { code == .internalError }

    package var description: String {
        // An explained error's message lists every problem with its own pointer, the first one's included.
        pointer.isEmpty || message.hasPrefix(pointer + ":") ? "\(code): \(message)" : "\(code): \(pointer): \(message)"
    }
}
