import Foundation
import Logging
import Relay
import RelaySandbox
import ServiceLifecycle
import Testing

/// `/readyz` tells the truth: ready means joined to the consumer group with Kafka reachable.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ReadinessTests {
    let logger = Logger.quiet("ready")

    /// It used to answer ready right after subscribing: 40 s with Kafka unreachable, 45 s before a
    /// restarted relay had partitions.
    @Test func readyOnlyWhileJoinedAndKafkaIsReachable() async throws {
        try await withSandbox(logger: logger) { sandbox in
            try await withRelay(sandbox, logger: logger) { app in
                #expect(app.relay.readiness != nil, "not ready before the group is joined")
                try await eventually("the relay is ready", timeout: .seconds(60)) { app.relay.readiness == nil }
                for broker in 1...sandbox.cluster.brokerCount { try sandbox.cluster.setBrokerDown(Int32(broker)) }
                try await eventually("the relay turns unready with every broker down", timeout: .seconds(60)) {
                    app.relay.readiness?.contains("Kafka unreachable") == true
                }
                for broker in 1...sandbox.cluster.brokerCount { try sandbox.cluster.setBrokerUp(Int32(broker)) }
                try await eventually("the relay is ready again", timeout: .seconds(60)) { app.relay.readiness == nil }
            }
        }
    }

    @Test func neverReadyWithoutKafka() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let deadPort = try freePort()
            try await withRelay(sandbox, overrides: ["kafka.bootstrapServers": "127.0.0.1:\(deadPort)"], logger: logger) { app in
                try await eventually("the relay says Kafka is unreachable", timeout: .seconds(60)) {
                    app.relay.readiness?.contains("Kafka unreachable") == true
                }
                #expect(app.relay.liveness == nil, "alive: a restart would not bring Kafka back")
            }
        }
    }
}
