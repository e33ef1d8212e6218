import APNsCore
import APNsMock
import ServiceSupport
import Synchronization
import TestSupport
import Testing
@testable import APNsClient

/// Urgent pushes through a real client against the mock APNs while a bulk campaign floods the pool.
@Suite(.serialized) struct UrgentLaneTests {
    struct Answer: Sendable {
        let lane: DeliveryLane
        let accepted: Bool
    }

    /// A slow APNs (200 answers a second) with 20 streams per connection and one connection: with a fifth
    /// kept for urgent, bulk holds at most 16 streams (or less when the adaptive limit is lower), and an
    /// urgent push sent behind 200 bulk ones is answered long before they drain.
    @Test(arguments: [false, true])
    func anUrgentPushOvertakesABulkFloodThatKeepsToItsShare(adaptiveConcurrency: Bool) async throws {
        let mock = try await MockFixture.start { $0.maxConcurrentStreams = 20 }
        let client = try mock.client {
            $0.pool.maxConnections = 1
            $0.pool.adaptiveConcurrency = adaptiveConcurrency
            $0.pool.urgentShare = 0.2
        }
        // The first accepted push opens the connection's 20 streams (APNs starts a connection at one).
        _ = try await client.send(try MockFixture.notification(), timeout: hangGuard)
        mock.server.faults.latency = .init(rtt: .milliseconds(2), answersPerSecond: 200)

        let flood = 200
        let answers = EventRecorder<Answer>()
        // Bulk in flight as the pool saw it after each answer (its hand-offs to waiters come first).
        let peakBulk = Mutex(0)
        let deadline = MonotonicInstant.now + hangGuard
        for i in 1...flood {
            client.send(try MockFixture.notification(i), deadline: deadline) { result in
                let bulk = client.requestsByLane(for: .production).bulkInFlight
                peakBulk.withLock { $0 = max($0, bulk) }
                answers.append(Answer(lane: .bulk, accepted: (try? result.get().status) == 200))
            }
        }
        let queued = client.requestsByLane(for: .production)
        #expect(queued.bulkInFlight <= 16 && queued.bulkWaiting > flood / 2, "the flood waits in the pool: \(queued)")

        var login = try MockFixture.notification(flood + 1)
        login.lane = .urgent
        client.send(login, deadline: deadline) { result in
            answers.append(Answer(lane: .urgent, accepted: (try? result.get().status) == 200))
        }
        try await answers.waitUntil("every push answered", within: hangGuard) { $0.count == flood + 1 }

        #expect(answers.entries.filter { !$0.accepted }.isEmpty, "every push was accepted")
        let bulkBefore = try #require(answers.entries.firstIndex { $0.lane == .urgent })
        #expect(bulkBefore < flood / 2, "the urgent push was answered after \(bulkBefore) of \(flood) bulk ones")
        let peak = peakBulk.withLock { $0 }
        #expect(peak <= 16, "bulk never holds more than floor(20 × 0.8) streams: \(peak)")
        #expect(peak > 1, "bulk did use its share: \(peak)")
        #expect(client.requestsByLane(for: .production) == .init())
        await client.shutdown()
        await mock.stop()
    }
}
