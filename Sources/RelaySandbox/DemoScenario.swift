import APNsClient
import APNsCore
import APNsMock
import Foundation
import Logging
import Relay
import RelayApp
import RelayContract

/// The broadcast channels the demo sends to, made through the channel-management API as a backend would.
package struct DemoChannels: Sendable {
    package var bundleID: String
    /// Stores the most recent message (policy 1).
    package var stored: String
    /// Stores none (policy 0): broadcasts to it must have expiration 0.
    package var unstored: String
    /// Created, then deleted: broadcasts to it answer ChannelNotRegistered.
    package var deleted: String

    /// Creates the three channels (and deletes one) with `ChannelManager`, the relay's configuration and
    /// credential, on the mock's management port.
    package static func create(
        _ configuration: RelayAppConfiguration, bundleID: String = "com.example.app", environment: APNsEnvironment, logger: Logger
    ) async throws -> DemoChannels {
        let eventLoops = try RelayApp.eventLoops(configuration.apns)
        let manager = try RelayApp.channelManager(
            configuration.apns, credential: configuration.apns.credentials[0], timeout: .seconds(10), eventLoops: eventLoops, logger: logger)
        return try await eventLoops.withRunningLoops {
            do {
                let stored = try await manager.create(bundleID: bundleID, storagePolicy: .mostRecentMessageStored, environment: environment)
                let unstored = try await manager.create(bundleID: bundleID, storagePolicy: .noMessageStored, environment: environment)
                let deleted = try await manager.create(bundleID: bundleID, storagePolicy: .mostRecentMessageStored, environment: environment)
                try await manager.delete(deleted, bundleID: bundleID, environment: environment)
                await manager.shutdown()
                return DemoChannels(bundleID: bundleID, stored: stored.base64, unstored: unstored.base64, deleted: deleted.base64)
            } catch {
                await manager.shutdown()
                throw error
            }
        }
    }
}

