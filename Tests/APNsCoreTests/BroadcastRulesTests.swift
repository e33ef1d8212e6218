import Testing
@testable import APNsCore

/// Broadcasts (apns-reference.md §10): the channel id, the path, the rules that differ from device pushes.
@Suite struct BroadcastRulesTests {
    private func broadcast(
        bundleID: String = "com.example.app", priority: Priority? = nil, expiration: Int64? = nil, requestID: String? = nil,
        payloadBytes: Int = 20
    ) throws -> APNsNotification {
        APNsNotification(
            channelID: try ChannelID(base64: "dHN0LXNyY2gtY2hubA=="), bundleID: bundleID, priority: priority,
            expiration: expiration, requestID: requestID, payload: ArraySlice(repeating: UInt8(ascii: " "), count: payloadBytes)
        )
    }

    @Test func channelIDsAreBase64WithinTheLimit() throws {
        for valid in ["dHN0LXNyY2gtY2hubA==", "abc+/9", "YQ=", String(repeating: "A", count: 128)] {
            #expect(try ChannelID(base64: valid).base64 == valid)
        }
        let refused: [(String, ChannelID.Invalid.Reason)] = [
            ("", .empty), (String(repeating: "A", count: 129), .tooLong), ("ab-_", .notBase64), ("ab=c", .notBase64),
            ("abc===", .notBase64), ("==", .notBase64), ("a b", .notBase64),
        ]
        for (text, reason) in refused {
            #expect(throws: ChannelID.Invalid(reason: reason), "\(text)") { try ChannelID(base64: text) }
        }
    }

    @Test func aBroadcastGoesToTheAppsBroadcastPathAsALiveActivity() throws {
        let n = try broadcast()
        #expect(n.path == "/4/broadcasts/apps/com.example.app")
        #expect(n.pushType == .liveactivity)
        #expect(n.isBroadcast && n.deviceToken == nil && n.channelID?.base64 == "dHN0LXNyY2gtY2hubA==")
        #expect(n.maxPayloadBytes == 5120)
        try n.validate(authentication: .token)
        try n.validate(authentication: .certificate)
    }

    @Test func broadcastRulesDifferFromDevicePushes() throws {
        // 5120 bytes whatever the push type (a device Live Activity allows 4096).
        try broadcast(payloadBytes: 5120).validate()
        #expect(throws: NotificationRuleViolation(.payloadTooLarge, "payload is 5121 bytes; a broadcast allows 5120")) {
            try broadcast(payloadBytes: 5121).validate()
        }
        #expect(throws: NotificationRuleViolation.self) { try broadcast(bundleID: "com.example.app.push-type.liveactivity").validate() }
        #expect(throws: NotificationRuleViolation.self) { try broadcast(bundleID: "com.example/app").validate() }
        var other = try broadcast()
        other.pushType = .alert
        #expect(throws: NotificationRuleViolation(.invalidPushType, "broadcasts must have push type liveactivity, not alert")) {
            try other.validate()
        }
        var collapsed = try broadcast()
        collapsed.collapseID = "score"
        #expect(throws: NotificationRuleViolation(.badCollapseId, "broadcasts have no apns-collapse-id")) { try collapsed.validate() }
        #expect(throws: NotificationRuleViolation.self) { try broadcast(requestID: "not-a-uuid").validate() }
        #expect(throws: NotificationRuleViolation.self) { try broadcast(expiration: 10).validate(now: 20) }
        try broadcast(expiration: 0, requestID: "7c0cd09d-9a4b-4b1e-9d6e-2f0e6f7b2c11").validate(now: 20)
    }

    @Test func channelNotRegisteredRemovesTheChannelAndTheOtherBroadcastReasonsAreFinal() {
        func decide(_ reason: APNsReason) -> DeliveryDecision { DeliveryDecision(response: APNsResponse(status: 400, reason: reason)) }
        #expect(decide(.channelNotRegistered) == .rejected(removesTarget: true))
        for reason in [APNsReason.badChannelId, .missingChannelId, .featureNotEnabled, .missingPushType, .cannotCreateChannelConfig] {
            #expect(decide(reason) == .rejected(removesTarget: false), "\(reason)")
        }
    }

    @Test func suffixesComeOffForThePath() {
        #expect(PushType.liveactivity.bundleID(fromTopic: "com.example.app.push-type.liveactivity") == "com.example.app")
        #expect(PushType.liveactivity.bundleID(fromTopic: "com.example.app") == "com.example.app")
        #expect(PushType.liveactivity.bundleID(fromTopic: ".push-type.liveactivity") == ".push-type.liveactivity")
    }

    @Test func managementHostsAndPorts() {
        #expect(APNsEnvironment.production.managementHost == "api-manage-broadcast.push.apple.com")
        #expect(APNsEnvironment.production.managementPort == 2196)
        #expect(APNsEnvironment.development.managementHost == "api-manage-broadcast.sandbox.push.apple.com")
        #expect(APNsEnvironment.development.managementPort == 2195)
    }
}
