import APNsMock
import Foundation
import Logging
import Relay
import RelaySandbox
import TestSupport
import Testing
import Kafka

/// SIGTERM ends the relay within its drain deadline whatever state Kafka is in.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct ShutdownTests {
    let logger = Logger.quiet("shutdown")

    private static func events(_ count: Int) -> [(key: String, value: [UInt8])] {
        (0..<count).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
    }

    /// The relay's environment for these tests: its admin endpoint on `port`, `extra` on top.
    private func environment(_ sandbox: RelaySandbox, group: String, port: String, extra: [String: String]) -> [String: String] {
        var environment = sandbox.relayEnvironment(groupID: "\(group)-\(UUID().uuidString.prefix(8))")
        environment["APNS_RELAY_LOG_LEVEL"] = "info"
        environment["APNS_RELAY_ADMIN_HOST"] = "127.0.0.1"
        environment["APNS_RELAY_ADMIN_PORT"] = port
        return environment.merging(extra) { $1 }
    }

    /// Brings every broker back, runs a relay with `environment` again and expects a result for every event.
    private func restartAndExpectEveryResult(_ sandbox: RelaySandbox, environment: [String: String], events: [(key: String, value: [UInt8])]) async throws {
        for broker in 1...sandbox.cluster.brokerCount { try sandbox.cluster.setBrokerUp(Int32(broker)) }
        let reader = try OutputReader(sandbox: sandbox, logger: logger)
        let restarted = try RelayProcess(environment: environment)
        let collected = try await reader.collect(timeout: .seconds(120)) { records in
            Set(records.filter { $0.topic == sandbox.options.topics.results }.map(\.keyString)).count >= events.count
        }
        #expect(await restarted.terminate(timeout: .seconds(20)) == 0)
        await reader.close()
        #expect(Set(collected.filter { $0.topic == sandbox.options.topics.results }.map(\.keyString)) == Set(events.map(\.key)))
    }

    /// Every broker down while results wait for their delivery reports: a send used to await its report
    /// through cancellation (up to `message.timeout.ms`, 300 s), far past Kubernetes' grace period. Now the
    /// producer withdraws what is unacknowledged after the drain deadline and nothing undurable is committed:
    /// a restart with Kafka back answers every event.
    @Test func sigtermWithEveryBrokerDownExitsWithinTheDrainDeadline() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let count = 50
            let events = Self.events(count)
            let port = String(try freeLocalPort())
            let environment = environment(sandbox, group: "down", port: port, extra: [
                "APNS_RELAY_RELAY_DRAIN_TIMEOUT_MS": "2000", "APNS_RELAY_RELAY_REQUEST_TIMEOUT_MS": "1000",
            ])
            let relay = try RelayProcess(environment: environment)
            try await eventually("/readyz answers 200", within: .seconds(60)) { try await http("http://127.0.0.1:\(port)/readyz").status == 200 }
            sandbox.apns.faults.withholdAllReplies = true
            try await sandbox.produce(events)
            try await eventually("every event is in flight", within: .seconds(30)) {
                metric(try await http("http://127.0.0.1:\(port)/metrics").body, "apns_relay_events_in_flight") == Double(count)
            }
            for broker in 1...sandbox.cluster.brokerCount { try sandbox.cluster.setBrokerDown(Int32(broker)) }
            // APNs answers the retries (after the 1 s request timeout); their results cannot reach Kafka.
            sandbox.apns.faults.withholdAllReplies = false
            try await eventually("APNs answered the retries", within: .seconds(30)) { sandbox.apns.statistics.accepted >= count }

            let clock = ContinuousClock()
            let start = clock.now
            let status = await relay.terminate(timeout: .seconds(20))
            let took = clock.now - start
            // A stop that abandons undurable work is still an orderly one: exit 0, not a crash or a kill.
            #expect(status == 0, "exit status \(status.map(String.init) ?? "none (still running 20 s after SIGTERM)"); log:\n\(relay.log.suffix(3000))")
            // The drain deadline, then three steps each bounded by the Kafka-down grace: the flush of what the
            // producer holds, the producer's close and the consumer's close (RelayService.close()). What this
            // guards against is a wait for `message.timeout.ms` (300 s); a busy machine adds its scheduling to
            // the steps (once 0.6 s over their sum), so the bound is twice their sum, still far from 300 s.
            let steps = Duration.milliseconds(2000) + RelayService.closeTimeoutKafkaDown * 3
            let bound = steps * 2
            #expect(took < bound, "exited \(took) after SIGTERM; the drain deadline (2 s) and closing (3 × \(RelayService.closeTimeoutKafkaDown)) take \(steps), allowed twice that")
            print("shutdown with every broker down: exit status \(status.map(String.init) ?? "none") after \(took) (bound \(bound))")

            try await restartAndExpectEveryResult(sandbox, environment: environment, events: events)
        }
    }

    /// SIGTERM while Kafka is unreachable: no result can be published, so every event still in flight is
    /// redone by its partition's next owner, and every push started during the drain would reach its device
    /// twice. The drain sends nothing more (it used to go on: 1,516 pushes in a 20 s drain, measured from
    /// outside); only what APNs already had finishes. Nothing is lost: a restart with Kafka back answers every
    /// event.
    @Test func aDrainWithKafkaUnreachableStartsNoNewPushes() async throws {
        var options = RelaySandbox.Options()
        options.maxConcurrentStreams = 10
        try await withSandbox(options, logger: logger) { sandbox in
            let count = 300
            let events = Self.events(count)
            let port = String(try freeLocalPort())
            let environment = environment(sandbox, group: "hold", port: port, extra: [
                "APNS_RELAY_RELAY_DRAIN_TIMEOUT_MS": "3000", "APNS_RELAY_APNS_POOL_MAX_CONNECTIONS": "1",
            ])
            // One connection, 10 streams, 300 ms per answer: ~33 pushes a second, the rest waits in the pool.
            sandbox.apns.faults.latency = FaultInjector.Latency(rtt: .milliseconds(300))
            let relay = try RelayProcess(environment: environment)
            try await eventually("/readyz answers 200", within: .seconds(60)) { try await http("http://127.0.0.1:\(port)/readyz").status == 200 }
            try await sandbox.produce(events)
            // Most events wait in the pool (answers end some of them meanwhile, so not all are in flight at once).
            try await eventually("most events are in flight", within: .seconds(60)) {
                (metric(try await http("http://127.0.0.1:\(port)/metrics").body, "apns_relay_events_in_flight") ?? 0) >= Double(count * 2 / 3)
            }
            try await eventually("pushes flow", within: .seconds(60)) { sandbox.apns.statistics.requests >= 30 }
            for broker in 1...sandbox.cluster.brokerCount { try sandbox.cluster.setBrokerDown(Int32(broker)) }
            try await eventually("the relay sees Kafka unreachable", within: .seconds(30)) {
                try await http("http://127.0.0.1:\(port)/readyz").body.contains("Kafka unreachable")
            }
            let sentBeforeStop = sandbox.apns.statistics.requests
            relay.process.terminate()
            // The hold is logged once it is in force; from then on not one push may start. (Between SIGTERM
            // and the hold a few may: the drain begins when the consume loop sees the signal.)
            try await eventually("the drain holds unsent requests", within: .seconds(10)) {
                relay.log.contains("Kafka is unreachable while draining")
            }
            let sentAtHold = sandbox.apns.statistics.requests
            let status = await relay.exit(within: .seconds(20))
            let sentAfterHold = sandbox.apns.statistics.requests - sentAtHold
            #expect(status == 0, "exit status \(status.map(String.init) ?? "none (still running 20 s after SIGTERM)"); log:\n\(relay.log.suffix(3000))")
            print("drain with Kafka unreachable: \(sentAtHold - sentBeforeStop) requests between SIGTERM and the hold, \(sentAfterHold) after it, \(sentBeforeStop) of \(count) before")
            #expect(sentAtHold < count, "some events were still waiting to be sent when the hold began")
            // Without the hold the connection goes on at ~33 a second through the 3 s drain.
            #expect(sentAfterHold == 0, "\(sentAfterHold) pushes started after the hold; log:\n\(relay.log.suffix(3000))")

            sandbox.apns.faults.latency = nil
            try await restartAndExpectEveryResult(sandbox, environment: environment, events: events)
        }
    }
}
