import APNsCore
import Foundation
import Kafka
import ServiceSupport
import Testing

@testable import Relay

/// README.md's example event is what new users copy: it must be an event the relay sends, not one it
/// answers `invalid` or `expired` (its `expiration` once passed on 1 Jan 2026).
@Suite struct ReadmeExampleTests {
    @Test func theExampleEventIsSentAndStaysValidForYears() throws {
        let example = try Checkout.readmeBlock(after: "## The event contract", language: "json")
        let triage = EventTriage(configuration: RelayConfiguration(topics: .init(input: ["notifications"], results: "results", removedTokens: "removed", deadLetters: "dead")), decoder: try EventDecoder(), credentials: CredentialDirectory([.init(patterns: [], authentication: .token, sender: NoSender())]))
        let message = KafkaConsumerMessage(topic: "notifications", partition: 0, offset: 0, key: nil, value: Array(example.utf8))
        let inTenYears = Int64(Date().timeIntervalSince1970) + 10 * 365 * 86_400
        switch triage.triage(InFlightEvent(message, receivedAt: 0), nowSeconds: inTenYears) {
        case .deliver(let delivery):
            #expect(delivery.event.id == "order-4711-shipped")
        case .answer(let result, let refusal, _):
            Issue.record("README's example event is answered \(result.outcome) (\(result.reason ?? "")): \(refusal?.message ?? result.message ?? "")")
        }
    }
}

/// Triage only looks the credential up; nothing is sent.
private struct NoSender: NotificationSender {
    func send(
        _ notification: APNsNotification, deadline: MonotonicInstant,
        completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    ) { Issue.record("triage sent a notification") }
    func holdUnsentRequests() {}
}
