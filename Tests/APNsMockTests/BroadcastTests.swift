import APNsCore
import APNsMock
import Foundation
import TestSupport
import Testing

/// A started mock with the channels the broadcast checks need.
struct BroadcastSetup: Sendable {
    static let disabledApp = "com.example.nobroadcast"
    static let otherApp = "com.example.other"
    /// Well-formed, never issued.
    static let unknownChannel = "AAAAAAAAAAAAAAAAAAAAAA=="

    let fixture: MockFixture
    /// Storage policy 0 (No Message Stored).
    let noStorage: String
    /// Storage policy 1 (Most Recent Message Stored).
    let storing: String
    /// Created, then deleted.
    let deleted: String
    /// A channel of `otherApp`.
    let otherAppChannel: String
    /// A channel of `bundleID` in the environment the mock does not play.
    let otherEnvironmentChannel: String
    /// A key of the fixture's team limited to `otherApp`.
    let otherAppKey: TestSigningKey

    static func start(_ configure: @escaping (inout APNsMockConfiguration) -> Void = { _ in }) async throws -> BroadcastSetup {
        let otherAppKey = TestSigningKey(keyID: "KEY0000009", teamID: "TEAM000001")
        let fixture = try await MockFixture.start {
            $0.broadcastDisabledBundles = [disabledApp]
            $0.providerKeys.append(
                ProviderKey(keyID: otherAppKey.keyID, teamID: otherAppKey.teamID, publicKey: otherAppKey.privateKey.publicKey,
                            bundleIDs: [otherApp])
            )
            configure(&$0)
        }
        let channels = fixture.server.channels
        let deleted = try channels.create(bundleID: bundleID, storagePolicy: 1)
        channels.delete(bundleID: bundleID, channelID: deleted)
        return BroadcastSetup(
            fixture: fixture,
            noStorage: try channels.create(bundleID: bundleID, storagePolicy: 0),
            storing: try channels.create(bundleID: bundleID, storagePolicy: 1),
            deleted: deleted,
            otherAppChannel: try channels.create(bundleID: otherApp, storagePolicy: 1),
            otherEnvironmentChannel: try channels.create(bundleID: bundleID, storagePolicy: 1, environment: .development),
            otherAppKey: otherAppKey
        )
    }

    /// A valid send to the policy-1 channel, with `overrides`.
    func send(_ overrides: [(String, String?)] = [], body: [UInt8] = Array(liveActivityUpdate.utf8), method: String = "POST",
              path: String? = nil) -> TestRequest
    {
        fixture.broadcast(channelID: storing, overrides, body: body, method: method, path: path)
    }
}

