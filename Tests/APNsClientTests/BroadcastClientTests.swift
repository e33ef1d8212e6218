import APNsCore
import APNsMock
import Foundation
import Logging
import TestSupport
import Testing
@testable import APNsClient

/// Broadcasts and channel management through `APNsClient` and `ChannelManager`, against the mock over real
/// TLS + HTTP/2 (apns-reference.md §10).
@Suite(.serialized) struct BroadcastClientTests {
    private let bundle = "com.example.app"

    private func manager(_ mock: MockFixture, timeout: Duration = hangGuard) throws -> ChannelManager {
        var configuration = APNsClientConfiguration(credential: .token(try mock.signer), trust: .caFile(mock.caPath))
        let management = try #require(mock.server.managementPort)
        for environment in APNsEnvironment.allCases {
            configuration.managementEndpoints[environment] = .init(host: "127.0.0.1", port: management)
        }
        var logger = Logger(label: "apns-channels")
        logger.logLevel = .critical
        return try ChannelManager(configuration: configuration, eventLoops: .forTests, timeout: timeout, logger: logger)
    }

    private func broadcast(_ channel: String, requestID: String? = nil, expiration: Int64? = nil, bytes: Int? = nil) throws -> APNsNotification {
        let payload = bytes.map { Array(repeating: UInt8(ascii: " "), count: $0 - 2) } ?? []
        return APNsNotification(
            channelID: try ChannelID(base64: channel), bundleID: bundle, priority: .immediate, expiration: expiration,
            requestID: requestID, payload: (Array("{".utf8) + payload + Array("}".utf8))[...]
        )
    }

    @Test func aBroadcastAndADevicePushShareAConnection() async throws {
        let mock = try await MockFixture.start { $0.managementPort = 0 }
        let client = try mock.client()
        let channel = try mock.server.channels.create(bundleID: bundle, storagePolicy: 1)
        let requestID = "7c0cd09d-9a4b-4b1e-9d6e-2f0e6f7b2c11"
        let answer = try await client.send(try broadcast(channel, requestID: requestID, expiration: 2_000_000_000), timeout: hangGuard)
        #expect(answer.status == 200, "\(answer)")
        #expect(answer.apnsID?.lowercased() == requestID, "apns-request-id echoed")
        #expect(APNsNotification.isCanonicalUUID(answer.apnsUniqueID ?? ""), "broadcasts always get apns-unique-id")
        let device = try await client.send(try MockFixture.notification(1), timeout: hangGuard)
        #expect(device.status == 200)
        let accepted = try await mock.server.waitForAcceptedBroadcasts(count: 1, timeout: .seconds(5))
        #expect(accepted.first?.channelID == channel && accepted.first?.bundleID == bundle)
        #expect(accepted.first?.expiration == 2_000_000_000 && accepted.first?.priority == 10)
        #expect(accepted.first?.payload == Array("{}".utf8))
        #expect(client.connectionCount(for: .production) == 1, "one pool serves both")
        await client.shutdown()
        await mock.stop()
    }

    @Test func broadcastAnswersMapToDecisions() async throws {
        let mock = try await MockFixture.start { $0.managementPort = 0 }
        let client = try mock.client()
        let unstored = try mock.server.channels.create(bundleID: bundle, storagePolicy: 0)
        let deleted = try mock.server.channels.create(bundleID: bundle, storagePolicy: 1)
        #expect(mock.server.channels.delete(bundleID: bundle, channelID: deleted))
        let cases: [(APNsNotification, Int, APNsReason?, DeliveryDecision)] = [
            (try broadcast(unstored, expiration: 0), 200, nil, .delivered),
            (try broadcast(unstored, expiration: 2_000_000_000), 400, .badExpirationDate, .rejected(removesTarget: false)),
            (try broadcast(deleted), 400, .channelNotRegistered, .rejected(removesTarget: true)),
            (try broadcast(unstored, expiration: 0, bytes: 5121), 413, .payloadTooLarge, .rejected(removesTarget: false)),
        ]
        for (notification, status, reason, decision) in cases {
            let answer = try await client.send(notification, timeout: hangGuard)
            #expect(answer.status == status && answer.reason == reason, "\(notification.channelID!): \(answer)")
            #expect(DeliveryDecision(response: answer) == decision)
            #expect(APNsNotification.isCanonicalUUID(answer.apnsID ?? ""), "errors carry apns-request-id too")
        }
        await client.shutdown()
        await mock.stop()
    }

