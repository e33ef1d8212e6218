import APNsCore
import APNsMock
import Foundation
import TestSupport
import Testing

/// Every `/3/device/` reason of apns-reference.md §6, through the in-process HTTP/2 client.
@Suite struct ValidationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var reason: APNsReason
        var make: @Sendable (MockFixture) -> TestRequest
        var testDescription: String { name }
    }

    static let oversize = Array(repeating: UInt8(ascii: "x"), count: 4097)

    static let cases: [Case] = [
        Case(name: "bad apns-id", reason: .badMessageId) { $0.request([("apns-id", "not-a-uuid")]) },
        Case(name: "GET", reason: .methodNotAllowed) { $0.request(body: [], method: "GET") },
        Case(name: "no topic", reason: .missingTopic) { $0.request([("apns-topic", nil)]) },
        Case(name: "collapse id 65 bytes", reason: .badCollapseId) {
            $0.request([("apns-collapse-id", String(repeating: "c", count: 65))])
        },
        Case(name: "priority 7", reason: .badPriority) { $0.request([("apns-priority", "7")]) },
        Case(name: "background with priority 10", reason: .badPriority) {
            $0.request([("apns-push-type", "background"), ("apns-priority", "10")])
        },
        Case(name: "unknown push type", reason: .invalidPushType) { $0.request([("apns-push-type", "shout")]) },
        Case(name: "mdm with token auth", reason: .invalidPushType) { $0.request([("apns-push-type", "mdm")]) },
        Case(name: "voip without .voip topic", reason: .badTopic) { $0.request([("apns-push-type", "voip")]) },
        Case(name: "expiration not a number", reason: .badExpirationDate) { $0.request([("apns-expiration", "tomorrow")]) },
        Case(name: "path not /3/device/", reason: .badPath) { $0.request(path: "/3/devices/\(deviceToken)") },
        Case(name: "empty token", reason: .missingDeviceToken) { $0.request(path: "/3/device/") },
        Case(name: "non-hex token", reason: .badDeviceToken) { $0.request(token: "zz" + deviceToken) },
        Case(name: "odd-length token", reason: .badDeviceToken) { $0.request(token: deviceToken + "a") },
        Case(name: "token of the other environment", reason: .badDeviceToken) { $0.request(token: "dd" + deviceToken) },
        Case(name: "token of another app", reason: .deviceTokenNotForTopic) { $0.request(token: "cc" + deviceToken) },
        Case(name: "unregistered token", reason: .unregistered) { $0.request(token: "ee" + deviceToken) },
        Case(name: "expired token", reason: .expiredToken) { $0.request(token: "ff" + deviceToken) },
        Case(name: "duplicate apns-topic", reason: .duplicateHeaders) {
            var request = $0.request()
            request.headers.append(("apns-topic", bundleID))
            return request
        },
        Case(name: "no authorization", reason: .missingProviderToken) { $0.request([("authorization", nil)]) },
        Case(name: "Bearer with capital B", reason: .missingProviderToken) {
            $0.request([("authorization", "Bearer " + $0.key.token(issuedAt: $0.clock.nowSeconds))])
        },
        Case(name: "garbage token", reason: .invalidProviderToken) { $0.request([("authorization", "bearer abc.def.ghi")]) },
        Case(name: "empty payload", reason: .payloadEmpty) { $0.request(body: []) },
        Case(name: "4097-byte alert", reason: .payloadTooLarge) { $0.request(body: oversize) },
        Case(name: "5121-byte voip", reason: .payloadTooLarge) {
            $0.request([("apns-push-type", "voip"), ("apns-topic", bundleID + ".voip")],
                       body: Array(repeating: UInt8(ascii: "x"), count: 5121))
        },
    ]

    static func registerSpecialTokens(_ fixture: MockFixture) {
        fixture.server.registry.register("dd" + deviceToken, environment: .development)
        fixture.server.registry.register("cc" + deviceToken, bundleID: "com.example.other")
        fixture.server.registry.unregister("ee" + deviceToken, sinceMilliseconds: 1_700_000_000_123)
        fixture.server.registry.set("ff" + deviceToken, .expired)
    }

    @Test(arguments: cases)
    func rejectsWithReasonStatusAndApnsID(_ testCase: Case) async throws {
        let fixture = try await MockFixture.start()
        Self.registerSpecialTokens(fixture)
        let client = try await fixture.connect()
        let documented = try DocumentedReason.row(for: testCase.reason)
        let response = try await client.send(testCase.make(fixture))
        #expect(response.status == documented.status)
        #expect(response.reason == documented.reason)
        #expect(APNsNotification.isCanonicalUUID(response.headers["apns-id"] ?? ""))
        if testCase.reason == .unregistered { #expect(response.timestamp == 1_700_000_000_123) }
        if documented.status == 410 { #expect(response.timestamp != nil) }
        #expect(fixture.server.statistics.count(documented) == 1)
        #expect(fixture.server.acceptedNotifications.isEmpty)
        await fixture.stop()
    }

    @Test func acceptsValidPushEchoesApnsIDAndRecordsIt() async throws {
        let fixture = try await MockFixture.start()
        let client = try await fixture.connect()
        let id = "9f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9"
        let response = try await client.send(
            fixture.request([("apns-id", id), ("apns-collapse-id", "c1"), ("apns-expiration", "0")])
        )
        #expect(response.status == 200)
        #expect(response.headers["apns-id"] == id)
        #expect(response.headers["apns-unique-id"] == nil)
        #expect(response.body.isEmpty)
        let accepted = try await fixture.server.waitForAccepted(count: 1, timeout: .seconds(5))
        #expect(accepted.count == 1)
        #expect(accepted[0].deviceToken == deviceToken)
        #expect(accepted[0].topic == bundleID)
        #expect(accepted[0].pushType == .alert)
        #expect(accepted[0].apnsID == id)
        #expect(accepted[0].priority == 10)
        #expect(accepted[0].expiration == 0)
        #expect(accepted[0].collapseID == "c1")
        #expect(accepted[0].payload == Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        await fixture.stop()
    }

    @Test func generatesApnsIDAndDevelopmentUniqueID() async throws {
        let fixture = try await MockFixture.start { $0.environment = .development }
        let client = try await fixture.connect()
        let first = try await client.send(fixture.request())
        let second = try await client.send(fixture.request())
        #expect(first.status == 200)
        let ids = [first, second].compactMap { $0.headers["apns-id"] }
        #expect(ids.count == 2 && Set(ids).count == 2)
        #expect(ids.allSatisfy(APNsNotification.isCanonicalUUID))
        #expect(APNsNotification.isCanonicalUUID(first.headers["apns-unique-id"] ?? ""))
        await fixture.stop()
    }

    @Test func acceptsLimitsAndSuffixedTopics() async throws {
        let fixture = try await MockFixture.start()
        let client = try await fixture.connect()
        let voip = try await client.send(
            fixture.request([("apns-push-type", "voip"), ("apns-topic", bundleID + ".voip")],
                            body: Array(repeating: UInt8(ascii: "x"), count: 5120))
        )
        #expect(voip.status == 200)
        let alert = try await client.send(fixture.request(body: Array(repeating: UInt8(ascii: "x"), count: 4096)))
        #expect(alert.status == 200)
        let background = try await client.send(fixture.request([("apns-push-type", "background"), ("apns-priority", "5")]))
        #expect(background.status == 200)
        let live = try await client.send(
            fixture.request([("apns-push-type", "liveactivity"), ("apns-topic", bundleID + ".push-type.liveactivity")])
        )
        #expect(live.status == 200)
        let upper = try await client.send(fixture.request(token: deviceToken.uppercased()))
        #expect(upper.status == 200)
        let accepted = try await fixture.server.waitForAccepted(count: 5, timeout: .seconds(5))
        #expect(accepted.map(\.pushType) == [.voip, .alert, .background, .liveactivity, .alert])
        #expect(accepted.last?.deviceToken == deviceToken)
        await fixture.stop()
    }

    @Test(arguments: [APNsReason.tooManyRequests, .internalServerError, .serviceUnavailable])
    func injectsErrorsForTheNextRequests(_ reason: APNsReason) async throws {
        let fixture = try await MockFixture.start()
        fixture.server.faults.failNext(2, with: reason)
        let client = try await fixture.connect()
        let first = try await client.send(fixture.request())
        let second = try await client.send(fixture.request())
        let third = try await client.send(fixture.request())
        let documented = try DocumentedReason.row(for: reason)
        #expect(first.status == documented.status && first.reason == documented.reason)
        #expect(second.status == documented.status && second.reason == documented.reason)
        #expect(third.status == 200)
        #expect(fixture.server.acceptedNotifications.count == 1)
        await fixture.stop()
    }

    @Test func failureRateAppliesUntilRemoved() async throws {
        let fixture = try await MockFixture.start()
        let client = try await fixture.connect()
        fixture.server.faults.setFailureRate(1.0, for: .serviceUnavailable)
        let failed = try await client.sendConcurrently(Array(repeating: fixture.request(), count: 5))
        #expect(failed.allSatisfy { $0.status == 503 && $0.reason == "ServiceUnavailable" })
        fixture.server.faults.setFailureRate(0, for: .serviceUnavailable)
        #expect(try await client.send(fixture.request()).status == 200)
        #expect(fixture.server.statistics.count(.serviceUnavailable) == 5)
        await fixture.stop()
    }

    @Test func acceptsClientWithoutALPN() async throws {
        let fixture = try await MockFixture.start()
        let client = try await fixture.connect(alpn: false)
        let response = try await client.send(fixture.request())
        #expect(response.status == 200)
        await fixture.stop()
    }
}
