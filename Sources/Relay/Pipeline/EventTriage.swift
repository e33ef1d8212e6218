import APNsCore
import Kafka
import RelayContract
import ServiceSupport

/// The first decision about a consumed message: send it, or answer it at once without sending.
enum Triage: Sendable {
    /// A valid event, ready for APNs: decoded, in its lane, with the credential that sends it.
    case deliver(Delivery)
    /// Refused before sending: publish this result (and a dead letter for the refusal, if any) only.
    /// `broadcast` when the event was readable as one (for the broadcast metrics).
    case answer(DeliveryResult, Refusal?, broadcast: Bool = false)
}

/// Why an event was refused, for its dead letter.
struct Refusal: Sendable {
    var stage: DeadLetter.Stage
    var code: String
    var message: String
    /// The fast decoder's error, when the reference validator could say more (`EventTriage.explained`).
    var decodingError: EventDecodingError?
    /// The result's `id` and `metadata` are still to be salvaged from the event (`EventTriage.explained`).
    var salvagePending = false
}

/// Reads a Kafka message into a `Triage`: size, schema, the credential, then APNs rules. Runs on the
/// consumer loop, which owns the (single-threaded) decoder. Never throws: every input gets an answer.
struct EventTriage {
    let configuration: RelayConfiguration
    let decoder: EventDecoder
    /// Which credential, if any, sends a topic in an environment: looked up here, once per event.
    let credentials: CredentialDirectory
    /// Leaves the id and metadata echo of a schema-invalid event to `explained` (`Refusal.salvagePending`):
    /// salvaging parses the whole event, which the consumer loop must not pay for every refused event.
    var defersSalvage = false

