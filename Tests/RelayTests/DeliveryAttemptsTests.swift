import APNsCore
import Kafka
import ServiceSupport
import Synchronization
import Testing
@testable import Relay

/// Answers from a fixed script, one per call: the retry loop's logic without a network.
/// (End-to-end behaviour against the real mock APNs is covered by the relay's end-to-end tests.)
private final class ScriptedSender: NotificationSender {
    enum Answer: Sendable { case response(APNsResponse), failure(TransportFailure) }
    struct Failure: TransportFailureError {
        let transportFailure: TransportFailure?
        var message: String { "scripted \(transportFailure.map { "\($0)" } ?? "failure")" }
    }
    private let script: Mutex<[Answer]>
    let calls = Atomic<Int>(0)

    init(_ answers: [Answer]) { script = Mutex(answers) }

    func holdUnsentRequests() {}

    func send(
        _ notification: APNsNotification, deadline: MonotonicInstant,
        completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    ) {
        calls.add(1, ordering: .relaxed)
        let next = script.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        switch next {
        case .response(let r)?: completion(.success(r))
        case .failure(let f)?: completion(.failure(Failure(transportFailure: f)))
        case nil: completion(.failure(Failure(transportFailure: .connectionLost)))
        }
    }
}

/// Records what each attempt hands the sender through the event's own form (`answeringTo`), and answers 200.
private final class RecordingSender: NotificationSender {
    let seen = Mutex<[(deadline: MonotonicInstant, now: MonotonicInstant)]>([])

    func holdUnsentRequests() {}

    func send(
        _ notification: APNsNotification, deadline: MonotonicInstant,
        completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    ) {
        Issue.record("the relay sends with the event as the handler (answeringTo)")
        completion(.success(APNsResponse(status: 200, apnsID: "x")))
    }

    func send(_ notification: APNsNotification, deadline: MonotonicInstant, now: MonotonicInstant, answeringTo handler: any APNsAnswerHandler) {
        seen.withLock { $0.append((deadline, now)) }
        handler.answered(.success(APNsResponse(status: 200, apnsID: "x")))
    }
}

extension DeliveryAttempts {
    /// Delivers `notification` as the only event of a partition, with `sender` as its credential's; returns
    /// the report.
    func deliver(_ notification: APNsNotification, with sender: some NotificationSender) async -> DeliveryReport {
        await deliverReturningEvent(notification, with: sender).report
    }

    /// As `deliver(_:with:)`, returning the event as well (its delivery still on it).
    func deliverReturningEvent(_ notification: APNsNotification, with sender: some NotificationSender) async -> (report: DeliveryReport, event: InFlightEvent) {
        let message = KafkaConsumerMessage(topic: "events", partition: 0, offset: 0, key: nil, value: Array("{}".utf8))
        let event = InFlightEvent(message, receivedAt: 0)
        var decoded = NotificationEvent(id: "e", deviceToken: try! DeviceToken(hex: "abcd"), topic: "t", pushType: .alert, payload: [])
        decoded.notification = notification
        event.delivery = Delivery(event: decoded, credential: .init(patterns: [], authentication: .token, sender: sender))
        return await withCheckedContinuation { continuation in
            deliver(event) { finished, report in
                #expect(finished.delivery?.progress.attempts == report.attempts, "the event carries its attempts")
                continuation.resume(returning: (report, finished))
            }
        }
    }
}

@Suite struct DeliveryAttemptsTests {
    private let notification = APNsNotification(
        deviceToken: try! DeviceToken(hex: "abcd"), topic: "com.example", pushType: .alert, payload: ArraySlice("{}".utf8)
    )
    private func attempts(maxAttempts: Int = 5, now: Double = 0) -> DeliveryAttempts {
        DeliveryAttempts(
            policy: RetryPolicy(maxAttempts: maxAttempts, initialBackoff: .milliseconds(1), maxBackoff: .milliseconds(4)),
            requestTimeout: .seconds(1), clock: WallClock { Int64(now * 1e9) }
        )
    }

    /// One reading of the clock per attempt: its deadline is that reading plus the request timeout, the client
    /// starts the request at the same reading (it does not read the clock again), and the removal screen counts
    /// the attempt's answer at it (`DeliveryProgress.lastAttemptAt`: the answer reads no monotonic clock).
    @Test func anAttemptsDeadlineAndItsRequestsStartAreOneReading() async {
        let sender = RecordingSender()
        let (report, event) = await attempts().deliverReturningEvent(notification, with: sender)
        #expect(report.outcome == .delivered)
        let seen = sender.seen.withLock { $0 }
        #expect(seen.count == 1)
        #expect(seen.first.map { $0.deadline - $0.now } == .seconds(1), "the request timeout, from the same reading")
        #expect(event.delivery?.progress.lastAttemptAt == seen.first?.now, "the answer is counted at the attempt's reading")
    }

    @Test func retries503AndGoawayUntilDelivered() async {
        let sender = ScriptedSender([
            .response(APNsResponse(status: 503, reason: .serviceUnavailable)),
            .failure(.notProcessed),
            .response(APNsResponse(status: 200, apnsID: "x")),
        ])
        let report = await attempts().deliver(notification, with: sender)
        #expect(report.outcome == .delivered)
        #expect(report.attempts == 3)
        #expect(report.response?.apnsID == "x")
    }

    @Test func exhaustedRetriesFailWithLastReason() async {
        let sender = ScriptedSender(Array(repeating: .response(APNsResponse(status: 500, reason: .internalServerError)), count: 10))
        let report = await attempts(maxAttempts: 3).deliver(notification, with: sender)
        #expect(report.outcome == .failed)
        #expect(report.attempts == 3)
        #expect(report.response?.reason == .internalServerError)
        #expect(sender.calls.load(ordering: .relaxed) == 3)
    }

    @Test func expiredBeforeRetryIsNotResent() async {
        var expiring = notification
        expiring.expiration = 100
        let sender = ScriptedSender([.response(APNsResponse(status: 429, reason: .tooManyRequests))])
        let report = await attempts(now: 99.9999).deliver(expiring, with: sender)
        #expect(report.outcome == .expired)
        #expect(sender.calls.load(ordering: .relaxed) == 1)
    }

    @Test func goneTokenIsFinal() async {
        let sender = ScriptedSender([.response(APNsResponse(status: 410, reason: .unregistered, timestamp: 7))])
        let report = await attempts().deliver(notification, with: sender)
        #expect(report.outcome == .unregistered)
        #expect(report.decision == .unregistered(invalidatedAt: 7))
    }
}
