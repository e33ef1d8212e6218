import Foundation
import Logging
import Relay
import RelayApp
import RelaySandbox
import ServiceLifecycle
import TestSupport
import Testing
import Kafka

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
                try await eventually("the relay is ready", within: .seconds(60)) { app.relay.readiness == nil }
                for broker in 1...sandbox.cluster.brokerCount { try sandbox.cluster.setBrokerDown(Int32(broker)) }
                try await eventually("the relay turns unready with every broker down", within: .seconds(60)) {
                    app.relay.readiness?.contains("Kafka unreachable") == true
                }
                for broker in 1...sandbox.cluster.brokerCount { try sandbox.cluster.setBrokerUp(Int32(broker)) }
                try await eventually("the relay is ready again", within: .seconds(60)) { app.relay.readiness == nil }
            }
        }
    }

    /// Results that cannot reach Kafka (here: the results topic has no leader for a while) turn the relay
    /// unready instead of stalling behind a green probe; it is ready again once they get through. The relay
    /// asks about the results topic at start, and says why it cannot use it.
    @Test func stuckResultsTurnTheRelayUnready() async throws {
        try await withSandbox(logger: logger) { sandbox in
            var configuration = try await sandbox.relayConfiguration(groupID: "stuck-\(UUID().uuidString.prefix(8))")
            configuration.relay.publishStallTimeout = .seconds(2)
            // The results topic has no leader from the start (a metadata answer: the relay's producer learns
            // the results topic at start, and a leader it knows would take the result): librdkafka holds the
            // result (for up to message.timeout.ms).
            let results = sandbox.options.topics.results
            sandbox.cluster.setTopicError(results, .leaderNotAvailable)
            let log = LogRecorder()
            let app = try RelayApp(configuration: configuration, logger: log.logger())
            let services = app.serviceGroup(logger: logger)
            let running = Task { try await services.run() }
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            try await eventually("the relay is ready", within: .seconds(60)) { app.relay.readiness == nil }
            let warned = log.records.entries.filter { $0.level == .warning && $0.message.hasPrefix("results topic not usable at start") }
            #expect(warned.map { $0.metadata["topic"]?.description } == [results], "\(warned.map(\.metadata))")
            #expect(warned.first?.metadata["reason"]?.description.contains("no leader") == true, "\(warned.map(\.metadata))")
            try await sandbox.produce([(key: "stuck", value: SampleEvents.event(id: "stuck", deviceToken: SampleEvents.token(8)))])
            try await eventually("the relay turns unready while its result cannot be published", within: .seconds(60)) {
                app.relay.readiness?.contains("reached Kafka") == true
            }
            sandbox.cluster.setTopicError(sandbox.options.topics.results, .noError)
            _ = try await reader.results(count: 1, timeout: .seconds(120))
            #expect(app.relay.readiness == nil, "ready again once results get through")
            await services.triggerGracefulShutdown()
            try await running.value
            await reader.close()
        }
    }

    @Test func neverReadyWithoutKafka() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let refusing = try RefusingPort()
            defer { withExtendedLifetime(refusing) {} }
            try await withRelay(sandbox, overrides: ["kafka.bootstrapServers": "127.0.0.1:\(refusing.port)"], logger: logger) { app in
                try await eventually("the relay says Kafka is unreachable", within: .seconds(60)) {
                    app.relay.readiness?.contains("Kafka unreachable") == true
                }
                #expect(app.relay.liveness == nil, "alive: a restart would not bring Kafka back")
            }
        }
    }
}
