import Foundation
import Testing
import APNsCore

@testable import Relay

/// The fast path (simdjson + Swift rules) and the reference (valijson) must accept and reject exactly
/// the same events.
@Suite struct DifferentialTests {
    private func disagreements(_ cases: [(label: String, bytes: [UInt8])]) throws -> (accepted: Int, broadcasts: Int, failures: [String]) {
        let decoder = try EventDecoder()
        let reference = try SchemaValidator.notificationEvent()
        // The raw payload and metadata slices must be whole JSON objects on their own.
        let anyObject = try SchemaValidator(schemaJSON: #"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}"#)
        var accepted = 0
        var broadcasts = 0
        var failures: [String] = []
        for item in cases {
            let fast: Result<NotificationEvent, EventDecodingError> = Result { () throws(EventDecodingError) in
                try decoder.decode(item.bytes)
            }
            let fastAccepts = (try? fast.get()) != nil
            let referenceAccepts = reference.isValid(item.bytes)
            // The detailed pass (every constraint, on a large stack) must reach the same verdict.
            if reference.validate(item.bytes).isEmpty != referenceAccepts {
                failures.append("\(item.label): valijson's verdict and detailed pass differ")
            }
            if fastAccepts { accepted += 1 }
            if let decoded = try? fast.get(), decoded.isBroadcast { broadcasts += 1 }
            if let decoded = try? fast.get(), let omission = Self.refusalForOmittedHeader(decoded, item.bytes) {
                failures.append("\(item.label): accepted by the schema but refused for a header it left out: \(omission)")
            }
            if case .failure(let error) = fast, error.code == .internalError {
                failures.append("\(item.label): internal_error blames the relay for bad input: \(error)")
            }
            if !fastAccepts {
                // What a result record would echo; must not crash on any input.
                _ = SalvagedEvent(salvaging: item.bytes)
            }
            if let decoded = try? fast.get() {
                for (name, slice) in [("payload", Array(decoded.payload)), ("metadata", decoded.metadata)] {
                    guard let slice else { continue }
                    if !anyObject.isValid(slice) || slice.first != UInt8(ascii: "{") || slice.last != UInt8(ascii: "}") {
                        failures.append("\(item.label): \(name) slice is not a JSON object: \(slice.escapedForMessage())")
                    }
                }
            }
            if fastAccepts != referenceAccepts {
                let fastSays = fastAccepts ? "accepts" : "refuses (\((try? fast.get()).map { _ in "" } ?? "\(fast)"))"
                let referenceSays = referenceAccepts
                    ? "accepts" : "refuses (\(reference.validate(item.bytes).map(\.description).joined(separator: "; ")))"
                failures.append("\(item.label): fast \(fastSays), reference \(referenceSays): \(item.bytes.escapedForMessage())")
            }
        }
        return (accepted, broadcasts, failures)
    }

    /// An APNs-rule refusal that blames a field the event did not set: the defaults for omitted fields must be
    /// ones APNs accepts (e.g. priority 5 for background pushes).
    static func refusalForOmittedHeader(_ event: NotificationEvent, _ bytes: [UInt8]) -> String? {
        let violation: NotificationRuleViolation
        do {
            _ = try event.validatedNotification(now: 0)
            return nil
        } catch {
            violation = error
        }
        let fields = (try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]).map { Set($0.keys) } ?? []
        let blamed: [APNsReason: String] = [
            .badPriority: "priority", .badExpirationDate: "expiration", .badCollapseId: "collapseId", .badMessageId: "apnsId",
        ]
        guard let field = blamed[violation.reason], !fields.contains(field) else { return nil }
        return "\(violation) without \(field)"
    }

    @Test func agreeOnExamplesAndCounterExamples() throws {
        let examples = ["valid", "invalid", "invalid-beyond-schema"].flatMap { Checkout.examples("notification-event", $0) }
        #expect(examples.count > 40)
        let result = try disagreements(examples.map { ($0.name, $0.bytes) })
        #expect(result.failures.isEmpty, "\(result.failures.joined(separator: "\n"))")
        #expect(result.accepted == Checkout.examples("notification-event", "valid").count)
    }

    @Test func agreeOnAMutatedCorpus() throws {
        // Fixed seed so every run checks the same corpus; RELAY_CORPUS_SEED explores others.
        let seed = ProcessInfo.processInfo.environment["RELAY_CORPUS_SEED"].flatMap { UInt64($0) } ?? 0x5EED_2026
        var corpus = MutationCorpus(seed: seed)
        let cases = corpus.cases(6000)
        let result = try disagreements(cases.map { ($0.label, $0.bytes) })
        #expect(result.failures.isEmpty, "\(result.failures.count) disagreements:\n\(result.failures.prefix(15).joined(separator: "\n"))")
        // The corpus must exercise both verdicts.
        #expect(result.accepted > cases.count / 10, "only \(result.accepted) accepted")
        #expect(result.accepted < cases.count * 9 / 10, "\(result.accepted) accepted")
        // And both forms: device pushes and broadcasts.
        #expect(result.broadcasts > result.accepted / 5 && result.broadcasts < result.accepted / 2, "\(result.broadcasts) of \(result.accepted) accepted are broadcasts")
    }
}