    func triage(_ inFlight: InFlightEvent, nowSeconds: Int64) -> Triage {
        let message = inFlight.message
        let source = inFlight.source
        let receivedAt = inFlight.receivedAt
        func invalid(
            _ stage: DeadLetter.Stage, code: String, message text: String, id: String? = nil, metadata: [UInt8]? = nil,
            decodingError: EventDecodingError? = nil, salvagePending: Bool = false, broadcast: Bool = false
        ) -> Triage {
            let result = DeliveryResult(
                eventID: id, metadata: metadata, outcome: .invalid, reason: code, message: text,
                attempts: 0, source: source, receivedAt: receivedAt, completedAt: receivedAt
            )
            let refusal = Refusal(stage: stage, code: code, message: text, decodingError: decodingError, salvagePending: salvagePending)
            return .answer(result, refusal, broadcast: broadcast)
        }

        guard let value = message.value, !value.isEmpty else {
            return invalid(.schema, code: "empty_event", message: "the Kafka message has no value")
        }
        // Key and headers count too: they travel with the event into its dead letter and result.
        let limit = min(configuration.maxEventBytes, EventDecoder.maxEventBytes)
        let keyBytes = message.key?.count ?? 0
        let headerBytes = RecordLimits.bytes(of: message.headers) + message.headersLeftOut.bytes
        if message.headersLeftOut.count > 0 {
            let count = message.headers.count + message.headersLeftOut.count
            return invalid(
                .size, code: "event_too_large",
                message: "event has \(count) headers of \(headerBytes) bytes; the relay reads at most \(configuration.headerLimits.count) headers of at most \(configuration.headerLimits.bytes) bytes (relay.maxEventBytes)")
        }
        if value.count + keyBytes + headerBytes > limit {
            let parts = keyBytes + headerBytes == 0 ? "" : " (key \(keyBytes) + value \(value.count) + headers \(headerBytes))"
            return invalid(
                .size, code: "event_too_large",
                message: "event is \(value.count + keyBytes + headerBytes) bytes\(parts); the limit is \(limit) (relay.maxEventBytes)")
        }
        // Read in place from here on (`event.notification`): a copy of the notification would retain each of
        // its buffers.
        var event: NotificationEvent
        do {
            event = try decoder.decode(value)
        } catch {
            // Echo what can still be read of the event, so producers can correlate the result.
            let salvaged = defersSalvage ? SalvagedEvent() : SalvagedEvent(salvaging: value)
            return invalid(
                .schema, code: error.code.rawValue, message: Self.text(of: error), id: salvaged.id, metadata: salvaged.metadata,
                decodingError: error, salvagePending: defersSalvage)
        }
        event.notification.lane = inFlight.lane
        if let expiration = event.notification.expiration, expiration > 0, expiration <= nowSeconds {
            let result = DeliveryResult(
                eventID: event.id, metadata: event.metadata, outcome: .expired, reason: "Expired",
                message: "apns-expiration \(expiration) passed before the event could be sent",
                attempts: 0, source: source, receivedAt: receivedAt, completedAt: receivedAt
            )
            return .answer(result, nil, broadcast: event.notification.isBroadcast)
        }
        if let maxAge = configuration.maxEventAge, let produced = message.timestampMilliseconds, produced > 0,
           receivedAt - produced > maxAge.milliseconds {
            let result = DeliveryResult(
                eventID: event.id, metadata: event.metadata, outcome: .expired, reason: Self.tooOld,
                message: "the event is \((receivedAt - produced) / 1000) s old (Kafka timestamp \(produced) ms); relay.maxEventAgeMs is \(maxAge.milliseconds)",
                attempts: 0, source: source, receivedAt: receivedAt, completedAt: receivedAt
            )
            return .answer(result, nil, broadcast: event.notification.isBroadcast)
        }
        let credential: CredentialDirectory.Credential
        switch credentials.lookup(topic: event.notification.topic, in: event.notification.environment) {
        case .covered(let covering):
            credential = covering
        case .otherEnvironmentOnly(let credentials):
            let names = credentials.map { "'\($0)'" }.joined(separator: ", ")
            return invalid(
                .apnsRules, code: "NoCredentialForEnvironment",
                message: "no configured APNs credential covers topic \(event.notification.topic) in the \(event.notification.environment.rawValue) environment "
                    + "(credential \(names) covers it in the other one only: see its environments key)",
                id: event.id, metadata: event.metadata, broadcast: event.notification.isBroadcast)
        case .uncovered:
            return invalid(
                .apnsRules, code: "NoCredentialForTopic",
                message: "no configured APNs credential covers topic \(event.notification.topic)", id: event.id, metadata: event.metadata,
                broadcast: event.notification.isBroadcast
            )
        }
        do {
            try event.notification.validate(authentication: credential.authentication)
        } catch {
            return invalid(
                .apnsRules, code: error.reason.rawValue, message: error.message, id: event.id, metadata: event.metadata,
                broadcast: event.notification.isBroadcast)
        }
        return .deliver(Delivery(event: event, credential: credential))
    }

    /// The reason of an event older than `relay.maxEventAgeMs` (`expired`, unsent).
    static let tooOld = "MaxEventAgeExceeded"

    private static func text(of error: EventDecodingError) -> String {
        error.message.hasPrefix(error.pointer) || error.pointer.isEmpty ? error.message : "\(error.pointer): \(error.message)"
    }

    /// `result` and `refusal` with the id and metadata salvaged from `bytes` if that is pending, and with
    /// the reference validator's account of what is wrong (every problem, with JSON pointers) instead of
    /// the fast decoder's first one when `validator` is given. Slow (tens of microseconds to a
    /// millisecond): the relay runs it off the consumer loop (`RefusalExplanations`).
    static func explained(
        _ result: DeliveryResult, _ refusal: Refusal, bytes: ArraySlice<UInt8>, by validator: SchemaValidator?
    ) -> (DeliveryResult, Refusal) {
        var result = result
        var refusal = refusal
        if refusal.salvagePending {
            let salvaged = SalvagedEvent(salvaging: bytes)
            result.eventID = salvaged.id
            result.metadata = salvaged.metadata
            refusal.salvagePending = false
        }
        guard let validator, let error = refusal.decodingError else { return (result, refusal) }
        let text = Self.text(of: EventDecoder.explained(error, by: validator, bytes: bytes))
        result.message = text
        refusal.message = text
        refusal.decodingError = nil
        return (result, refusal)
    }
}
