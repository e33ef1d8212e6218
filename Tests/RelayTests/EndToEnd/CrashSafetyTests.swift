import Foundation
import Relay
import Logging
import RelaySandbox
import TestSupport
import ServiceSupport
import Testing
import APNsMock

/// The relay as a separate process, killed and restarted mid-stream: nothing may be lost.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct CrashSafetyTests {
    let logger = Logger.quiet("crash")

    @Test func sigkillMidStreamLosesNothingAndDuplicatesStayWithinTheBoundItsConfigurationAllows() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let count = 3000
            // The bound below follows from these: few events in flight against a fixed APNs answer time keep
            // the work a kill can redo well under what a relay that never committed would redo (every event
            // finished before each kill, about 1,800 here).
            // The input is produced before the first relay starts, so the whole of it may be waiting at a kill:
            // the capacity cap decides (50 + 150 + 150 = 350 per kill).
            let bound = DuplicateBound(
                maxInFlight: 50, apnsLatency: .milliseconds(100), commitInterval: .milliseconds(100), feed: .upFront(count))
            sandbox.apns.faults.latency = .init(rtt: bound.apnsLatency)
            let events = (0..<count).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
            try await sandbox.produce(events)
            var environment = sandbox.relayEnvironment(groupID: "crash-\(UUID().uuidString.prefix(8))")
            environment["APNS_RELAY_RELAY_MAX_IN_FLIGHT_EVENTS"] = String(bound.maxInFlight)
            environment["APNS_RELAY_KAFKA_AUTO_COMMIT_INTERVAL_MS"] = String(bound.commitInterval.milliseconds)
            environment["APNS_RELAY_APNS_POOL_ADAPTIVE_CONCURRENCY"] = "false"
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
                do {
                    collected += try await reader.collect(timeout: .seconds(120)) { new in
                        before + new.filter { $0.topic == results }.count >= target
                    }
                } catch {
                    throw TestFailure("round \(round): \(error); relay log:\n\(relay.log.suffix(3000))")
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
            // Seeing every key ends the wait, not the count: the relay has stopped, so the results are read on
            // to their end offsets, and a duplicate written after the last new key is counted too.
            collected += try await reader.readToEnd(of: results, timeout: .seconds(60))
            await reader.close()

            let keys = collected.filter { $0.topic == results }.map(\.keyString)
            #expect(Set(keys) == Set(events.map(\.key)), "every event has a result")
            let duplicates = keys.count - Set(keys).count
            #expect(duplicates <= bound.kills(kills), "\(duplicates) duplicates after \(kills) kills > \(bound.kills(kills)): \(bound)")
            print("crash safety: \(count) events, \(kills) SIGKILLs, \(count - Set(keys).count) lost, \(duplicates) duplicates (bound \(bound.kills(kills)): \(bound))")
        }
    }
}