/// `POST /4/broadcasts/apps/<bundleID>` (apns-reference.md §10): every reason, in the order of
/// `BroadcastRequestRules`, and what is accepted.
@Suite struct BroadcastTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var reason: APNsReason
        var make: @Sendable (BroadcastSetup) -> TestRequest
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "duplicate apns-priority", reason: .duplicateHeaders) {
            var request = $0.send()
            request.headers.append(("apns-priority", "10"))
            return request
        },
        Case(name: "apns-request-id not a UUID", reason: .badMessageId) { $0.send([("apns-request-id", "req-1")]) },
        Case(name: "GET", reason: .methodNotAllowed) { $0.send(method: "GET") },
        Case(name: "empty bundle id", reason: .badPath) { $0.send(path: "/4/broadcasts/apps/") },
        Case(name: "bundle id with a slash", reason: .badPath) { $0.send(path: "/4/broadcasts/apps/\(bundleID)/more") },
        Case(name: "bundle id with the liveactivity suffix", reason: .topicDisallowed) {
            $0.send(path: "/4/broadcasts/apps/\(bundleID).push-type.liveactivity")
        },
        Case(name: "priority 7", reason: .badPriority) { $0.send([("apns-priority", "7")]) },
        Case(name: "no push type", reason: .missingPushType) { $0.send([("apns-push-type", nil)]) },
        Case(name: "push type alert", reason: .invalidPushType) { $0.send([("apns-push-type", "alert")]) },
        Case(name: "expiration not a number", reason: .badExpirationDate) { $0.send([("apns-expiration", "soon")]) },
        Case(name: "negative expiration", reason: .badExpirationDate) { $0.send([("apns-expiration", "-1")]) },
        Case(name: "no channel id", reason: .missingChannelId) { $0.send([("apns-channel-id", nil)]) },
        Case(name: "empty channel id", reason: .missingChannelId) { $0.send([("apns-channel-id", "")]) },
        Case(name: "channel id not base64", reason: .badChannelId) { $0.send([("apns-channel-id", "not*base64*here!")]) },
        Case(name: "channel id of 23 characters", reason: .badChannelId) {
            $0.send([("apns-channel-id", String($0.storing.dropLast()))])
        },
        Case(name: "channel id with padding inside", reason: .badChannelId) { $0.send([("apns-channel-id", "AB=CDEFG")]) },
        Case(name: "channel id with three padding characters", reason: .badChannelId) { $0.send([("apns-channel-id", "A===")]) },
        Case(name: "channel id in URL-safe base64", reason: .badChannelId) { $0.send([("apns-channel-id", "ab-_ab-_")]) },
        Case(name: "channel id of 132 characters", reason: .badChannelId) {
            $0.send([("apns-channel-id", String(repeating: "A", count: 132))])
        },
        Case(name: "no authorization", reason: .missingProviderToken) { $0.send([("authorization", nil)]) },
        Case(name: "token of a key limited to another app", reason: .invalidProviderToken) {
            $0.send([("authorization", "bearer " + $0.otherAppKey.token(issuedAt: $0.fixture.clock.nowSeconds))])
        },
        Case(name: "app without the broadcast feature", reason: .featureNotEnabled) {
            $0.fixture.broadcast(channelID: $0.storing, app: BroadcastSetup.disabledApp)
        },
        Case(name: "channel never created", reason: .channelNotRegistered) {
            $0.send([("apns-channel-id", BroadcastSetup.unknownChannel)])
        },
        Case(name: "deleted channel", reason: .channelNotRegistered) { $0.send([("apns-channel-id", $0.deleted)]) },
        Case(name: "another app's channel", reason: .channelNotRegistered) {
            $0.send([("apns-channel-id", $0.otherAppChannel)])
        },
        Case(name: "channel of the other environment", reason: .channelNotRegistered) {
            $0.send([("apns-channel-id", $0.otherEnvironmentChannel)])
        },
        Case(name: "non-zero expiration on a No-Message-Stored channel", reason: .badExpirationDate) {
            $0.fixture.broadcast(channelID: $0.noStorage, [("apns-expiration", "1700003600")])
        },
        Case(name: "empty payload", reason: .payloadEmpty) { $0.send(body: []) },
        Case(name: "5121-byte payload", reason: .payloadTooLarge) {
            $0.send(body: Array(repeating: UInt8(ascii: "x"), count: 5121))
        },
    ]

    @Test(arguments: cases)
    func rejectsWithReasonStatusAndRequestID(_ testCase: Case) async throws {
        let setup = try await BroadcastSetup.start()
        let client = try await setup.fixture.connect()
        let documented = try DocumentedReason.row(for: testCase.reason)
        let response = try await client.send(testCase.make(setup))
        #expect(response.status == documented.status)
        #expect(response.body == #"{"reason":"\#(documented.reason)"}"#)
        #expect(response.headers["content-type"] == "application/json")
        #expect(APNsNotification.isCanonicalUUID(response.headers["apns-request-id"] ?? ""))
        #expect(response.headers["apns-id"] == nil)
        let statistics = setup.fixture.server.statistics
        #expect(statistics.count(documented) == 1)
        #expect(statistics.broadcastRequests == 1)
        #expect(setup.fixture.server.acceptedBroadcasts.isEmpty)
        await setup.fixture.stop()
    }

    /// One request with every fault at once, repaired one fault at a time: each answer names the earliest
    /// remaining fault, so the checks run in the documented order.
    @Test func checksRunInTheDocumentedOrder() async throws {
        let setup = try await BroadcastSetup.start()
        let client = try await setup.fixture.connect()
        var request = TestRequest(
            path: "/4/broadcasts/apps/",
            headers: [("apns-priority", "7"), ("apns-priority", "7"), ("apns-request-id", "x"), ("apns-expiration", "x")],
            body: [],
            method: "GET"
        )
        func set(_ name: String, _ value: String?) {
            request.headers.removeAll { $0.0 == name }
            if let value { request.headers.append((name, value)) }
        }
        let repairs: [(APNsReason, () -> Void)] = [
            (.duplicateHeaders, { set("apns-priority", "7") }),
            (.badMessageId, { set("apns-request-id", "3f0e1d2c-4b5a-6978-8695-a4b3c2d1e0f9") }),
            (.methodNotAllowed, { request.method = "POST" }),
            (.badPath, { request.path = "/4/broadcasts/apps/\(BroadcastSetup.disabledApp).push-type.liveactivity" }),
            (.topicDisallowed, { request.path = "/4/broadcasts/apps/\(BroadcastSetup.disabledApp)" }),
            (.badPriority, { set("apns-priority", "5") }),
            (.missingPushType, { set("apns-push-type", "alert") }),
            (.invalidPushType, { set("apns-push-type", "LiveActivity") }),
            (.badExpirationDate, { set("apns-expiration", "1700003600") }),
            (.missingChannelId, { set("apns-channel-id", "!!!!") }),
            (.badChannelId, { set("apns-channel-id", BroadcastSetup.unknownChannel) }),
            (.missingProviderToken, { set("authorization", setup.fixture.authorizationValue) }),
            (.featureNotEnabled, { request.path = "/4/broadcasts/apps/\(bundleID)" }),
            (.channelNotRegistered, { set("apns-channel-id", setup.noStorage) }),
            (.badExpirationDate, { set("apns-expiration", "0") }),
            (.payloadEmpty, { request.body = Array(repeating: UInt8(ascii: "x"), count: 5121) }),
            (.payloadTooLarge, { request.body = Array(repeating: UInt8(ascii: "x"), count: 5120) }),
        ]
        for (expected, repair) in repairs {
            let response = try await client.send(request)
            #expect(response.reason == expected.rawValue, "before repairing \(expected)")
            repair()
        }
        let accepted = try await client.send(request)
        #expect(accepted.status == 200, "after every repair: \(accepted.body)")
        #expect(try await setup.fixture.server.waitForAcceptedBroadcasts(count: 1, timeout: .seconds(5)).count == 1)
        await setup.fixture.stop()
    }

    @Test func acceptsEchoesTheRequestIDAndRecordsTheBroadcast() async throws {
        let setup = try await BroadcastSetup.start()
        let client = try await setup.fixture.connect()
        let id = "9f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9"
        // apns-topic is not used for broadcasts, whatever it says.
        let response = try await client.send(
            setup.send([("apns-request-id", id), ("apns-expiration", "1700003600"), ("apns-topic", "com.example.unrelated")])
        )
        #expect(response.status == 200)
        #expect(response.body.isEmpty)
        #expect(response.headers["apns-request-id"] == id)
        let uniqueID = try #require(response.headers["apns-unique-id"])
        #expect(APNsNotification.isCanonicalUUID(uniqueID))
        #expect(response.headers["apns-id"] == nil)
        let accepted = try await setup.fixture.server.waitForAcceptedBroadcasts(count: 1, timeout: .seconds(5))
        #expect(accepted.count == 1)
        #expect(accepted[0].channelID == setup.storing)
        #expect(accepted[0].bundleID == bundleID)
        #expect(accepted[0].requestID == id)
        #expect(accepted[0].uniqueID == uniqueID)
        #expect(accepted[0].priority == 10)
        #expect(accepted[0].expiration == 1_700_003_600)
        #expect(accepted[0].payload == Array(liveActivityUpdate.utf8))
        #expect(accepted[0].receivedAtMilliseconds == setup.fixture.clock.nowMilliseconds())
        // Broadcasts are not device notifications.
        let statistics = setup.fixture.server.statistics
        #expect(setup.fixture.server.acceptedNotifications.isEmpty)
        #expect(statistics.accepted == 0 && statistics.acceptedBroadcasts == 1)
        #expect(statistics.requests == 1 && statistics.broadcastRequests == 1 && statistics.responses == ["200": 1])
        await setup.fixture.stop()
    }

    @Test func acceptsEveryLetterCaseOfLiveActivityAndTheLimits() async throws {
        let setup = try await BroadcastSetup.start()
        let client = try await setup.fixture.connect()
        let requests = [
            // Generated request ids; Apple's spellings of the push type.
            setup.send([("apns-push-type", "LiveActivity")]),
            setup.send([("apns-push-type", "Liveactivity"), ("apns-priority", nil)]),
            // No Message Stored takes expiration 0 or none; 5120 bytes is the limit.
            setup.fixture.broadcast(channelID: setup.noStorage, [("apns-expiration", "0"), ("apns-priority", "1")]),
            setup.fixture.broadcast(channelID: setup.noStorage, body: Array(repeating: UInt8(ascii: "x"), count: 5120)),
        ]
        var requestIDs: Set<String> = []
        for request in requests {
            let response = try await client.send(request)
            #expect(response.status == 200, "\(response.body)")
            requestIDs.insert(response.headers["apns-request-id"] ?? "")
        }
        #expect(requestIDs.count == 4 && requestIDs.allSatisfy(APNsNotification.isCanonicalUUID))
        let accepted = try await setup.fixture.server.waitForAcceptedBroadcasts(count: 4, timeout: .seconds(5))
        #expect(accepted.map(\.priority) == [10, nil, 1, 10])
        #expect(accepted.map(\.expiration) == [nil, nil, 0, nil])
        #expect(accepted.map(\.channelID) == [setup.storing, setup.storing, setup.noStorage, setup.noStorage])
        #expect(accepted[3].payload.count == 5120)
        await setup.fixture.stop()
    }

    @Test func developmentEnvironmentUsesItsOwnChannels() async throws {
        let setup = try await BroadcastSetup.start { $0.environment = .development }
        let client = try await setup.fixture.connect()
        // `start` made this channel in development explicitly: now the mock's own environment.
        #expect(try await client.send(setup.send([("apns-channel-id", setup.otherEnvironmentChannel)])).status == 200)
        // A production channel is unknown to a development mock.
        let production = try setup.fixture.server.channels.create(bundleID: bundleID, storagePolicy: 1, environment: .production)
        #expect(try await client.send(setup.send([("apns-channel-id", production)])).reason == "ChannelNotRegistered")
        await setup.fixture.stop()
    }

    @Test func injectedFailureAnswersWithRequestIDNotApnsID() async throws {
        let setup = try await BroadcastSetup.start()
        let client = try await setup.fixture.connect()
        setup.fixture.server.faults.failNext(1, with: .serviceUnavailable)
        let id = "0c7b6a59-4838-4271-a615-0f1e2d3c4b5a"
        let failed = try await client.send(setup.send([("apns-request-id", id)]))
        #expect(failed.status == 503 && failed.body == #"{"reason":"ServiceUnavailable"}"#)
        #expect(failed.headers["apns-request-id"] == id)
        #expect(failed.headers["apns-id"] == nil)
        setup.fixture.server.faults.refuseNext(1)
        #expect(try await client.send(setup.send()).resetCode == .refusedStream)
        #expect(try await client.send(setup.send()).status == 200)
        let statistics = setup.fixture.server.statistics
        #expect(statistics.count(.serviceUnavailable) == 1 && statistics.refusedStreams == 1)
        #expect(statistics.broadcastRequests == 3 && statistics.acceptedBroadcasts == 1)
        await setup.fixture.stop()
    }

    @Test func firstValidBroadcastRaisesTheStreamLimit() async throws {
        let setup = try await BroadcastSetup.start { $0.maxConcurrentStreams = 300 }
        let client = try await setup.fixture.connect()
        #expect(try await client.send(setup.send([("authorization", nil)])).reason == "MissingProviderToken")
        #expect(try await client.advertisedMaxConcurrentStreams() == [1])
        #expect(try await client.send(setup.send()).status == 200)
        #expect(try await client.advertisedMaxConcurrentStreams() == [1, 300])
        await setup.fixture.stop()
    }

    @Test func devicePushesAndBroadcastsShareAConnection() async throws {
        let setup = try await BroadcastSetup.start()
        let client = try await setup.fixture.connect()
        let responses = try await client.sendConcurrently([
            setup.fixture.request(), setup.send(), setup.fixture.request(), setup.send(),
        ])
        #expect(responses.allSatisfy { $0.status == 200 })
        #expect(responses.map { $0.headers["apns-id"] != nil } == [true, false, true, false])
        #expect(responses.map { $0.headers["apns-request-id"] != nil } == [false, true, false, true])
        #expect(try await setup.fixture.server.waitForAccepted(count: 2, timeout: .seconds(5)).count == 2)
        #expect(setup.fixture.server.acceptedBroadcasts.count == 2)
        // A management path is no route on the push port; it is answered like any unknown device path.
        let managementPath = try await client.send(setup.fixture.createChannel())
        #expect(managementPath.status == 404 && managementPath.reason == "BadPath")
        #expect(managementPath.headers["apns-id"] != nil)
        await setup.fixture.stop()
    }
}
