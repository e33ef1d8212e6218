import APNsMock
import Foundation
import Logging
import RelaySandbox
import Testing

/// A slow APNs (it answers 250 requests a second) and a backlog of 1500 events. Sent as fast as APNs'
/// streams allow (1000 per connection), those beyond the first 625 would wait there past the 2.5 s request
/// timeout and be resent: pushes a user sees twice. With the adaptive concurrency limit the backlog waits
/// here, unsent, and every device gets its notification once.
///
/// The limit starts at 100 requests (0.4 s of this APNs). The timeout leaves that first window 2 s of
/// slack: with 400 answers/s and a 1.5 s timeout (1.25 s of slack) a suite that loaded both cores once
/// expired the whole window — the mock runs in the test process and was not scheduled in time — and its
/// 100 resends counted as duplicates.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct SlowAPNsTests {
    let logger = Logger.quiet("slow-apns")

    /// Runs the backlog; returns (pushes the devices got twice or more, outcomes, events whose device got
    /// a push twice but whose result does not say it may have).
    private func run(adaptive: Bool) async throws -> (duplicatePushes: Int, outcomes: [String: Int], unflagged: [String]) {
        try await withSandbox(logger: logger) { sandbox in
            let count = 1500
            sandbox.apns.faults.latency = .init(rtt: .milliseconds(5), answersPerSecond: 250)
            let events = faultEvents(0..<count, prefix: "s")
            try await sandbox.produce(events)
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            var tally = ResultTally(resultsTopic: sandbox.options.topics.results)
            try await withRelay(sandbox, overrides: [
                "relay.requestTimeoutMs": "2500", "apns.pool.adaptiveConcurrency": String(adaptive),
                "relay.retry.maxAttempts": "30",
            ], logger: logger) { _ in
                // Without the limit every wave of timeouts is resent into the same slow APNs, so the last events
                // finish late, and later still when the rest of the suite takes the mock's CPU: 41–66 s in
                // `make test`, 74–129 s with every suite at once (one run left 7 of 1,500 unanswered at 120 s).
                try await tally.collect(from: reader, expected: Set(events.map(\.key)), timeout: .seconds(240))
            }
            await reader.close()
            let pushes = sandbox.apns.statistics.acceptedByDeviceToken
            let pushedTwice = (0..<count).filter { (pushes[SampleEvents.token($0)] ?? 0) > 1 }.map { "s\($0)" }
            let unflagged = pushedTwice.filter { !tally.possibleDuplicateKeys.contains($0) }
            return (pushes.values.reduce(0) { $0 + max(0, $1 - 1) }, tally.outcomes, unflagged)
        }
    }

    @Test func aBacklogWaitsHereAndEveryDeviceGetsItsPushOnce() async throws {
        let (duplicates, outcomes, _) = try await run(adaptive: true)
        print("slow APNs, adaptive limit: \(duplicates) duplicate pushes, outcomes \(outcomes)")
        #expect(outcomes == ["delivered": 1500], "every event delivered")
        #expect(duplicates == 0, "no device got a push twice")
    }

    /// The same backlog without the limit: the scenario is real (this is what the limit prevents).
    @Test func withoutTheLimitTheBacklogTimesOutThereAndIsPushedTwice() async throws {
        let (duplicates, outcomes, unflagged) = try await run(adaptive: false)
        print("slow APNs, no limit: \(duplicates) duplicate pushes, outcomes \(outcomes)")
        #expect(duplicates > 100, "requests that waited at APNs past the timeout were resent")
        // Each of them is reported: the event's result says an attempt may have reached APNs.
        #expect(unflagged.isEmpty, "\(unflagged.count) events pushed twice without possibleDuplicates in their result, e.g. \(unflagged.prefix(5))")
    }
}
