import APNsCore
import APNsMock
import Foundation
import ServiceSupport
import TestSupport
import Testing
@testable import APNsClient

/// APNs behaviour against the mock APNs over real TLS + HTTP/2.
@Suite(.serialized) struct MockAPNsTests {
    @Test func everyPushTypeSendsWithTheRightHeaders() async throws {
        let mock = try await MockFixture.start()
        let client = try mock.client()
        let types = PushType.allCases.filter(\.allowedWithToken)
        for (i, type) in types.enumerated() {
            var n = try MockFixture.notification(i, pushType: type)
            n.expiration = 2_000_000_000 + Int64(i)
            n.collapseID = "collapse-\(i)"
            n.apnsID = String(format: "123e4567-e89b-12d3-a456-%012x", i)
            let response = try await client.send(n, timeout: hangGuard)
            #expect(response.status == 200, "\(type): \(response)")
            #expect(response.apnsID?.lowercased() == n.apnsID)
        }
        let accepted = try await mock.server.waitForAccepted(count: types.count, timeout: .seconds(5))
        for (i, type) in types.enumerated() {
            let a = try #require(accepted.first { $0.pushType == type }, "mock never accepted \(type)")
            #expect(a.topic == type.topic(forBundleID: "com.example.app"))
            #expect(a.priority == (type == .background ? 5 : 10))
            #expect(a.expiration == 2_000_000_000 + Int64(i))
            #expect(a.collapseID == "collapse-\(i)")
            #expect(a.apnsID.lowercased() == String(format: "123e4567-e89b-12d3-a456-%012x", i))
            #expect(a.payload == Array(#"{"aps":{"alert":"hello"}}"#.utf8))
        }
        await client.shutdown()
        await mock.stop()
    }

