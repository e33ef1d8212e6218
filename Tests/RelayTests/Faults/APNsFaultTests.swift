import APNsCore
import APNsMock
import Foundation
import RelaySandbox
import Testing

extension FaultTests {
    /// One relay, one mock APNs, a phase per kind of APNs trouble: GOAWAY every N streams,
    /// MAX_CONCURRENT_STREAMS dropped to 1, 429/500/503 storms, withheld replies, abrupt TCP closes.
    /// Each phase streams its own events and must end with a result for every one of them.
    @Test func apnsMisbehaviourLosesNothing() async throws {
        let perPhase = FaultSize.pick(reduced: 600, full: 3000)
        let maxInFlight = 500
        try await withSandbox(logger: logger) { sandbox in
            let apns = sandbox.apns
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let results = sandbox.options.topics.results
            var phase = 0
            try await withRelay(sandbox, overrides: [
                "relay.maxInFlightEvents": String(maxInFlight),
                // Withheld replies must time out and be retried (5 s, half the default, keeps the phase short);
                // storms need many attempts. 1 s failed pinned runs (`taskset -c 0 make test`): the starved
                // mock's own answers took longer, and 484 of 600 events ran out of attempts on timeouts.
                "relay.requestTimeoutMs": "5000", "relay.retry.maxAttempts": "30",
                "relay.retry.initialBackoffMs": "20", "relay.retry.maxBackoffMs": "500",
            ], logger: logger) { _ in
                /// Streams a phase's events with `arm` applied, waits for all their results, then clears faults.
                func run(_ name: String, arm: () async -> Void, during: (() async throws -> Void)? = nil, faults: (MockStatistics, MockStatistics) -> Int) async throws {
                    let events = faultEvents((phase * perPhase)..<((phase + 1) * perPhase), prefix: "a")
                    phase += 1
                    let before = apns.statistics
                    var tally = ResultTally(resultsTopic: results)
                    await arm()
                    async let producing: Void = produceSpread(sandbox, events, batches: 4, spacing: .milliseconds(300))
                    if let during { try await during() }
                    try await producing
                    try await tally.collect(from: reader, expected: Set(events.map(\.key)), timeout: .seconds(180))
                    apns.faults.reset()
                    await apns.setMaxConcurrentStreams(1000)
                    let injected = faults(before, apns.statistics)
                    finishFaultRun("apns-\(name)", tally: tally, expected: Set(events.map(\.key)), faults: injected, duplicateBound: 0)
                    #expect(tally.outcomes["delivered"] == perPhase, "apns-\(name): every event delivered in the end: \(tally.outcomes), reasons \(tally.reasons)")
                    #expect(injected > 0, "apns-\(name): the fault happened")
                }

                try await run("goaway-every-50-streams", arm: { apns.faults.goAwayAfterStreams = 50 }) { $1.goAwaysSent - $0.goAwaysSent }
                try await run("max-concurrent-streams-1", arm: { await apns.setMaxConcurrentStreams(1) }) { before, after in
                    // The fault is every limit of 1 a connection's client acknowledged in this phase and then
                    // pushed under. Each is judged from its acknowledgement on (a lifetime peak would include
                    // the 500 streams of earlier phases), and at least one set by this phase (not the single
                    // stream every new connection starts with) must have carried pushes: on a connection of an
                    // earlier phase, the limit dropped to 1; on one opened in this phase, it was raised to 1.
                    struct Held { var connection: Int, limit: AcknowledgedStreamLimit, setByThePhase: Bool, dropped: Bool }
                    let underTheLimit: [Held] = after.acknowledgedStreamLimitsByConnection.flatMap { connection, limits in
                        let known = before.acknowledgedStreamLimitsByConnection[connection]?.count ?? 0
                        return limits.indices.dropFirst(known).filter { limits[$0].limit == 1 && limits[$0].opened > 0 }.map { index in
                            Held(connection: connection, limit: limits[index], setByThePhase: index > 0, dropped: index > 0 && limits[index - 1].limit > 1)
                        }
                    }
                    let broken = underTheLimit.filter { !$0.limit.kept }
                    #expect(broken.isEmpty, "streams open at once under an acknowledged limit of 1: \(broken)")
                    #expect(
                        underTheLimit.contains { $0.setByThePhase },
                        "no connection pushed under the limit of 1 this phase set: \(after.acknowledgedStreamLimitsByConnection)")
                    print("fault apns-max-concurrent-streams-1: \(underTheLimit.filter(\.dropped).count) connections pushed after the limit dropped to 1, \(underTheLimit.filter { $0.setByThePhase && !$0.dropped }.count) opened under it; peaks \(underTheLimit.map(\.limit.peak)), requests \(underTheLimit.map(\.limit.opened))")
                    return underTheLimit.count
                }
                try await run("429-500-503-storm", arm: {
                    apns.faults.failNext(perPhase / 4, with: .tooManyRequests)
                    apns.faults.failNext(perPhase / 4, with: .internalServerError)
                    apns.faults.failNext(perPhase / 4, with: .serviceUnavailable)
                    apns.faults.setFailureRate(0.2, for: .serviceUnavailable)
                }) { before, after in
                    [APNsReason.tooManyRequests, .internalServerError, .serviceUnavailable].reduce(0) { $0 + after.count($1) - before.count($1) }
                }
                // A tenth of the replies never come, spread over the phase. (A run of them, `withholdNext`, is
                // a black hole the relay rightly sends little into: APNs gives a new connection one stream
                // until its first push succeeds, and a connection goes after 3 timeouts, so 300 in a row
                // took minutes to use up.)
                try await run("withheld-replies", arm: { apns.faults.withholdRate = 0.1 }) { $1.withheldReplies - $0.withheldReplies }
                try await run("abrupt-tcp-close", arm: { apns.faults.dropConnectionOnNext(5) }, during: {
                    // A second kind of close while the stream runs: every connection at once, then a GOAWAY.
                    try await Task.sleep(for: .milliseconds(400))  // spaces the injected faults in time
                    await apns.closeAllConnections()
                    try await Task.sleep(for: .milliseconds(400))  // spaces the injected faults in time
                    await apns.goAway()
                }) { $1.droppedConnections - $0.droppedConnections + $1.goAwaysSent - $0.goAwaysSent }
            }
            await reader.close()
        }
    }
}
