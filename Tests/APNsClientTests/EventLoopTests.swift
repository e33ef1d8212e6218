import APNsCore
import APNsMock
import TestSupport
import Testing
@testable import APNsClient

/// One event loop serves many connections: a connection that stalls or dies must not hold up the others.
@Suite(.timeLimit(.minutes(2)))
struct EventLoopTests {
    /// Three clients on one loop: one server answers, one withholds every answer, one goes away. The
    /// healthy connection's requests all complete while the stalled ones are still waiting for theirs.
    @Test func oneLoopServesManyConnectionsAndOneStallingOrDyingDoesNotHoldUpTheOthers() async throws {
        let loops = try APNsEventLoopGroup(loops: 1)
        let running = try loops.runUntilCancelled()
        defer { running.cancel() }
        let healthy = try await MockFixture.start()
        let stalled = try await MockFixture.start()
        let dying = try await MockFixture.start()
        let clients = try [healthy, stalled, dying].map { mock in
            try mock.client(eventLoops: loops) { $0.pool.maxConnections = 2 }
        }
        for client in clients { #expect(try await client.send(try MockFixture.notification(), timeout: hangGuard).status == 200) }

        // The stalled requests' deadline (20 s) is far beyond what the healthy ones need even on a loaded
        // machine (about a second): they may only end, as timed out, after the healthy ones finished.
        stalled.server.faults.withholdAllReplies = true
        let stalledEnded = LiveCount()  // the stalled requests that ended
        let stalledRequests = Task {
            await withTaskGroup(of: APNsClientError?.self) { group in
                for i in 0..<50 {
                    group.addTask {
                        defer { stalledEnded.increment() }
                        do {
                            _ = try await clients[1].send(try MockFixture.notification(i), timeout: .seconds(20))
                            return nil
                        } catch { return error as? APNsClientError }
                    }
                }
                return await group.reduce(into: [APNsClientError?]()) { $0.append($1) }
            }
        }
        try await stalled.server.waitUntil("50 replies withheld", timeout: hangGuard) { $0.withheldReplies >= 50 }
        await dying.stop()  // its connection is closed under the client
        let dyingResults = await withTaskGroup(of: Bool.self) { group in
            for i in 0..<20 {
                group.addTask { (try? await clients[2].send(try MockFixture.notification(i), timeout: .seconds(2))) == nil }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(dyingResults.allSatisfy { $0 }, "a server that is gone answers nothing")

        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<500 { group.addTask { try await clients[0].send(try MockFixture.notification(i), timeout: hangGuard).status } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == 500 && statuses.allSatisfy { $0 == 200 })
        #expect(stalledEnded.current == 0, "the healthy connection finished while the stalled one still waited")
        #expect(healthy.server.statistics.accepted == 501)

        // The stalled requests end as timed out (APNs may have them), not earlier and not never.
        let stalledResults = await stalledRequests.value
        #expect(stalledResults.count == 50)
        #expect(stalledResults.allSatisfy { $0?.transportFailure == .timedOut }, "\(stalledResults.compactMap { $0?.transportFailure })")
        for client in clients { await client.shutdown() }
        #expect(clients.allSatisfy { $0.liveConnections == 0 })
        await healthy.stop()
        await stalled.stop()
    }
}

/// A connection reads every TLS record that has arrived in one turn. (It once read one record per turn, and
/// a busy loop then waited out its batch window before the next: a server that does not coalesce its
/// answers — one record each — got one answer through per window.)
@Suite(.timeLimit(.minutes(2)))
struct EveryRecordReadTests {
    @Test func answersArrivingAsSeparateRecordsAreAllReadInOneTurn() async throws {
        // A long window makes one record per turn unmistakable: 60 answers would take 60 windows (18 s),
        // far past the requests' 5 s deadline; read in one or two turns they take well under a second.
        let loops = try APNsEventLoopGroup(loops: 1, batchWindow: .milliseconds(300))
        let running = try loops.runUntilCancelled()
        defer { running.cancel() }
        let mock = try await MockFixture.start { $0.coalescesWrites = false }
        let client = try mock.client(eventLoops: loops) { $0.pool.maxConnections = 1 }
        #expect(try await client.send(try MockFixture.notification(), timeout: hangGuard).status == 200)  // streams ramp up
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<60 { group.addTask { try await client.send(try MockFixture.notification(i), timeout: .seconds(5)).status } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == 60 && statuses.allSatisfy { $0 == 200 })
        #expect(client.connectionCount(for: .production) == 1)
        await client.shutdown()
        await mock.stop()
    }
}