    /// Every reason of the specification's table (`DocumentedReason`) the mock can answer, injected, comes
    /// back with the documented status and gets the documented decision. Unconfirmed reasons are left out:
    /// APNsCore does not know them, so the mock cannot be told to answer one.
    @Test func everyDocumentedReasonMapsToItsDecision() async throws {
        let mock = try await MockFixture.start()
        let client = try mock.client()
        _ = try await client.send(try MockFixture.notification(), timeout: hangGuard)
        for row in DocumentedReason.all where row.source != .unconfirmed {
            let reason = APNsReason(rawValue: row.reason)
            try #require(reason != .unknown(row.reason), "APNsCore does not know \(row.reason): the mock cannot answer it")
            mock.server.faults.failNext(1, with: reason)
            let response = try await client.send(try MockFixture.notification(), timeout: hangGuard)
            #expect(response.status == row.status, "\(row)")
            #expect(response.reason?.rawValue == row.reason)
            if row.status == 410 { #expect(response.timestamp != nil, "410 carries a timestamp") }
            #expect(DeliveryDecision(response: response) == row.handling.decision(invalidatedAt: response.timestamp), "\(row)")
        }
        let unregistered = try MockFixture.notification(77)
        mock.server.registry.unregister(unregistered.deviceToken!.hex, sinceMilliseconds: 1_700_000_000_123)
        let gone = try await client.send(unregistered, timeout: hangGuard)
        #expect(gone.status == 410)
        #expect(DeliveryDecision(response: gone) == .unregistered(invalidatedAt: 1_700_000_000_123))
        await client.shutdown()
        await mock.stop()
    }

    /// A push's header buffer goes back to its pool when the push is done with, and the next push takes it:
    /// pushes sent one after another keep using one buffer (without reuse, each would leave one more behind).
    /// Sent with `send(_:timeout:)`, whose cancellation ticket once kept every request alive (a cycle through
    /// the ticket's cancel action): then no buffer ever came back.
    @Test func pushesSentOneAfterAnotherReuseOneHeaderBuffer() async throws {
        let mock = try await MockFixture.start()
        let client = try mock.client()
        for i in 0..<20 {
            #expect(try await client.send(try MockFixture.notification(i), timeout: hangGuard).status == 200)
            // Given back when the push's stream request goes, just after its answer: wait for that. (With a
            // cancellation ticket, as here, the request once held itself through the ticket and never went.)
            try await eventually("push \(i)'s header buffer is given back", within: .seconds(10)) {
                client.freeRequestBuffers(for: .production) >= 1
            }
            #expect(client.freeRequestBuffers(for: .production) == 1, "push \(i) took the one buffer and gave it back")
        }
        await client.shutdown()
        await mock.stop()
    }

    @Test func startsAtOneStreamAndRampsUpAfterTheFirstAcceptedPush() async throws {
        let mock = try await MockFixture.start()
        let client = try mock.client { $0.pool.maxConnections = 1 }
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<300 { group.addTask { try await client.send(try MockFixture.notification(i), timeout: hangGuard).status } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == 300 && statuses.allSatisfy { $0 == 200 })
        let stats = mock.server.statistics
        #expect(stats.refusedStreams == 0, "the client never exceeded the advertised limit")
        #expect(stats.connectionsOpened == 1)
        #expect((stats.peakConcurrentStreamsByConnection.values.max() ?? 0) > 1, "ramped up past one stream")
        #expect(client.maxConcurrentStreams(for: .production) == [1000])
        await client.shutdown()
        await mock.stop()
    }

    @Test func goawayMidBurstLosesNothingAndHangsNothing() async throws {
        let mock = try await MockFixture.start()
        mock.server.faults.goAwayAfterStreams = 150
        let client = try mock.client { $0.pool.maxConnections = 4; $0.pool.maxTransparentResends = 10 }
        let results = await withTaskGroup(of: Result<Int, any Error>.self) { group in
            for i in 0..<1000 {
                group.addTask {
                    do { return .success(try await client.send(try MockFixture.notification(i), timeout: hangGuard).status) }
                    catch { return .failure(error) }
                }
            }
            return await group.reduce(into: [Result<Int, any Error>]()) { $0.append($1) }
        }
        #expect(results.count == 1000)
        let ok = results.filter { if case .success(200) = $0 { true } else { false } }.count
        for case .failure(let e) in results { #expect((e as? APNsClientError)?.transportFailure != nil, "\(e)") }
        #expect(mock.server.statistics.accepted == ok, "accepted by the mock == reported delivered")
        #expect(ok == 1000, "never-processed requests are resent transparently")
        #expect(mock.server.statistics.goAwaysSent > 0)
        await client.shutdown()
        await mock.stop()
    }

    /// Every twentieth request goes to a token of the other environment, so the mock answers exactly those
    /// 400 BadDeviceToken, dropping its stream limit to 1 after each; every other request is delivered. Each
    /// request gets its final APNs answer (none ends in a transport failure), and it is the one its token
    /// calls for.
    @Test func streamLimitDroppingToOneAfterRejectionsLosesNothing() async throws {
        let mock = try await MockFixture.start()
        mock.server.faults.dropStreamLimitAfterRejection = true
        let requests = 500
        let otherEnvironment: @Sendable (Int) -> Bool = { $0 % 20 == 0 }
        for i in 0..<requests where otherEnvironment(i) {
            mock.server.registry.register(try MockFixture.notification(i).deviceToken!.hex, environment: .development)
        }
        let expectedRejected = (0..<requests).filter(otherEnvironment).count  // 25
        let client = try mock.client { $0.pool.maxConnections = 2 }
        let results = await withTaskGroup(of: (Int, Result<APNsResponse, any Error>).self) { group in
            for i in 0..<requests {
                group.addTask {
                    do { return (i, .success(try await client.send(try MockFixture.notification(i), timeout: hangGuard))) }
                    catch { return (i, .failure(error)) }
                }
            }
            return await group.reduce(into: [(Int, Result<APNsResponse, any Error>)]()) { $0.append($1) }
        }
        #expect(results.count == requests)
        var delivered = 0
        var rejected = 0
        for (i, result) in results {
            switch result {
            case .success(let r) where otherEnvironment(i):
                #expect(r.status == 400 && r.reason == .badDeviceToken, "request \(i), a token of the other environment: \(r)")
                if r.status == 400 && r.reason == .badDeviceToken { rejected += 1 }
            case .success(let r):
                #expect(r.status == 200, "request \(i): \(r)")
                if r.status == 200 { delivered += 1 }
            case .failure(let e):
                Issue.record("request \(i) got no final answer: \(e)")
            }
        }
        #expect(rejected == expectedRejected, "BadDeviceToken answers")
        #expect(delivered == requests - expectedRejected, "delivered")
        #expect(mock.server.statistics.accepted == delivered)
        // The client ran under the limit of 1: each drop the client acknowledged, from a higher limit, is
        // judged from the acknowledgement on (at most one stream open whenever it opened one, none refused),
        // and the mock restores the limit only after a push sent under it, so a drop followed by more
        // requests held one (the last drop of a connection may come when nothing is left to send).
        let limits = mock.server.statistics.acknowledgedStreamLimitsByConnection
        let drops = limits.values.flatMap { limits in
            limits.indices.dropFirst().filter { limits[$0].limit == 1 && limits[$0 - 1].limit > 1 }.map { limits[$0] }
        }
        #expect(!drops.isEmpty, "the client acknowledged a drop of the limit to 1: \(limits)")
        #expect(drops.contains { $0.opened > 0 }, "a drop held a request sent under it: \(drops)")
        #expect(drops.allSatisfy { $0.kept }, "streams open at once under a limit of 1: \(drops)")
        await client.shutdown()
        await mock.stop()
    }

    @Test func withheldRepliesHitTheDeadline() async throws {
        let mock = try await MockFixture.start()
        let client = try mock.client()
        _ = try await client.send(try MockFixture.notification(), timeout: hangGuard)
        mock.server.faults.withholdNext(3)
        // Only a stream's deadline ends it `.timedOut`, so that failure says the deadline ended it; the time
        // says not before it. (An upper bound on the time would measure the machine's load, not the client:
        // a parallel run once took 2.1 s for these 300 ms.)
        let timeout = Duration.milliseconds(300)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<3 {
                group.addTask {
                    let start = ContinuousClock.now
                    let error = try await #require(throws: APNsClientError.self) {
                        try await client.send(try MockFixture.notification(i), timeout: timeout)
                    }
                    #expect(error.transportFailure == .timedOut)
                    #expect(ContinuousClock.now - start >= timeout)
                }
            }
            try await group.waitForAll()
        }
        #expect(try await client.send(try MockFixture.notification(9), timeout: hangGuard).status == 200)
        await client.shutdown()
        await mock.stop()
    }

