import Foundation
import Logging
import RelaySandbox
import TestSupport
import Testing

/// SIGTERM ends the relay within its drain deadline whatever state Kafka is in.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct ShutdownTests {
    let logger = Logger.quiet("shutdown")

    /// Every broker down while results wait for their delivery reports: a send used to await its report
    /// through cancellation (up to `message.timeout.ms`, 300 s), far past Kubernetes' grace period. Now the
    /// producer withdraws what is unacknowledged after the drain deadline and nothing undurable is committed:
    /// a restart with Kafka back answers every event.
    @Test func sigtermWithEveryBrokerDownExitsWithinTheDrainDeadline() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let count = 50
            let events = (0..<count).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
            let port = String(try freeLocalPort())
            var environment = sandbox.relayEnvironment(groupID: "down-\(UUID().uuidString.prefix(8))")
            environment["APNS_RELAY_LOG_LEVEL"] = "info"
            environment["APNS_RELAY_RELAY_DRAIN_TIMEOUT_MS"] = "2000"
            environment["APNS_RELAY_RELAY_REQUEST_TIMEOUT_MS"] = "1000"
            environment["APNS_RELAY_ADMIN_HOST"] = "127.0.0.1"
            environment["APNS_RELAY_ADMIN_PORT"] = port
            let relay = try RelayProcess(environment: environment)
            try await eventually("/readyz answers 200", within: .seconds(60)) { try http("http://127.0.0.1:\(port)/readyz").status == 200 }
            sandbox.apns.faults.withholdAllReplies = true
            try await sandbox.produce(events)
            try await eventually("every event is in flight", within: .seconds(30)) {
                metric(try http("http://127.0.0.1:\(port)/metrics").body, "apns_relay_events_in_flight") == Double(count)
            }
            for broker in 1...sandbox.cluster.brokerCount { try sandbox.cluster.setBrokerDown(Int32(broker)) }
            // APNs answers the retries (after the 1 s request timeout); their results cannot reach Kafka.
            sandbox.apns.faults.withholdAllReplies = false
            try await eventually("APNs answered the retries", within: .seconds(30)) { sandbox.apns.statistics.accepted >= count }

            let clock = ContinuousClock()
            let start = clock.now
            let status = await relay.terminate(timeout: .seconds(20))
            let took = clock.now - start
            #expect(status != nil, "still running 20 s after SIGTERM; log:\n\(relay.log.suffix(3000))")
            #expect(took < .seconds(8), "exited \(took) after SIGTERM; the drain deadline is 2 s")
            print("shutdown with every broker down: exit status \(status.map(String.init) ?? "none") after \(took)")

            for broker in 1...sandbox.cluster.brokerCount { try sandbox.cluster.setBrokerUp(Int32(broker)) }
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let restarted = try RelayProcess(environment: environment)
            let collected = try await reader.collect(timeout: .seconds(120)) { records in
                Set(records.filter { $0.topic == sandbox.options.topics.results }.map(\.keyString)).count >= count
            }
            #expect(await restarted.terminate(timeout: .seconds(20)) == 0)
            await reader.close()
            #expect(Set(collected.filter { $0.topic == sandbox.options.topics.results }.map(\.keyString)) == Set(events.map(\.key)))
        }
    }
}