/// The demo's mix of events: mostly valid pushes of several types and broadcasts to Live Activity channels,
/// plus every kind of trouble the relay must answer without losing anything — schema violations, broken
/// JSON, an oversize payload and an oversize message, gone and wrong-environment tokens, a deleted channel,
/// stale events, and a burst of APNs 503s.
package struct DemoScenario: Sendable {
    package struct Event: Sendable {
        package var key: String
        package var value: [UInt8]
        /// What the relay should answer (given the faults armed), when it is certain.
        package var expected: DeliveryOutcome
        package var label: String
    }

    package var events: [Event]
    /// Login codes for the urgent lane (`kafka.topics.urgent`), produced while the bulk `events` drain.
    package var urgent: [Event] = []
    /// The topic the urgent events go to.
    package static let urgentTopic = "apns-notifications-urgent"
    /// Tokens the mock APNs reports as gone (410 Unregistered), with the time it says.
    package var unregistered: [String: Int64]
    /// Tokens the mock APNs says belong to the other environment (400 BadDeviceToken).
    package var wrongEnvironment: [String]
    /// How many 503s the mock answers first.
    package var serviceUnavailableBurst: Int

    package static func make(count: Int, nowSeconds: Int64, channels: DemoChannels) -> DemoScenario {
        var events: [Event] = []
        var unregistered: [String: Int64] = [:]
        var wrongEnvironment: [String] = []
        for n in 0..<count {
            let id = String(format: "evt-%05d", n)
            let token = SampleEvents.token(n)
            let metadata = #"{"userId":\#(1000 + n),"campaign":"demo"}"#
            func add(_ value: [UInt8], _ expected: DeliveryOutcome, _ label: String) {
                events.append(Event(key: id, value: value, expected: expected, label: label))
            }
            switch n % 50 {
            case 7:
                unregistered[token] = (nowSeconds - 86_400) * 1000
                add(SampleEvents.event(id: id, deviceToken: token, metadata: metadata), .unregistered, "gone token (410)")
            case 13:
                wrongEnvironment.append(token)
                add(SampleEvents.event(id: id, deviceToken: token, metadata: metadata), .rejected, "token of the other environment")
            case 19:
                add(Array(#"{"id":"\#(id)","deviceToken":"\#(token)","topic":"com.example.app","pushType":"alert"}"#.utf8), .invalid, "missing payload")
            case 23:
                add(SampleEvents.event(id: id, deviceToken: "not-a-token", metadata: metadata), .invalid, "bad device token")
            case 29:
                add(Array("{\"id\": \"\(id)\", \"deviceToken\": ".utf8), .invalid, "truncated JSON")
            case 31:
                add(SampleEvents.event(id: id, deviceToken: token, payload: SampleEvents.payload(bytes: 5000), metadata: metadata), .invalid, "payload over 4096 bytes")
            case 37:
                add(SampleEvents.event(id: id, deviceToken: token, expiration: nowSeconds - 60, metadata: metadata), .expired, "expired before sending")
            case 41 where n < 50:
                add(Array(String(repeating: " ", count: 70_000).utf8) + Array("{}".utf8), .invalid, "70 KB message")
            case 43:
                add(SampleEvents.event(id: id, deviceToken: token, pushType: .background, priority: 5, payload: #"{"aps":{"content-available":1}}"#, metadata: metadata), .delivered, "background")
            case 44:
                add(SampleEvents.event(id: id, deviceToken: token, topic: "com.example.app", pushType: .voip, priority: 10, payload: #"{"aps":{},"call":"incoming"}"#, metadata: metadata), .delivered, "voip")
            case 45:
                let live = #"{"aps":{"timestamp":\#(nowSeconds),"event":"update","content-state":{"score":"2-1"}}}"#
                add(SampleEvents.event(id: id, deviceToken: token, pushType: .liveactivity, priority: 10, payload: live, metadata: metadata), .delivered, "live activity")
            case 46:
                add(SampleEvents.event(id: id, deviceToken: token, collapseID: "score-update", metadata: metadata), .delivered, "collapsed alert")
            case 47, 48:
                let update = SampleEvents.liveActivityUpdate(score: "\(n / 50)-\(n % 3)", timestamp: Int(nowSeconds))
                add(SampleEvents.broadcast(id: id, channelID: channels.stored, topic: channels.bundleID, priority: 10, payload: update, metadata: metadata), .delivered, "broadcast to a channel")
            case 49 where n % 200 == 49:
                add(SampleEvents.broadcast(id: id, channelID: channels.deleted, topic: channels.bundleID, metadata: metadata), .rejected, "broadcast to a deleted channel")
            case 49:
                add(SampleEvents.broadcast(id: id, channelID: channels.unstored, topic: channels.bundleID, priority: 5, expiration: 0, metadata: metadata), .delivered, "broadcast to a no-storage channel")
            default:
                add(SampleEvents.event(id: id, deviceToken: token, payload: SampleEvents.payload(bytes: 300), metadata: metadata), .delivered, "alert")
            }
        }
        let urgent = (1...10).map { n in
            let id = String(format: "urgent-%02d", n)
            let payload = #"{"aps":{"alert":{"title":"Your sign-in code","body":"\#(100_000 + n * 7_919)"},"interruption-level":"time-sensitive"}}"#
            return Event(
                key: id, value: SampleEvents.event(id: id, deviceToken: SampleEvents.token(900_000 + n), priority: 10, payload: payload),
                expected: .delivered, label: "urgent sign-in code")
        }
        var scenario = DemoScenario(events: events, unregistered: unregistered, wrongEnvironment: wrongEnvironment, serviceUnavailableBurst: min(200, count / 10))
        scenario.urgent = urgent
        return scenario
    }

    /// Every event, bulk and urgent.
    package var allEvents: [Event] { events + urgent }

    /// Tells the mock APNs which tokens are gone or misplaced, and arms the 503 burst.
    package func arm(_ apns: APNsMockServer) {
        for (token, since) in unregistered { apns.registry.unregister(token, sinceMilliseconds: since) }
        for token in wrongEnvironment { apns.registry.register(token, environment: .production) }
        if serviceUnavailableBurst > 0 { apns.faults.failNext(serviceUnavailableBurst, with: .serviceUnavailable) }
    }
}
