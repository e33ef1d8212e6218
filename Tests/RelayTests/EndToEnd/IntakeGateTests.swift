import APNsMock
import Foundation
import Logging
import RelaySandbox
import TestSupport
import Testing

/// The in-flight gate holds intake (the consumer loop stops taking events) instead of pausing partitions;
/// a rebalance must still be answered while it is closed, or a joining member waits for its partitions
/// until the held events time out at APNs.
@Suite(.timeLimit(.minutes(3)))
struct IntakeGateTests {
    let logger = Logger.quiet("intake-gate")

    @Test func aRevocationIsAnsweredWhileTheGateIsClosed() async throws {
        try await withSandbox(logger: logger) { sandbox in
            try await sandbox.produce(faultEvents(0..<200, prefix: "g"))
            // APNs holds every reply: the first relay fills its gate (5 events) and can finish nothing.
            sandbox.apns.faults.withholdAllReplies = true
            let overrides = [
                "relay.maxInFlightEvents": "5", "relay.requestTimeoutMs": "120000",
                "relay.revocationDrainTimeoutMs": "1000", "relay.drainTimeoutMs": "1000", "kafka.assignmentStrategy": "range",
            ]
            let group = "gate-\(UUID().uuidString.prefix(8))"
            try await withRelay(sandbox, groupID: group, overrides: overrides, logger: logger) { first in
                try await eventually("the first relay's gate is closed", within: .seconds(60)) {
                    first.relay.status.paused && first.relay.status.inFlightEvents >= 5
                }
                try await withRelay(sandbox, groupID: group, overrides: overrides, logger: logger) { second in
                    // The held replies would open the gate only when they time out (120 s); the revocation's drain
                    // gives up after 1 s. Without answering rebalances while held, the first relay would not
                    // see its revocation (its partition count would stay) until then.
                    try await eventually("the first relay handled its revocation", within: .seconds(30)) {
                        first.relay.status.assignedPartitions < sandbox.options.partitions
                    }
                    try await eventually("the joining relay gets partitions", within: .seconds(30)) {
                        second.relay.status.assignedPartitions > 0
                    }
                }
            }
            sandbox.apns.faults.withholdAllReplies = false
        }
    }
}
