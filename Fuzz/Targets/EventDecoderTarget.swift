import Relay
import Synchronization

/// `event-decoder`: the relay's whole decoding path (`EventDecoder`: simdjson, then the schema's value rules in
/// Swift, with the reference as explainer) held to the reference validator, as `DifferentialTests` holds it on
/// its fixed cases: the same verdict on every input, a refusal explained, payload and metadata slices that are
/// whole objects, and salvage safe on what was refused.
enum EventDecoderTarget {
    private struct Parts: ~Copyable {
        let decoder: EventDecoder
        let reference: SchemaValidator
        /// Any JSON object: what a payload or metadata slice must be on its own.
        let anyObject: SchemaValidator
    }

    /// Made once per process (the schemas compile in milliseconds, an input runs in microseconds).
    private static let parts: Mutex<Parts> = {
        do {
            let reference = try SchemaValidator.notificationEvent()
            return Mutex(Parts(
                decoder: try EventDecoder(explainer: reference),
                reference: reference,
                anyObject: try SchemaValidator(schemaJSON: #"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}"#)
            ))
        } catch {
            preconditionFailure("cannot build the event decoder or the reference validator: \(error)")
        }
    }()

    static func run(_ input: [UInt8]) {
        parts.withLock { parts in
            let decoded: Result<NotificationEvent, EventDecodingError> = Result { () throws(EventDecodingError) in
                try parts.decoder.decode(input)
            }
            let referenceAccepts = parts.reference.isValid(input)
            let problems = parts.reference.validate(input)
            precondition(problems.isEmpty == referenceAccepts, "the reference's detailed pass contradicts its verdict")
            switch decoded {
            case .success(let event):
                precondition(referenceAccepts, "the decoder accepts an event the reference refuses: \(problems)")
                for slice in [Array(event.payload), event.metadata ?? [UInt8(ascii: "{"), UInt8(ascii: "}")]] {
                    precondition(
                        slice.first == UInt8(ascii: "{") && slice.last == UInt8(ascii: "}") && parts.anyObject.isValid(slice),
                        "a payload or metadata slice is not a whole JSON object")
                }
            case .failure(let error):
                precondition(!referenceAccepts, "the decoder refuses an event the reference accepts: \(error)")
                precondition(error.code != .internalError, "internal_error blames the relay for bad input: \(error)")
                // What a refused event's result echoes.
                _ = SalvagedEvent(salvaging: input)
            }
        }
    }
}
