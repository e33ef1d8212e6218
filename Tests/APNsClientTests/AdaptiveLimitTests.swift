import APNsCore
import APNsMock
import ServiceSupport
import TestSupport
import Testing
@testable import APNsClient

/// The adaptive limit against the mock APNs over an emulated long link.
@Suite(.serialized) struct AdaptiveLimitTests {
    /// A connection's send window carries 64 KiB per round trip (APNs' and the mock's initial window): 100
    /// pushes of 4 KiB on one connection leave in about 7 round trips, so most wait for window, on our side,
    /// before APNs sees them. That wait is this connection's own queue (more connections cure it), not a
    /// queue at APNs: the limit, which keeps APNs' queue short, must not back off for it. It measures from
    /// the moment a request's last byte went out (before: from when the connection took it, and the limit
    /// fell at the first round trip that waited for window, then probed at its minimum).
    @Test func requestsWaitingForSendWindowDoNotLowerTheLimit() async throws {
        let mock = try await MockFixture.start()
        let client = try mock.client { $0.pool.maxConnections = 1 }
        // The link is long from the first push on: every answer the limit learns from took a round trip.
        mock.server.faults.latency = .init(rtt: .milliseconds(40))
        // The first accepted push opens the connection's streams (APNs starts a connection at one).
        _ = try await client.send(try MockFixture.notification(), timeout: hangGuard)
        let initial = try #require(client.concurrencyLimit(for: .production)?.limit)

        let pushes = 100
        let payload = Array(#"{"aps":{"alert":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: 4000) + Array(#""}}"#.utf8)
        let answers = EventRecorder<Int>()
        let deadline = MonotonicInstant.now + hangGuard
        for i in 1...pushes {
            var notification = try MockFixture.notification(i)
            notification.payload = payload[...]
            client.send(notification, deadline: deadline) { result in
                answers.append((try? result.get().status) ?? 0)
            }
        }
        try await answers.waitUntil("every push answered", within: hangGuard) { $0.count == pushes }
        #expect(answers.entries.allSatisfy { $0 == 200 })
        #expect(client.connectionCount(for: .production) == 1)
        let (limit, baseline) = try #require(client.concurrencyLimit(for: .production))
        #expect(limit >= initial, "the limit backed off from \(initial) to \(limit) for a wait on our own send window")
        // It still measures the path: no answer can come sooner than the emulated round trip after its last byte.
        #expect(baseline.map { $0 >= .milliseconds(40) } == true, "baseline \(String(describing: baseline))")
        await client.shutdown()
    }
}
