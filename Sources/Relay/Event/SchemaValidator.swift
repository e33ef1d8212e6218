import CEventJSON

/// The reference JSON Schema validator: valijson (draft-07) over nlohmann::json.
///
/// Slow next to `EventDecoder` (tens of microseconds) but a real, general validator with detailed
/// errors. It backs `apns-relay validate`, explains refused events, and is the oracle of the
/// differential test. Besides the schema it applies the relay's extra rules (at most
/// `EventDecoder.maxEventBytes`, nesting at most `EventDecoder.maxDepth`, no byte order mark, no
/// member name twice at the top level).
///
/// The schema is compiled once. Validation calls are serialised by a lock inside the C++ object, which
/// is what makes the `@unchecked Sendable` safe.
package final class SchemaValidator: @unchecked Sendable {
    /// The schema text was not a usable schema.
    package struct InvalidSchema: Error, Hashable, Sendable, CustomStringConvertible {
        package let message: String
        package var description: String { message }
    }

    /// Owned: created in `init`, destroyed in `deinit`.
    private let handle: OpaquePointer

    /// Compiles a draft-07 schema given as JSON text (for example `JSONSchemas.notificationEvent`).
    /// - Throws: `InvalidSchema` when the text is not JSON or not a schema valijson understands.
    package init(schemaJSON: String) throws(InvalidSchema) {
        var text = schemaJSON
        var failure: UnsafeMutablePointer<CChar>?
        let handle = text.withUTF8 { utf8 in
            utf8.withMemoryRebound(to: CChar.self) { chars in
                cej_schema_create(chars.baseAddress, chars.count, &failure)
            }
        }
        guard let handle else {
            let message = failure.map { String(cString: $0) } ?? "invalid schema"
            cej_free(failure)
            throw InvalidSchema(message: message)
        }
        self.handle = handle
    }

    deinit {
        cej_schema_destroy(handle)
    }

    /// The validator for `Schemas/notification-event.schema.json` (embedded in the binary).
    package static func notificationEvent() throws(InvalidSchema) -> SchemaValidator {
        try SchemaValidator(schemaJSON: JSONSchemas.notificationEvent)
    }

    /// All problems in `bytes`; empty when the document is valid.
    package func validate(_ bytes: [UInt8]) -> [SchemaError] {
        bytes.withUnsafeBytes { validate($0) }
    }

    /// All problems in `bytes`; empty when the document is valid.
    package func validate(_ bytes: UnsafeRawBufferPointer) -> [SchemaError] {
        var errors: UnsafeMutablePointer<cej_schema_error>?
        var count = 0
        let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let result = cej_schema_validate(handle, base, bytes.count, 1, &errors, &count)
        defer { cej_schema_errors_free(errors, count) }
        if result < 0 {
            return [SchemaError(pointer: "", message: "the validator failed internally")]
        }
        guard let errors else { return [] }
        return (0..<count).map { index in
            let error = errors[index]
            return SchemaError(
                pointer: error.pointer.map { String(cString: $0) } ?? "",
                message: error.message.map { String(cString: $0) } ?? "")
        }
    }

    /// Whether `bytes` is valid, without building error messages (faster when most input is valid).
    package func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        return cej_schema_validate(handle, base, bytes.count, 0, nil, nil) == 0
    }

    /// Whether `bytes` is valid, without building error messages.
    package func isValid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { isValid($0) }
    }

    /// How many times `validate` ran one of the schema's `pattern`s so far: a string longer than the
    /// `maxLength` of its schema is reported by that and never run against the pattern. For tests.
    package var patternEvaluations: UInt64 {
        cej_schema_pattern_evaluations(handle)
    }
}
