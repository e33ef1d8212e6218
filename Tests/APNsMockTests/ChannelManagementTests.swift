import APNsCore
import APNsMock
import Foundation
import TestSupport
import Testing

/// The channel-management port (apns-reference.md §10): create, read, delete, list, their reasons, limits and
/// the connection behaviour it shares with the push port.
@Suite struct ChannelManagementTests {
    static func start(_ configure: @escaping (inout APNsMockConfiguration) -> Void = { _ in }) async throws -> MockFixture {
        try await MockFixture.start {
            $0.managementPort = 0
            $0.broadcastDisabledBundles = [BroadcastSetup.disabledApp]
            configure(&$0)
        }
    }

    @Test func createsReadsListsAndDeletesChannels() async throws {
        let fixture = try await Self.start()
        let client = try await fixture.connectManagement()
        let requestID = "5b4a3928-1706-4f5e-8d7c-6b5a49382716"
        var created: [String] = []
        for policy in [0, 1, 1] {
            let body = #"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"#
            let response = try await client.send(fixture.createChannel(body: body))
            #expect(response.status == 201 && response.body.isEmpty)
            #expect(APNsNotification.isCanonicalUUID(response.headers["apns-request-id"] ?? ""))
            let id = try #require(response.headers["apns-channel-id"], "201 without apns-channel-id")
            #expect(id.count == 24 && Data(base64Encoded: id)?.count == 16, "not 16 bytes of base64: \(id)")
            created.append(id)
        }
        #expect(Set(created).count == 3)
        #expect(fixture.server.channels.channels(bundleID: bundleID) == created)

        let read = try await client.send(fixture.channelRequest("GET", channelID: created[1], [("apns-request-id", requestID)]))
        #expect(read.status == 200)
        #expect(read.headers["apns-request-id"] == requestID)
        #expect(read.headers["content-type"] == "application/json")
        #expect(jsonObject(read.body)?["message-storage-policy"] as? Int == 1)
        #expect(jsonObject(read.body)?["push-type"] as? String == "LiveActivity")
        let readNoStorage = try await client.send(fixture.channelRequest("GET", channelID: created[0]))
        #expect(jsonObject(readNoStorage.body)?["message-storage-policy"] as? Int == 0)

        let list = try await client.send(fixture.channelRequest("GET", all: true))
        #expect(list.status == 200 && list.headers["content-type"] == "application/json")
        #expect(jsonObject(list.body)?["channels"] as? [String] == created)

        let deleted = try await client.send(fixture.channelRequest("DELETE", channelID: created[1]))
        #expect(deleted.status == 204 && deleted.body.isEmpty)
        #expect(APNsNotification.isCanonicalUUID(deleted.headers["apns-request-id"] ?? ""))
        let again = try await client.send(fixture.channelRequest("DELETE", channelID: created[1]))
        #expect(again.status == 400 && again.reason == "ChannelNotRegistered")
        let readDeleted = try await client.send(fixture.channelRequest("GET", channelID: created[1]))
        #expect(readDeleted.reason == "ChannelNotRegistered")
        let listAfter = try await client.send(fixture.channelRequest("GET", all: true))
        #expect(jsonObject(listAfter.body)?["channels"] as? [String] == [created[0], created[2]])

        let statistics = fixture.server.statistics
        #expect(statistics.managementRequests == 10 && statistics.requests == 10)
        #expect(statistics.responses["201"] == 3 && statistics.responses["200"] == 4 && statistics.responses["204"] == 1)
        #expect(statistics.count(.channelNotRegistered) == 2)
        #expect(statistics.accepted == 0 && statistics.acceptedBroadcasts == 0)
        await fixture.stop()
    }

    @Test func channelsCreatedOverTheAPIReceiveBroadcasts() async throws {
        let fixture = try await Self.start()
        let management = try await fixture.connectManagement()
        let created = try await management.send(fixture.createChannel())
        let channelID = try #require(created.headers["apns-channel-id"])
        let push = try await fixture.connect()
        #expect(try await push.send(fixture.broadcast(channelID: channelID, [("apns-expiration", "0")])).status == 200)
        #expect(try await management.send(fixture.channelRequest("DELETE", channelID: channelID)).status == 204)
        #expect(try await push.send(fixture.broadcast(channelID: channelID)).reason == "ChannelNotRegistered")
        await fixture.stop()
    }

