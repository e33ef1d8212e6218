import Testing
@testable import APNsCore

@Suite struct RulesTests {
    private func notification(
        pushType: PushType = .alert,
        topic: String = "com.example.app",
        priority: Priority? = nil,
        collapseID: String? = nil,
        apnsID: String? = nil,
        expiration: Int64? = nil,
        payloadBytes: Int = 20
    ) throws -> APNsNotification {
        APNsNotification(
            deviceToken: try DeviceToken(hex: "abcd"),
            topic: pushType.topic(forBundleID: topic),
            pushType: pushType,
            priority: priority,
            expiration: expiration,
            collapseID: collapseID,
            apnsID: apnsID,
            payload: ArraySlice(repeating: UInt8(ascii: " "), count: payloadBytes)
        )
    }

    @Test func everyPushTypeWithItsSuffixPasses() throws {
        for type in PushType.allCases {
            let n = try notification(pushType: type, priority: type == .background ? .powerConsiderate : nil)
            try n.validate()
            #expect(n.topic.hasSuffix(type.topicSuffix))
        }
    }

    @Test func payloadLimitsFollowPushType() throws {
        #expect(throws: NotificationRuleViolation.self) { try notification(payloadBytes: 4097).validate() }
        try notification(payloadBytes: 4096).validate()
        try notification(pushType: .voip, payloadBytes: 5120).validate()
        #expect(throws: NotificationRuleViolation.self) { try notification(pushType: .voip, payloadBytes: 5121).validate() }
        #expect(throws: NotificationRuleViolation(.payloadEmpty, "payload is empty")) {
            try notification(payloadBytes: 0).validate()
        }
    }

    @Test func refusesWhatAPNsRefuses() throws {
        func reason(_ n: APNsNotification, auth: AuthenticationKind? = nil, now: Int64? = nil) -> APNsReason? {
            do { try n.validate(authentication: auth, now: now); return nil } catch { return error.reason }
        }
        #expect(reason(try notification(collapseID: String(repeating: "c", count: 65))) == .badCollapseId)
        #expect(reason(try notification(collapseID: String(repeating: "c", count: 64))) == nil)
        #expect(reason(try notification(pushType: .background)) == .badPriority)
        #expect(reason(try notification(pushType: .background, priority: .immediate)) == .badPriority)
        #expect(reason(try notification(apnsID: "not-a-uuid")) == .badMessageId)
        #expect(reason(try notification(apnsID: "123E4567-e89b-12d3-a456-426614174000")) == nil)
        #expect(reason(try notification(expiration: -1)) == .badExpirationDate)
        #expect(reason(try notification(expiration: 100), now: 200) == .badExpirationDate)
        #expect(reason(try notification(expiration: 0), now: 200) == nil)
        #expect(reason(try notification(pushType: .mdm), auth: .token) == .invalidPushType)
        #expect(reason(try notification(pushType: .location), auth: .certificate) == .invalidPushType)
        var wrongSuffix = try notification(pushType: .voip)
        wrongSuffix.topic = "com.example.app"
        #expect(reason(wrongSuffix) == .badTopic)
    }

    @Test func reasonsRoundTripAndUnknownIsKept() {
        for reason in APNsReason.allKnown {
            #expect(APNsReason(rawValue: reason.rawValue) == reason)
            #expect(reason.status != nil)
        }
        #expect(APNsReason(rawValue: "SomethingNew") == .unknown("SomethingNew"))
        #expect(APNsReason.allKnown.count == Set(APNsReason.allKnown.map(\.rawValue)).count)
    }

    @Test func decisionTable() {
        func decide(_ status: Int, _ reason: APNsReason? = nil, _ ts: Int64? = nil) -> DeliveryDecision {
            DeliveryDecision(response: APNsResponse(status: status, reason: reason, timestamp: ts))
        }
        #expect(decide(200) == .delivered)
        #expect(decide(410, .unregistered, 1_700_000_000_000) == .unregistered(invalidatedAt: 1_700_000_000_000))
        #expect(decide(410, .expiredToken) == .unregistered(invalidatedAt: nil))
        #expect(decide(400, .badDeviceToken) == .rejected(removesTarget: true))
        #expect(decide(400, .badTopic) == .rejected(removesTarget: false))
        #expect(decide(403, .invalidProviderToken) == .rejected(removesTarget: false))
        #expect(decide(403, .expiredProviderToken) == .retry(.refreshToken))
        #expect(decide(403, .unrelatedKeyIdInToken) == .retry(.replaceConnection))
        #expect(decide(429, .tooManyProviderTokenUpdates) == .retry(.replaceConnection))
        #expect(decide(429, .tooManyRequests) == .retry(.backoff))
        #expect(decide(500, .internalServerError) == .retry(.backoff))
        #expect(decide(503, .serviceUnavailable) == .retry(.backoff))
        #expect(decide(503, .shutdown) == .retry(.backoff))
        #expect(decide(413, .payloadTooLarge) == .rejected(removesTarget: false))
        #expect(DeliveryDecision(failure: .notProcessed) == .retry(.resendNow))
        #expect(DeliveryDecision(failure: .streamRefused) == .retry(.resendNow))
        #expect(DeliveryDecision(failure: .timedOut) == .retry(.backoff))
    }
}