    @Test func cancellingTheCallerResetsTheStreamAtOnce() async throws {
        let mock = try await MockFixture.start()
        let client = try mock.client()
        _ = try await client.send(try MockFixture.notification(), timeout: hangGuard)
        mock.server.faults.withholdNext(1)
        let task = Task { try await client.send(try MockFixture.notification(1), timeout: .seconds(30)) }
        try await mock.server.waitUntil("the withheld request arrived", timeout: .seconds(5)) { $0.withheldReplies >= 1 }
        let start = ContinuousClock.now
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(ContinuousClock.now - start < .seconds(2))
        #expect(try await client.send(try MockFixture.notification(2), timeout: hangGuard).status == 200)
        await client.shutdown()
        await mock.stop()
    }

    @Test func refusedStreamsAreResentTransparently() async throws {
        let mock = try await MockFixture.start()
        let client = try mock.client()
        _ = try await client.send(try MockFixture.notification(), timeout: hangGuard)
        mock.server.faults.refuseNext(2)
        #expect(try await client.send(try MockFixture.notification(1), timeout: hangGuard).status == 200)
        #expect(mock.server.statistics.refusedStreams == 2)
        await client.shutdown()
        await mock.stop()
    }

    @Test func droppedConnectionFailsInFlightAndReconnects() async throws {
        let mock = try await MockFixture.start()
        let client = try mock.client()
        _ = try await client.send(try MockFixture.notification(), timeout: hangGuard)
        mock.server.faults.dropConnectionOnNext(1)
        let error = try await #require(throws: APNsClientError.self) {
            try await client.send(try MockFixture.notification(1), timeout: hangGuard)
        }
        #expect(error.transportFailure == .connectionLost)
        #expect(DeliveryDecision(failure: error.transportFailure!) == .retry(.backoff))
        #expect(try await client.send(try MockFixture.notification(2), timeout: hangGuard).status == 200)
        await client.shutdown()
        await mock.stop()
    }

    /// The mock stops returning flow-control credit, so requests whose bodies no longer fit the window
    /// stall. Each stalled request ends by its deadline — not before it, and not later than `deadlineSlack`
    /// after it — with a failure that says so: `.timedOut` once it had a stream, `.notSent` while it waited
    /// for one; any other error or answer fails the test. Once credit flows again, the same client delivers
    /// more than a window's worth.
    @Test func slowReaderStallsWithinDeadlinesAndRecovers() async throws {
        let requestTimeout: Duration = .milliseconds(800)
        // What may pass between a deadline and the caller seeing its failure: the pool sweeps waiting
        // requests every 10 ms, a connection's timer fires at the deadline and its loop gathers a turn for at
        // most `BatchWindow.ceiling` (10 ms); the rest of half a request timeout is for a busy test machine.
        // A request kept past its deadline until something else ended it (the stall lifting, a ping
        // timeout, another request's deadline) overshoots it.
        let deadlineSlack = requestTimeout / 2
        let mock = try await MockFixture.start()
        let client = try mock.client { $0.pool.maxConnections = 1 }
        _ = try await client.send(try MockFixture.notification(), timeout: hangGuard)
        mock.server.faults.stallFlowControl = true
        let big = Array(("{\"aps\":{},\"pad\":\"" + String(repeating: "x", count: 3900) + "\"}").utf8)
        // 100 × 3.9 KB: six windows of 64 KiB. Each request's end is timed in its completion, where the client
        // ends it, not where a task awaiting it resumes: in a full parallel run the tasks of this process can
        // wait for a free executor thread: twice, 84 requests all "ended" together past the slack (1.21 s and
        // 2.13 s after they were sent), when one came free.
        let (ended, endedContinuation) = AsyncStream.makeStream(of: (Int, Duration, Result<APNsResponse, APNsClientError>).self)
        for i in 0..<100 {
            var n = try MockFixture.notification(i)
            n.payload = big[...]
            let start = MonotonicInstant.now
            client.send(n, deadline: start.advanced(by: requestTimeout)) { result in
                endedContinuation.yield((i, MonotonicInstant.now - start, result))
            }
        }
        let results = try await withDeadline("every request of the stall ended", timeout: hangGuard) {
            var results: [(Int, Duration, Result<APNsResponse, APNsClientError>)] = []
            for await end in ended {
                results.append(end)
                if results.count == 100 { break }
            }
            return results
        }
        #expect(results.count == 100)
        var stalled = 0
        var delivered = 0
        for (i, elapsed, result) in results {
            #expect(elapsed <= requestTimeout + deadlineSlack, "request \(i) ended \(elapsed) after it was sent, past its deadline")
            switch result {
            case .success(let response):
                #expect(response.status == 200, "request \(i): \(response)")
                delivered += 1
            case .failure(let error) where error.transportFailure == .timedOut || error.transportFailure == .notSent:
                stalled += 1
                #expect(elapsed >= requestTimeout, "request \(i) failed \(elapsed) after it was sent, before its deadline: \(error)")
            case .failure(let error):
                Issue.record("request \(i) ended with an error other than its deadline passing: \(error)")
            }
        }
        #expect(stalled > 0, "a stalled window must delay some requests past their deadline")
        // HTTP/2's initial connection window (65,535 bytes, apns-reference.md §7) is all a connection may
        // send while no credit comes back.
        #expect(delivered * big.count <= 65_535, "\(delivered) bodies of \(big.count) bytes got through a stalled window")
        mock.server.faults.stallFlowControl = false
        // 20 × 3.9 KB: more than one window, so credit must flow again for all of them to arrive.
        for i in 100..<120 {
            var n = try MockFixture.notification(i)
            n.payload = big[...]
            #expect(try await client.send(n, timeout: hangGuard).status == 200, "request \(i) after the stall")
        }
        await client.shutdown()
        await mock.stop()
    }

    @Test(arguments: [APNsReason.expiredProviderToken, .tooManyProviderTokenUpdates, .unrelatedKeyIdInToken])
    func spoiledTokenConnectionIsReplaced(reason: APNsReason) async throws {
        let mock = try await MockFixture.start()
        let client = try mock.client()
        _ = try await client.send(try MockFixture.notification(), timeout: hangGuard)
        mock.server.faults.failNext(1, with: reason)
        let r = try await client.send(try MockFixture.notification(1), timeout: hangGuard)
        #expect(r.reason == reason)
        #expect(try await client.send(try MockFixture.notification(2), timeout: hangGuard).status == 200)
        // The behaviour, not a count of connections (a full parallel run once saw a third connection open
        // while the replacement was on its way): the request after the spoiled answer went to another
        // connection than the one that got it.
        let accepted = mock.server.acceptedNotifications
        func connection(of i: Int) -> Int? { accepted.first { $0.deviceToken == String(format: "%064x", i + 1) }?.connectionID }
        #expect(connection(of: 0) != nil && connection(of: 2) != nil && connection(of: 0) != connection(of: 2),
                "the spoiled connection was replaced: \(mock.server.statistics.requestsByConnection)")
        await client.shutdown()
        await mock.stop()
    }

    @Test func threeProcessesShareTokensForTwoSimulatedHoursInStrictFleetMode() async throws {
        let start: Int64 = 1_700_000_000
        let clock = ManualWallClock(millisecondsSinceEpoch: start * 1000)
        let mock = try await MockFixture.start(strictFleet: true, clock: clock)
        let tool = try BuiltProducts.executable("apns-client-tool").path
        let clockFile = mock.directory.appendingPathComponent("clock").path
        try String(start).write(toFile: clockFile, atomically: true, encoding: .utf8)
        var processes: [(Process, Pipe, String)] = []
        for p in 0..<3 {
            let progress = mock.directory.appendingPathComponent("progress-\(p)").path
            let process = Process()
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = ["fleet", "--port", String(mock.port), "--ca", mock.caPath, "--key", mock.keyPath,
                                 "--kid", mock.key.keyID, "--team", mock.key.teamID, "--clock-file", clockFile,
                                 "--progress-file", progress, "--per-step", "2", "--max-connections", "2"]
            let out = Pipe()
            process.standardOutput = out
            try startProcess(process)
            processes.append((process, out, progress))
        }
        // Walk 2 hours in 60 s steps, in lockstep: every process sends at each instant before time moves on.
        for t in stride(from: start, through: start + 2 * 3600, by: 60) {
            clock.set(millisecondsSinceEpoch: t * 1000)
            try String(t).write(toFile: clockFile + ".tmp", atomically: false, encoding: .utf8)
            rename(clockFile + ".tmp", clockFile)
            let deadline = ContinuousClock.now.advanced(by: .seconds(20))
            for (_, _, progress) in processes {
                while (try? String(contentsOfFile: progress, encoding: .utf8)).flatMap({ Int64($0) }) != t {
                    guard ContinuousClock.now < deadline else { throw TestFailure("a fleet process did not finish step \(t)") }
                    try await Task.sleep(for: .milliseconds(2))  // polls another process's progress file, bounded by `deadline`
                }
            }
        }
        try "-1".write(toFile: clockFile, atomically: true, encoding: .utf8)
        var outputs: [String] = []
        for (process, out, _) in processes {
            outputs.append(String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
            process.waitUntilExit()
        }
        let stats = mock.server.statistics
        #expect(stats.count(.tooManyProviderTokenUpdates) == 0, "\(outputs)")
        #expect(stats.count(.expiredProviderToken) == 0, "\(outputs)")
        #expect(stats.accepted == 3 * 121 * 2, "\(outputs)")
        for output in outputs { #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == "200=242") }
        await mock.stop()
    }
}
