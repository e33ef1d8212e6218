import Foundation
import Relay
import Logging
import RelaySandbox
import Testing

/// The relay as a separate process, killed and restarted mid-stream: nothing may be lost.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct CrashSafetyTests {
    let logger = Logger.quiet("crash")

    @Test func sigkillMidStreamLosesNothingAndDuplicatesStayWithinTheInFlightBound() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let count = 3000
            let maxInFlight = 200
            let events = (0..<count).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
            try await sandbox.produce(events)
            var environment = sandbox.relayEnvironment(groupID: "crash-\(UUID().uuidString.prefix(8))")
            environment["APNS_RELAY_RELAY_MAX_IN_FLIGHT_EVENTS"] = String(maxInFlight)
            environment["APNS_RELAY_KAFKA_AUTO_COMMIT_INTERVAL_MS"] = "100"
            environment["APNS_RELAY_LOG_LEVEL"] = "warning"
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let results = sandbox.options.topics.results
            var collected: [OutputReader.Record] = []
            let kills = 3
            for round in 1...kills {
                let relay = try RelayProcess(environment: environment)
                // Kill it once it has made some progress in this round.
                let before = collected.filter { $0.topic == results }.count
                let target = before + count / (kills + 2)
                collected += try await reader.collect(timeout: .seconds(120)) { new in
                    before + new.filter { $0.topic == results }.count >= target
                }
                relay.kill()
                logger.info("killed relay", metadata: ["round": "\(round)", "results": "\(collected.count)"])
            }
            let relay = try RelayProcess(environment: environment)
            let seenBefore = Set(collected.filter { $0.topic == results }.map(\.keyString))
            collected += try await reader.collect(timeout: .seconds(180)) { new in
                seenBefore.union(new.filter { $0.topic == results }.map(\.keyString)).count >= count
            }
            let status = await relay.terminate(timeout: .seconds(30))
            #expect(status == 0, "SIGTERM ends the relay cleanly; log:\n\(relay.log.suffix(2000))")
            await reader.close()

            let keys = collected.filter { $0.topic == results }.map(\.keyString)
            #expect(Set(keys) == Set(events.map(\.key)), "every event has a result")
            let duplicates = keys.count - Set(keys).count
            // The relay's peak rate: results completed within the busiest second of the run.
            var perSecond: [Int: Int] = [:]
            for record in collected where record.topic == results {
                if let completed = record.json?["completedAt"] as? Int { perSecond[completed / 1000, default: 0] += 1 }
            }
            let peak = perSecond.values.max() ?? 0
            // Per kill: the events in flight, plus those finished since the last commit: commits run every
            // 100 ms and take a round trip, so allow a quarter second of work at the peak rate.
            let bound = kills * (maxInFlight + peak / 4)
            #expect(duplicates <= bound, "\(duplicates) duplicates after \(kills) kills; bound \(bound) at a peak of \(peak) results/s")
            print("crash safety: \(count) events, \(kills) SIGKILLs, 0 lost, \(duplicates) duplicates (bound \(bound))")
        }
    }
}
