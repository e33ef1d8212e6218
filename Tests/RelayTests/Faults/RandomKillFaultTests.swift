import Foundation
import RelaySandbox
import TestSupport
import ServiceSupport
import Testing
import APNsMock

extension FaultTests {
    /// The relay process is SIGKILLed at random points of a stream of events (during the group join, mid
    /// delivery, between commits) and restarted each time. Seeded: `APNS_RELAY_FAULTS_SEED=<seed>` replays a
    /// run's kill points. Both lanes are in use: a stream into the urgent topic runs beside the bulk one.
    @Test func randomSigkillsDuringAStreamLoseNothing() async throws {
        let seed = FaultSize.seed()
        print("fault random-sigkill: seed \(seed) (replay with APNS_RELAY_FAULTS_SEED=\(seed))")
        var random = SeededGenerator(seed: seed)
        let kills = FaultSize.pick(reduced: 5, full: 20)
        // APNs answers in 100 ms, so every incarnation has events in flight when it dies; the duplicates a
        // kill can cause follow from these settings (see DuplicateBound). The feed is 33 events per 100 ms,
        // but what waits when a kill's span begins has no bound short of the whole stream (66,000): the
        // killed relay's partitions stay with it until its successor has started and joined, however long
        // that takes on a busy machine, and the successor may be killed while it works through that pile.
        // The relay's capacity is then the cap: 200 in flight + 600 finished behind an unfinished one + 600
        // stored and not committed = 1,400 per kill.
        let bound = DuplicateBound(
            maxInFlight: 200, apnsLatency: .milliseconds(100), commitInterval: .milliseconds(100),
            feed: .init(events: 33, per: .milliseconds(100), backlog: 6 * 10_000 + 6 * 1_000))
        var options = RelaySandbox.Options()
        options.partitions = 6
        options.topics.urgent = [faultUrgentTopic]
        try await withSandbox(options, logger: logger) { sandbox in
            sandbox.apns.faults.latency = .init(rtt: bound.apnsLatency)
            var environment = sandbox.relayEnvironment(groupID: "kills-\(UUID().uuidString.prefix(8))")
            environment["APNS_RELAY_RELAY_MAX_IN_FLIGHT_EVENTS"] = String(bound.maxInFlight)
            environment["APNS_RELAY_KAFKA_AUTO_COMMIT_INTERVAL_MS"] = String(bound.commitInterval.milliseconds)
            environment["APNS_RELAY_APNS_POOL_ADAPTIVE_CONCURRENCY"] = "false"
            environment["APNS_RELAY_LOG_LEVEL"] = "warning"
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            var tally = ResultTally(resultsTopic: sandbox.options.topics.results)
            let stream = try EventStream(sandbox: sandbox, logger: logger)
            let urgentStream = try EventStream(sandbox: sandbox, topic: faultUrgentTopic, logger: logger)
            // 300 events/s for as long as the kills take (at most 10000 per partition: the mock keeps ~5 MB each).
            async let streamed = stream.run(batch: 30, interval: .milliseconds(100), limit: 6 * 10_000) { n in
                (key: "k\(n)", value: SampleEvents.event(id: "k\(n)", deviceToken: SampleEvents.token(n)))
            }
            async let urgentStreamed = urgentStream.run(batch: 3, interval: .milliseconds(100), limit: 6 * 1_000) { n in
                (key: "u\(n)", value: SampleEvents.event(id: "u\(n)", deviceToken: SampleEvents.token(1_000_000 + n)))
            }
            var killPoints: [String] = []
            for _ in 0..<kills {
                let relay = try RelayProcess(environment: environment)
                if Int.random(in: 0..<3, using: &random) == 0 {
                    // A kill at a random moment after start: often during start-up or the group join.
                    let delay = Int.random(in: 200...6000, using: &random)
                    killPoints.append("\(delay)ms")
                    try await Task.sleep(for: .milliseconds(delay))  // the random kill point itself, not a wait
                } else {
                    // A kill after a random amount of progress, mid-stream.
                    let progress = Int.random(in: 1...400, using: &random)
                    killPoints.append("+\(progress)")
                    try await tally.collect(from: reader, untilResults: tally.results + progress, timeout: .seconds(120))
                }
                relay.kill()
            }
            stream.stop()
            urgentStream.stop()
            let count = try await streamed
            let urgentCount = try await urgentStreamed
            await stream.close()
            await urgentStream.close()
            let expected = Set((0..<count).map { "k\($0)" } + (0..<urgentCount).map { "u\($0)" })
            let relay = try RelayProcess(environment: environment)
            try await tally.collect(from: reader, expected: expected, timeout: .seconds(240))
            let status = await relay.terminate(timeout: .seconds(30))
            #expect(status == 0, "SIGTERM ends the last relay cleanly; log:\n\(relay.log.suffix(2000))")
            // The last relay has stopped: the results read to their end, so a duplicate written late counts too.
            tally.add(try await reader.readToEnd(of: sandbox.options.topics.results, timeout: .seconds(60)))
            await reader.close()
            print("fault random-sigkill: kill points \(killPoints.joined(separator: " "))")
            print("fault random-sigkill: duplicate bound \(bound)")
            finishFaultRun("random-sigkill", tally: tally, expected: expected, kills: kills, faults: kills, duplicateBound: bound.kills(kills))
        }
    }
}