    @Test func idsAreNeverReissuedAfterDeletion() async throws {
        let fixture = try await Self.start()
        let channels = fixture.server.channels
        var seen: Set<String> = []
        for _ in 0..<5 {
            let batch = try (0..<200).map { _ in try channels.create(bundleID: bundleID, storagePolicy: 0) }
            for id in batch {
                #expect(seen.insert(id).inserted, "id \(id) issued twice")
                #expect(channels.delete(bundleID: bundleID, channelID: id))
            }
        }
        #expect(channels.channels(bundleID: bundleID).isEmpty)
        #expect(channels.storagePolicy(bundleID: bundleID, channelID: seen.first!) == nil)
        #expect(throws: ChannelRegistryError(code: .invalidStoragePolicy)) {
            try channels.create(bundleID: bundleID, storagePolicy: 2)
        }
        await fixture.stop()
    }

    @Test func theTenThousandFirstChannelOfAnAppCannotBeCreated() async throws {
        #expect(APNsMockConfiguration().maxChannelsPerApp == 10_000)
        let fixture = try await Self.start()
        let channels = fixture.server.channels
        for _ in 0..<10_000 { try channels.create(bundleID: bundleID, storagePolicy: 1) }
        #expect(throws: ChannelRegistryError(code: .limitReached)) {
            try channels.create(bundleID: bundleID, storagePolicy: 1)
        }
        let client = try await fixture.connectManagement()
        let refused = try await client.send(fixture.createChannel())
        #expect(refused.status == 400 && refused.reason == "CannotCreateChannelConfig")
        // The limit is per app and environment.
        #expect(try await client.send(fixture.createChannel(app: BroadcastSetup.otherApp)).status == 201)
        try channels.create(bundleID: bundleID, storagePolicy: 1, environment: .development)
        // Room again after a deletion.
        let first = try #require(channels.channels(bundleID: bundleID).first)
        #expect(try await client.send(fixture.channelRequest("DELETE", channelID: first)).status == 204)
        #expect(try await client.send(fixture.createChannel()).status == 201)
        await fixture.stop()
    }

    @Test func aConfiguredLimitApplies() async throws {
        let fixture = try await Self.start { $0.maxChannelsPerApp = 2 }
        let client = try await fixture.connectManagement()
        #expect(try await client.send(fixture.createChannel()).status == 201)
        #expect(try await client.send(fixture.createChannel()).status == 201)
        #expect(try await client.send(fixture.createChannel()).reason == "CannotCreateChannelConfig")
        #expect(fixture.server.channels.channels(bundleID: bundleID).count == 2)
        await fixture.stop()
    }

    @Test func appsSeeOnlyTheirOwnChannels() async throws {
        let fixture = try await Self.start()
        let client = try await fixture.connectManagement()
        let mine = try #require(try await client.send(fixture.createChannel()).headers["apns-channel-id"])
        let other = BroadcastSetup.otherApp
        #expect(try await client.send(fixture.channelRequest("GET", app: other, channelID: mine)).reason == "ChannelNotRegistered")
        #expect(try await client.send(fixture.channelRequest("DELETE", app: other, channelID: mine)).reason == "ChannelNotRegistered")
        let otherList = try await client.send(fixture.channelRequest("GET", app: other, all: true))
        #expect(otherList.status == 200 && otherList.body == #"{"channels":[]}"#)
        #expect(try await client.send(fixture.channelRequest("GET", channelID: mine)).status == 200)
        await fixture.stop()
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var status: Int
        var reason: String
        var make: @Sendable (MockFixture) -> TestRequest
        var testDescription: String { name }

        init(_ name: String, _ reason: APNsReason, make: @escaping @Sendable (MockFixture) -> TestRequest) {
            self.name = name
            // The status from the literal table of documented reasons, not from APNsCore's (which the mock
            // answers from).
            self.status = DocumentedReason.named(reason.rawValue)?.status ?? -1
            self.reason = reason.rawValue
            self.make = make
        }
    }

    static let cases: [Case] = [
        Case("device path", .badPath) { $0.request() },
        Case("broadcast path", .badPath) { $0.broadcast(channelID: BroadcastSetup.unknownChannel) },
        Case("empty bundle id", .badPath) { $0.channelRequest("GET", all: true, path: "/1/apps//all-channels") },
        Case("unknown resource", .badPath) { $0.channelRequest("GET", path: "/1/apps/\(bundleID)/channel") },
        Case("channel id in the path", .badPath) {
            $0.channelRequest("GET", path: "/1/apps/\(bundleID)/channels/\(BroadcastSetup.unknownChannel)")
        },
        Case("duplicate apns-channel-id", .duplicateHeaders) {
            var request = $0.channelRequest("GET", channelID: BroadcastSetup.unknownChannel)
            request.headers.append(("apns-channel-id", BroadcastSetup.unknownChannel))
            return request
        },
        Case("apns-request-id not a UUID", .badMessageId) { $0.channelRequest("GET", all: true, [("apns-request-id", "1")]) },
        Case("PUT channels", .methodNotAllowed) { $0.channelRequest("PUT", channelID: BroadcastSetup.unknownChannel) },
        Case("POST all-channels", .methodNotAllowed) { $0.channelRequest("POST", all: true) },
        Case("DELETE all-channels", .methodNotAllowed) { $0.channelRequest("DELETE", all: true) },
        Case("create for a bundle id with a push-type suffix", .topicDisallowed) {
            $0.createChannel(app: bundleID + ".push-type.liveactivity")
        },
        Case("list for a bundle id with a push-type suffix", .topicDisallowed) {
            $0.channelRequest("GET", app: bundleID + ".voip", all: true)
        },
        Case("read without channel id", .missingChannelId) { $0.channelRequest("GET") },
        Case("delete without channel id", .missingChannelId) { $0.channelRequest("DELETE") },
        Case("read with a malformed channel id", .badChannelId) { $0.channelRequest("GET", channelID: "abc") },
        Case("delete with a malformed channel id", .badChannelId) { $0.channelRequest("DELETE", channelID: "ab$=") },
        Case("no authorization", .missingProviderToken) { $0.channelRequest("GET", all: true, [("authorization", nil)]) },
        Case("garbage token", .invalidProviderToken) { $0.createChannel().withHeader("authorization", "bearer a.b.c") },
        Case("create body not JSON", .unknown("BadRequestPayload")) { $0.createChannel(body: "policy=0") },
        Case("create body a JSON array", .unknown("BadRequestPayload")) { $0.createChannel(body: "[0]") },
        Case("create without body", .unknown("BadRequestPayload")) { $0.channelRequest("POST") },
        Case("create without storage policy", .unknown("MissingChannelQueueSize")) {
            $0.createChannel(body: #"{"push-type":"LiveActivity"}"#)
        },
        Case("create with storage policy 2", .unknown("BadRequestParams")) {
            $0.createChannel(body: #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#)
        },
        Case("create with storage policy \"1\"", .unknown("BadRequestParams")) {
            $0.createChannel(body: #"{"message-storage-policy":"1","push-type":"LiveActivity"}"#)
        },
        Case("create without push type", .missingPushType) { $0.createChannel(body: #"{"message-storage-policy":1}"#) },
        Case("create for alerts", .invalidPushType) {
            $0.createChannel(body: #"{"message-storage-policy":1,"push-type":"alert"}"#)
        },
        Case("create for an app without broadcast", .featureNotEnabled) { $0.createChannel(app: BroadcastSetup.disabledApp) },
        Case("read for an app without broadcast", .featureNotEnabled) {
            $0.channelRequest("GET", app: BroadcastSetup.disabledApp, channelID: BroadcastSetup.unknownChannel)
        },
        Case("delete for an app without broadcast", .featureNotEnabled) {
            $0.channelRequest("DELETE", app: BroadcastSetup.disabledApp, channelID: BroadcastSetup.unknownChannel)
        },
        Case("list for an app without broadcast", .featureNotEnabled) {
            $0.channelRequest("GET", app: BroadcastSetup.disabledApp, all: true)
        },
        Case("read an unknown channel", .channelNotRegistered) {
            $0.channelRequest("GET", channelID: BroadcastSetup.unknownChannel)
        },
        Case("delete an unknown channel", .channelNotRegistered) {
            $0.channelRequest("DELETE", channelID: BroadcastSetup.unknownChannel)
        },
    ]

    @Test(arguments: cases)
    func rejectsWithReasonStatusAndRequestID(_ testCase: Case) async throws {
        let fixture = try await Self.start()
        let client = try await fixture.connectManagement()
        let response = try await client.send(testCase.make(fixture))
        #expect(response.status == testCase.status)
        #expect(response.body == #"{"reason":"\#(testCase.reason)"}"#)
        #expect(APNsNotification.isCanonicalUUID(response.headers["apns-request-id"] ?? ""))
        #expect(response.headers["apns-id"] == nil)
        let statistics = fixture.server.statistics
        #expect(statistics.responses == ["\(testCase.status) \(testCase.reason)": 1])
        #expect(statistics.managementRequests == 1)
        #expect(fixture.server.channels.channels(bundleID: bundleID).isEmpty)
        await fixture.stop()
    }

    @Test func acceptsEveryLetterCaseOfLiveActivity() async throws {
        let fixture = try await Self.start()
        let client = try await fixture.connectManagement()
        for pushType in ["liveactivity", "Liveactivity", "LIVEACTIVITY"] {
            let response = try await client.send(fixture.createChannel(body: #"{"message-storage-policy":1,"push-type":"\#(pushType)"}"#))
            #expect(response.status == 201, "\(pushType): \(response.body)")
        }
        await fixture.stop()
    }

    /// 3,000 ids make a body of about 80 KB: more than a DATA frame (16 KiB) and than the client's stream
    /// window (64 KiB), so the answer arrives in pieces as the client returns credit.
    @Test func listsThousandsOfChannelsInOneAnswer() async throws {
        let fixture = try await Self.start()
        let channels = fixture.server.channels
        for _ in 0..<3_000 { try channels.create(bundleID: bundleID, storagePolicy: 0) }
        let client = try await fixture.connectManagement()
        let list = try await client.send(fixture.channelRequest("GET", all: true), closingAfter: .seconds(10))
        let (closed, size) = (list.connectionClosed, list.body.utf8.count)
        #expect(!closed, "the list of 3,000 channels did not arrive within 10 s (\(size) bytes did)")
        #expect(list.status == 200)
        #expect(size > 65_535)
        let ids = try #require(jsonObject(list.body)?["channels"] as? [String], "not a channel list: \(list.body.prefix(200))")
        #expect(ids == channels.channels(bundleID: bundleID))
        // The connection is still usable afterwards.
        #expect(try await client.send(fixture.createChannel()).status == 201)
        await fixture.stop()
    }

    @Test func oneStreamUntilAValidTokenThenTheConfiguredLimit() async throws {
        let fixture = try await Self.start { $0.maxConcurrentStreams = 200 }
        let client = try await fixture.connectManagement()
        #expect(try await client.send(fixture.channelRequest("GET", all: true, [("authorization", nil)])).status == 403)
        #expect(try await client.advertisedMaxConcurrentStreams() == [1])
        #expect(try await client.send(fixture.channelRequest("GET", all: true)).status == 200)
        #expect(try await client.advertisedMaxConcurrentStreams() == [1, 200])
        await fixture.stop()
    }

    @Test func faultsApplyToTheManagementPort() async throws {
        let fixture = try await Self.start()
        let client = try await fixture.connectManagement()
        fixture.server.faults.refuseNext(1)
        #expect(try await client.send(fixture.createChannel()).resetCode == .refusedStream)
        fixture.server.faults.failNext(1, with: .tooManyRequests)
        let id = "00000000-1111-4222-8333-444444444444"
        let failed = try await client.send(fixture.createChannel().withHeader("apns-request-id", id))
        #expect(failed.status == 429 && failed.reason == "TooManyRequests" && failed.headers["apns-request-id"] == id)
        #expect(try await client.send(fixture.createChannel()).status == 201)
        #expect(fixture.server.channels.channels(bundleID: bundleID).count == 1)
        fixture.server.faults.dropConnectionOnNext(1)
        #expect(try await client.send(fixture.createChannel()).connectionClosed)
        let statistics = fixture.server.statistics
        #expect(statistics.refusedStreams == 1 && statistics.droppedConnections == 1 && statistics.managementRequests == 4)
        await fixture.stop()
    }

    @Test func goAwayReachesManagementConnections() async throws {
        let fixture = try await Self.start()
        let client = try await fixture.connectManagement()
        #expect(try await client.send(fixture.channelRequest("GET", all: true)).status == 200)
        await fixture.server.goAway()
        try await withDeadline("the mock closing the management connection after GOAWAY") { try await client.closeFuture.get() }
        #expect(try await client.goAway()?.lastStreamID == 1)
        await fixture.stop()
    }
}

extension TestRequest {
    /// This request with `name` set to `value` (replacing any earlier value).
    func withHeader(_ name: String, _ value: String) -> TestRequest {
        var copy = self
        copy.headers.removeAll { $0.0 == name }
        copy.headers.append((name, value))
        return copy
    }
}
