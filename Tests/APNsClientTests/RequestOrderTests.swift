import APNsCore
import APNsMock
import ServiceSupport
import TestSupport
import Testing
@testable import APNsClient

/// Requests one caller hands the client in turn reach APNs in that order, even when most of them wait: the
/// pool's queue, a connection's inbox (requests handed from other threads, taken at the loop's next turn) and
/// its stream table are each first in, first out. (With the inbox taken last-in-first-out, it failed.)
@Suite(.timeLimit(.minutes(3)))
struct RequestOrderTests {
    @Test func requestsThatWaitForStreamsGoOutInTheOrderTheyWereSent() async throws {
        // Four streams on one connection: of 300 requests sent at once, all but four wait, in the pool and then
        // in the connection, and go out as answers free streams, several to a turn.
        let mock = try await MockFixture.start { $0.maxConcurrentStreams = 4 }
        let client = try mock.client {
            $0.pool.maxConnections = 1
            $0.pool.adaptiveConcurrency = false
        }
        // The first accepted push opens the connection's four streams (APNs starts a connection at one).
        _ = try await client.send(try MockFixture.notification(0), timeout: hangGuard)

        let count = 300
        let answers = EventRecorder<Int>()
        let deadline = MonotonicInstant.now + hangGuard
        for i in 1...count {
            client.send(try MockFixture.notification(i), deadline: deadline) { result in
                answers.append((try? result.get().status) ?? -1)
            }
        }
        // Most wait, so that each answer hands a waiting request on, several to a turn.
        let queued = client.requestsByLane(for: .production)
        #expect(queued.bulkWaiting > count / 2, "most requests wait in the pool: \(queued)")
        try await answers.waitUntil("every push answered", within: hangGuard) { $0.count == count }
        let peak = mock.server.statistics.peakConcurrentStreamsByConnection.values.max() ?? 0
        #expect(peak > 1 && peak <= 4, "the connection had several streams open, never more than four: \(peak)")
        #expect(answers.entries.allSatisfy { $0 == 200 }, "every push was accepted")

        let sent = try (1...count).map { try #require(try MockFixture.notification($0).deviceToken).hex }
        let received = mock.server.acceptedNotifications.suffix(count).map(\.deviceToken)
        let firstOutOfOrder = zip(sent, received).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(received.count == count && firstOutOfOrder == nil,
                "APNs received \(received.count) of \(count), the first out of order at \(firstOutOfOrder.map(String.init) ?? "-")")
        await client.shutdown()
        await mock.stop()
    }
}
