import Kafka
import RelayApp
import Testing

/// A configuration with a credential and a broker, and `overrides` on top.
private func relayConfiguration(_ overrides: [String: String]) async throws -> RelayAppConfiguration {
    let reader = try await RelayAppConfiguration.reader(
        file: nil, environment: [:],
        overrides: ["kafka.bootstrapServers": "broker:9092", "apns.token.keyId": "ABC123DEFG", "apns.token.teamId": "DEF123GHIJ",
                    "apns.token.privateKeyFile": "/secrets/key.p8"].merging(overrides) { $1 })
    return try RelayAppConfiguration(reader: reader, requireCredential: false)
}

@Suite struct PrefetchBudgetTests {
    private func consumerProperties(_ overrides: [String: String]) async throws -> [String: String] {
        RelayApp.consumerConfiguration(try await relayConfiguration(overrides)).additionalProperties
    }

    @Test func oneBudgetBoundsTheQueueAndTheResponseOnItsWay() async throws {
        let properties = try await consumerProperties([:])
        #expect(properties["queued.max.messages.kbytes"] == "6144", "8 MiB less the response")
        #expect(properties["fetch.max.bytes"] == "2097152", "a third of 8 MiB, at most 2 MiB")
        #expect(properties["queued.min.messages"] == "96", "6 MiB holds 96 events of 64 KiB: librdkafka's byte bound counts no headers")
        #expect(properties["fetch.wait.max.ms"] == "100", "a fetch waiting on idle partitions holds a refill back no longer")
    }

    /// The record bound follows the largest legal event, between 64 and 10,000 records.
    @Test func theRecordBoundFollowsTheLargestLegalEvent() async throws {
        #expect(try await consumerProperties(["relay.maxEventBytes": "4096"])["queued.min.messages"] == "1536")
        #expect(try await consumerProperties(["relay.maxEventBytes": "100"])["queued.min.messages"] == "10000")
        #expect(try await consumerProperties(["kafka.prefetchBytes": "4194304"])["queued.min.messages"] == "64", "42 would be a refill per few records")
    }

    @Test func theBudgetFollowsItsKeyAndEachPropertyCanStillBeSet() async throws {
        let smaller = try await consumerProperties(["kafka.prefetchBytes": "4194304"])
        #expect(smaller["queued.max.messages.kbytes"] == "2730", "4 MiB less a third, in KiB")
        #expect(smaller["fetch.max.bytes"] == "1398101", "a third of 4 MiB: at least librdkafka's message.max.bytes (1000000)")
        let larger = try await consumerProperties(["kafka.prefetchBytes": "67108864"])
        #expect(larger["queued.max.messages.kbytes"] == "63488", "64 MiB less 2 MiB")
        #expect(larger["fetch.max.bytes"] == "2097152")
        let overridden = try await consumerProperties(["kafka.consumerProperties": "fetch.max.bytes=1048576"])
        #expect(overridden["fetch.max.bytes"] == "1048576")
        #expect(overridden["queued.max.messages.kbytes"] == "6144")
    }
}

@Suite struct ProducerSettingsTests {
    @Test func lingerDefaultsToTwentyMillisecondsAndFollowsItsKey() async throws {
        #expect(RelayApp.producerConfiguration(try await relayConfiguration([:])).linger == .milliseconds(20))
        let set = RelayApp.producerConfiguration(try await relayConfiguration(["kafka.lingerMs": "0"]))
        #expect(set.linger == .zero)
        let transactional = try await relayConfiguration(["kafka.exactlyOnce": "true", "kafka.transactionalId": "relay-0"])
        #expect(RelayApp.producerConfiguration(transactional).linger == .milliseconds(5), "a transaction waits for its records")
        let chosen = try await relayConfiguration(["kafka.exactlyOnce": "true", "kafka.transactionalId": "relay-0", "kafka.lingerMs": "30"])
        #expect(RelayApp.producerConfiguration(chosen).linger == .milliseconds(30))
        let other = RelayApp.producerConfiguration(try await relayConfiguration(["kafka.producerProperties": "batch.size=65536"]))
        #expect(other.additionalProperties["batch.size"] == "65536")
    }

    @Test func lingerOutsideItsRangeIsRefused() async throws {
        await #expect(throws: (any Error).self) { _ = try await relayConfiguration(["kafka.lingerMs": "5000"]) }
    }
}