    @Test func channelsAreCreatedReadListedAndDeleted() async throws {
        let mock = try await MockFixture.start { $0.managementPort = 0 }
        let channels = try manager(mock)
        let stored = try await channels.create(bundleID: bundle, storagePolicy: .mostRecentMessageStored, environment: .production)
        let unstored = try await channels.create(bundleID: bundle, storagePolicy: .noMessageStored, environment: .production)
        #expect(stored != unstored)
        #expect(mock.server.channels.storagePolicy(bundleID: bundle, channelID: stored.base64) == 1)
        let read = try await channels.channel(unstored, bundleID: bundle, environment: .production)
        #expect(read.storagePolicy == .noMessageStored && read.pushType == "LiveActivity")
        #expect(try await channels.list(bundleID: bundle, environment: .production) == [stored, unstored])
        #expect(try await channels.list(bundleID: "com.example.other", environment: .production) == [])
        try await channels.delete(stored, bundleID: bundle, environment: .production)
        #expect(try await channels.list(bundleID: bundle, environment: .production) == [unstored])
        do {
            _ = try await channels.channel(stored, bundleID: bundle, environment: .production)
            Issue.record("a deleted channel was read")
        } catch let error as ChannelManagementError {
            #expect(error.status == 400 && error.reason == .channelNotRegistered, "\(error)")
            #expect(APNsNotification.isCanonicalUUID(error.requestID ?? ""), "\(error)")
            #expect(error.description.contains("ChannelNotRegistered"))
        }
        await channels.shutdown()
        await mock.stop()
    }

    /// A list of thousands of ids arrives whole (far more than a push answer's body).
    @Test func aLongListArrivesWhole() async throws {
        let mock = try await MockFixture.start { $0.managementPort = 0 }
        var made: [String] = []
        for _ in 0..<3000 { made.append(try mock.server.channels.create(bundleID: bundle, storagePolicy: 1)) }
        let channels = try manager(mock)
        let listed = try await channels.list(bundleID: bundle, environment: .production)
        #expect(listed.map(\.base64) == made)
        await channels.shutdown()
        await mock.stop()
    }

    @Test func refusalsNameAPNsReason() async throws {
        let mock = try await MockFixture.start {
            $0.managementPort = 0
            $0.maxChannelsPerApp = 1
            $0.broadcastDisabledBundles = ["com.example.plain"]
        }
        let channels = try manager(mock)
        _ = try await channels.create(bundleID: bundle, storagePolicy: .noMessageStored, environment: .production)
        for (bundleID, reason) in [(bundle, APNsReason.cannotCreateChannelConfig), ("com.example.plain", .featureNotEnabled)] {
            do {
                _ = try await channels.create(bundleID: bundleID, storagePolicy: .noMessageStored, environment: .production)
                Issue.record("\(bundleID): created")
            } catch let error as ChannelManagementError {
                #expect(error.reason == reason, "\(error)")
            }
        }
        // A suffixed bundle id is refused before any request: no broadcast could reach such a channel.
        do {
            _ = try await channels.create(bundleID: bundle + ".push-type.liveactivity", storagePolicy: .noMessageStored, environment: .production)
            Issue.record("created a channel for a suffixed bundle id")
        } catch let error as APNsClientError {
            #expect(error.code == .invalidConfiguration && error.message.contains(".push-type.liveactivity"), "\(error)")
        }
        await channels.shutdown()
        await mock.stop()
    }

    /// Nothing listens: the manager throws the transport failure, not a refusal.
    @Test func noManagementHostIsATransportFailure() async throws {
        let mock = try await MockFixture.start()
        let refusing = try RefusingPort()
        var configuration = APNsClientConfiguration(credential: .token(try mock.signer), trust: .caFile(mock.caPath))
        configuration.managementEndpoints[.production] = .init(host: "127.0.0.1", port: refusing.port)
        let channels = try ChannelManager(configuration: configuration, eventLoops: .forTests, timeout: .seconds(2))
        do {
            _ = try await channels.list(bundleID: bundle, environment: .production)
            Issue.record("listed without a server")
        } catch let error as APNsClientError {
            #expect(error.code == .transport, "\(error)")
        }
        await channels.shutdown()
        await mock.stop()
    }
}
