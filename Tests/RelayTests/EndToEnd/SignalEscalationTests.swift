import Foundation
import Logging
import RelaySandbox
import TestSupport
import Testing
import APNsMock

/// A second SIGTERM while `apns-relay run` drains ends it at once, whatever the drain is waiting for.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SignalEscalationTests {
    let logger = Logger.quiet("signals")

    @Test func aSecondSigtermWhileDrainingExitsAtOnceWithANonZeroStatus() async throws {
        try await withSandbox(logger: logger) { sandbox in
            var environment = sandbox.relayEnvironment(groupID: "signals-\(UUID().uuidString.prefix(8))")
            environment["APNS_RELAY_LOG_LEVEL"] = "info"
            environment["APNS_RELAY_LOG_FORMAT"] = "text"
            // A drain that would outlast the test: only the second signal can end this relay in time.
            environment["APNS_RELAY_RELAY_DRAIN_TIMEOUT_MS"] = "600000"
            environment["APNS_RELAY_RELAY_REQUEST_TIMEOUT_MS"] = "300000"
            sandbox.apns.faults.withholdAllReplies = true
            defer { sandbox.apns.faults.withholdAllReplies = false }
            try await sandbox.produce([(key: "held", value: SampleEvents.event(id: "held", deviceToken: SampleEvents.token(1)))])

            let relay = try RelayProcess(environment: environment)
            try await eventually("the mock APNs holds the relay's request", within: .seconds(60)) { sandbox.apns.statistics.requests >= 1 }
            kill(relay.process.processIdentifier, SIGTERM)
            try await eventually("the relay logs the first SIGTERM", within: .seconds(10)) {
                relay.log.contains("SIGTERM received: shutting down gracefully; a second SIGTERM or SIGINT exits at once")
            }
            #expect(relay.process.isRunning, "still draining the held event; log:\n\(relay.log.suffix(3000))")

            let second = ContinuousClock.now
            kill(relay.process.processIdentifier, SIGTERM)
            // At once: not after the drain's 600 s. The status and the log line say which way it went; the
            // time is printed, and bounded only far from what a busy machine's scheduling adds.
            let status = await relay.exit(within: .seconds(60))
            let took = ContinuousClock.now - second
            #expect(status == 128 + SIGTERM, "log:\n\(relay.log.suffix(3000))")
            #expect(took < .seconds(60), "exited \(took) after the second SIGTERM")
            print("second SIGTERM: exited \(took) after it")
            #expect(relay.log.contains("SIGTERM received while shutting down: exiting at once with status 143"), "\(relay.log.suffix(3000))")
        }
    }
}
