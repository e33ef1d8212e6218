import Testing

@testable import Relay

/// The fast path (simdjson + Swift rules) and the reference (valijson) must accept and reject exactly
/// the same events.
@Suite struct DifferentialTests {
    private func disagreements(_ cases: [(label: String, bytes: [UInt8])]) throws -> (accepted: Int, failures: [String]) {
        let decoder = try EventDecoder()
        let reference = try SchemaValidator.notificationEvent()
        var accepted = 0
        var failures: [String] = []
        for item in cases {
            let fast: Result<NotificationEvent, EventDecodingError> = Result { () throws(EventDecodingError) in
                try decoder.decode(item.bytes)
            }
            let fastAccepts = (try? fast.get()) != nil
            let referenceAccepts = reference.isValid(item.bytes)
            if fastAccepts { accepted += 1 }
            if fastAccepts != referenceAccepts {
                let fastSays = fastAccepts ? "accepts" : "refuses (\((try? fast.get()).map { _ in "" } ?? "\(fast)"))"
                let referenceSays = referenceAccepts
                    ? "accepts" : "refuses (\(reference.validate(item.bytes).map(\.description).joined(separator: "; ")))"
                failures.append("\(item.label): fast \(fastSays), reference \(referenceSays): \(item.bytes.escapedForMessage())")
            }
        }
        return (accepted, failures)
    }

    @Test func agreeOnExamplesAndCounterExamples() throws {
        let examples = ["valid", "invalid", "invalid-beyond-schema"].flatMap { Checkout.examples("notification-event", $0) }
        #expect(examples.count > 40)
        let result = try disagreements(examples.map { ($0.name, $0.bytes) })
        #expect(result.failures.isEmpty, "\(result.failures.joined(separator: "\n"))")
        #expect(result.accepted == Checkout.examples("notification-event", "valid").count)
    }

    @Test func agreeOnAMutatedCorpus() throws {
        var corpus = MutationCorpus(seed: 0x5EED_2026)
        let cases = corpus.cases(6000)
        let result = try disagreements(cases.map { ($0.label, $0.bytes) })
        #expect(result.failures.isEmpty, "\(result.failures.count) disagreements:\n\(result.failures.prefix(15).joined(separator: "\n"))")
        // The corpus must exercise both verdicts.
        #expect(result.accepted > cases.count / 10, "only \(result.accepted) accepted")
        #expect(result.accepted < cases.count * 9 / 10, "\(result.accepted) accepted")
    }
}
