import APNsCore
import Foundation
import Kafka
import Logging
import Relay
import RelaySandbox
import TestSupport
import Testing
import APNsMock

/// Broadcast events (Live Activity channels, apns-reference.md §10) through the whole pipeline: into Kafka,
/// through the relay, to the mock APNs' broadcast endpoint, results and removed-channel records back out.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct BroadcastEndToEndTests {
    let logger = Logger.quiet("e2e-broadcast")
    let bundle = "com.example.app"

    @Test func broadcastsAreDeliveredRefusedAndReportedAsAPNsAnswers() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let channels = sandbox.apns.channels
            let stored = try channels.create(bundleID: bundle, storagePolicy: 1)
            let unstored = try channels.create(bundleID: bundle, storagePolicy: 0)
            let deleted = try channels.create(bundleID: bundle, storagePolicy: 1)
            #expect(channels.delete(bundleID: bundle, channelID: deleted))
            let future = Int64(Date().timeIntervalSince1970) + 3600
            let big = #"{"aps":{"timestamp":1,"event":"update","content-state":{"fill":""# + String(repeating: "x", count: 4900) + #""}}}"#
            let events: [(key: String, value: [UInt8])] = [
                ("stored", SampleEvents.broadcast(id: "stored", channelID: stored, expiration: future, metadata: #"{"match":1}"#)),
                ("suffixed", SampleEvents.broadcast(id: "suffixed", channelID: stored, topic: bundle + ".push-type.liveactivity", priority: 5)),
                ("unstored-now", SampleEvents.broadcast(id: "unstored-now", channelID: unstored, expiration: 0)),
                ("unstored-later", SampleEvents.broadcast(id: "unstored-later", channelID: unstored, expiration: future)),
                ("over-4096", SampleEvents.broadcast(id: "over-4096", channelID: stored, payload: big)),
                ("over-5120", SampleEvents.broadcast(id: "over-5120", channelID: stored, payload: SampleEvents.payload(bytes: 5121))),
            ]
            #expect(big.utf8.count > 4096 && big.utf8.count <= 5120)
            try await sandbox.produce(events)
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let topics = sandbox.options.topics
            let records = try await withRelay(sandbox, logger: logger) { _ in
                // The dead letter travels with its result but may be read after it: wait for both.
                try await reader.collect(timeout: .seconds(90)) { records in
                    records.filter { $0.topic == topics.results }.count >= events.count
                        && records.contains { $0.topic == topics.deadLetters }
                }
            }
            await reader.close()
            let results = Dictionary(records.filter { $0.topic == topics.results }.compactMap { record in
                record.json.map { (record.keyString, $0) }
            }) { a, _ in a }
            func expect(_ key: String, _ outcome: String, _ reason: String?, sourceLocation: SourceLocation = #_sourceLocation) {
                let result = results[key]
                #expect(result?["outcome"] as? String == outcome, "\(key): \(String(describing: result))", sourceLocation: sourceLocation)
                #expect(result?["reason"] as? String == reason, "\(key): \(String(describing: result))", sourceLocation: sourceLocation)
            }
            expect("stored", "delivered", nil)
            expect("suffixed", "delivered", nil)
            expect("unstored-now", "delivered", nil)
            expect("unstored-later", "rejected", "BadExpirationDate")
            expect("over-4096", "delivered", nil)
            expect("over-5120", "invalid", "PayloadTooLarge")
            // Broadcast answers carry apns-request-id and apns-unique-id; apnsId is for device pushes.
            let delivered = try #require(results["stored"])
            #expect(APNsNotification.isCanonicalUUID(delivered["apnsRequestId"] as? String ?? ""), "\(delivered)")
            #expect(APNsNotification.isCanonicalUUID(delivered["apnsUniqueId"] as? String ?? ""), "\(delivered)")
            #expect(delivered["apnsId"] is NSNull)
            #expect((delivered["metadata"] as? [String: Any])?["match"] as? Int == 1)
            #expect(APNsNotification.isCanonicalUUID(results["unstored-later"]?["apnsRequestId"] as? String ?? ""))

            // What the mock accepted: each delivered broadcast once, to its channel and bundle, bytes intact.
            let accepted = sandbox.apns.acceptedBroadcasts
            #expect(accepted.count == 4, "\(accepted.map(\.channelID))")
            #expect(Set(accepted.map(\.bundleID)) == [bundle], "the suffix is dropped: the path names the bundle id")
            let requestIDs = Set(accepted.map { $0.requestID.lowercased() })
            #expect(requestIDs.contains((delivered["apnsRequestId"] as? String ?? "").lowercased()))
            #expect(accepted.contains { $0.payload == Array(big.utf8) })
            #expect(sandbox.apns.acceptedNotifications.isEmpty, "no device push was sent")

            // The oversized one never left: a dead letter with its bytes.
            let letters = records.filter { $0.topic == topics.deadLetters }
            #expect(letters.map(\.keyString) == ["over-5120"])
            let problems = try await validateWithPython(results.keys.sorted().compactMap { key in
                records.first { $0.topic == topics.results && $0.keyString == key }?.value
            }, schema: "delivery-result.schema.json")
            #expect(problems.isEmpty, "\(problems)")
        }
    }

    /// A broadcast to a deleted channel is rejected (ChannelNotRegistered) and reported on the
    /// removed-channels topic, so producers stop using the channel; the other broadcasts around it go on.
    @Test func aDeletedChannelGetsARemovedChannelRecord() async throws {
        var options = RelaySandbox.Options()
        options.partitions = 1
        try await withSandbox(options, logger: logger) { sandbox in
            let channels = sandbox.apns.channels
            let live = try (0..<5).map { _ in try channels.create(bundleID: bundle, storagePolicy: 1) }
            let gone = try channels.create(bundleID: bundle, storagePolicy: 0)
            #expect(channels.delete(bundleID: bundle, channelID: gone))
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let topics = sandbox.options.topics
            let records = try await withRelay(sandbox, logger: logger) { _ in
                // First broadcasts that succeed, so the removal guard sees a plausible share of
                // ChannelNotRegistered channels (1 in 6; it counts channels, not broadcasts).
                try await sandbox.produce((0..<5).map { n in
                    (key: "live-\(n)", value: SampleEvents.broadcast(id: "live-\(n)", channelID: live[n]))
                })
                _ = try await reader.collect(timeout: .seconds(60)) { records in
                    records.filter { $0.topic == topics.results }.count >= 5
                }
                try await sandbox.produce([(key: "gone", value: SampleEvents.broadcast(id: "gone", channelID: gone, metadata: #"{"activity":"match-7"}"#))])
                // The result and the removal travel together but on two topics: wait for both.
                return try await reader.collect(timeout: .seconds(60)) { records in
                    records.contains { $0.topic == topics.removedChannels }
                        && records.contains { $0.topic == topics.results && $0.keyString == "gone" }
                }
            }
            await reader.close()
            let result = try #require(records.first { $0.topic == topics.results && $0.keyString == "gone" }?.json)
            #expect(result["outcome"] as? String == "rejected")
            #expect(result["reason"] as? String == "ChannelNotRegistered")
            let removal = try #require(records.first { $0.topic == topics.removedChannels })
            #expect(removal.keyString == gone, "keyed by channel id")
            let json = try #require(removal.json)
            #expect(json["channelId"] as? String == gone)
            #expect(json["bundleId"] as? String == bundle)
            #expect(json["environment"] as? String == "development")
            #expect(json["reason"] as? String == "ChannelNotRegistered")
            #expect(json["id"] as? String == "gone")
            #expect((json["metadata"] as? [String: Any])?["activity"] as? String == "match-7")
            #expect(!records.contains { $0.topic == topics.removedTokens }, "a channel is not a device token")
            let problems = try await validateWithPython([removal.value], schema: "channel-removed.schema.json")
            #expect(problems.isEmpty, "\(problems)")
        }
    }

    /// A storm of 503s is retried with backoff like device pushes: every broadcast ends delivered once.
    @Test func aServiceUnavailableStormIsRetried() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let channel = try sandbox.apns.channels.create(bundleID: bundle, storagePolicy: 1)
            let count = 40
            sandbox.apns.faults.failNext(60, with: .serviceUnavailable)
            try await sandbox.produce((0..<count).map { n in
                (key: "b\(n)", value: SampleEvents.broadcast(id: "b\(n)", channelID: channel, payload: SampleEvents.liveActivityUpdate(score: "\(n)-0")))
            })
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let results = try await withRelay(sandbox, overrides: ["relay.retry.maxAttempts": "10"], logger: logger) { _ in
                try await reader.results(count: count, timeout: .seconds(120))
            }
            await reader.close()
            #expect(results.count == count)
            let jsons = results.compactMap(\.json)
            #expect(jsons.allSatisfy { $0["outcome"] as? String == "delivered" }, "\(jsons.filter { $0["outcome"] as? String != "delivered" })")
            #expect(jsons.contains { ($0["attempts"] as? Int ?? 0) > 1 }, "some were retried")
            #expect(sandbox.apns.statistics.count(.serviceUnavailable) == 60)
            let accepted = sandbox.apns.acceptedBroadcasts
            #expect(accepted.count == count, "each broadcast accepted once")
            #expect(Set(accepted.map { String(decoding: $0.payload, as: UTF8.self) }).count == count)
        }
    }

    /// Device pushes and broadcasts interleaved on one partition: one result each, and the group's committed
    /// offset is the end of the partition once they are all done.
    @Test func devicePushesAndBroadcastsShareAPartitionAndItsOffsets() async throws {
        var options = RelaySandbox.Options()
        options.partitions = 1
        try await withSandbox(options, logger: logger) { sandbox in
            let channel = try sandbox.apns.channels.create(bundleID: bundle, storagePolicy: 1)
            let count = 120
            let events = (0..<count).map { n in
                n % 3 == 0
                    ? (key: "b\(n)", value: SampleEvents.broadcast(id: "b\(n)", channelID: channel, payload: SampleEvents.liveActivityUpdate(score: "\(n)")))
                    : (key: "d\(n)", value: SampleEvents.event(id: "d\(n)", deviceToken: SampleEvents.token(n)))
            }
            try await sandbox.produce(events)
            let group = "mixed-\(UUID().uuidString.prefix(8))"
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let results = try await withRelay(sandbox, groupID: group, logger: logger) { _ in
                try await reader.results(count: count, timeout: .seconds(90))
            }
            await reader.close()
            #expect(Set(results.map(\.keyString)) == Set(events.map(\.key)))
            #expect(results.compactMap(\.json).allSatisfy { $0["outcome"] as? String == "delivered" })
            let broadcasts = results.filter { $0.keyString.hasPrefix("b") }.compactMap(\.json)
            let devices = results.filter { $0.keyString.hasPrefix("d") }.compactMap(\.json)
            #expect(broadcasts.count == 40 && devices.count == 80)
            #expect(broadcasts.allSatisfy { $0["apnsRequestId"] is String && $0["apnsId"] is NSNull })
            #expect(devices.allSatisfy { $0["apnsId"] is String && $0["apnsRequestId"] == nil })
            #expect(sandbox.apns.acceptedBroadcasts.count == 40)
            #expect(sandbox.apns.statistics.accepted == 80, "each device push accepted once")

            var configuration = KafkaConsumerConfiguration(bootstrapServers: [sandbox.bootstrapServers], groupID: group)
            configuration.sessionTimeout = .seconds(6)
            let inspector = try KafkaConsumer(configuration: configuration, logger: logger)
            let partition = KafkaTopicPartition(topic: sandbox.options.inputTopic, partition: 0)
            let committed = try await inspector.committedOffsets(for: [partition])
            #expect(committed[partition] == .some(Int64(count)), "committed past every event: \(committed)")
        }
    }
}
