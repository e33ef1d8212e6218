import Testing
@testable import APNsCore

/// What the relay sends as a header or in `:path` must make a well-formed HTTP/2 request: RFC 9113 §8.2.1
/// makes a field value with leading or trailing whitespace, or with control characters, malformed (the peer
/// resets the stream; a proxy may mangle it). A broadcast's bundle id is a path segment (apns-reference.md §10).
@Suite struct HeaderFieldRulesTests {
    private func reason(_ notification: APNsNotification) -> APNsReason? {
        do {
            try notification.validate()
            return nil
        } catch {
            return error.reason
        }
    }

    private func push(topic: String = "com.example.app", collapseID: String? = nil) throws -> APNsNotification {
        APNsNotification(
            deviceToken: try DeviceToken(hex: "abcd"), topic: topic, pushType: .alert, collapseID: collapseID,
            payload: Array("{}".utf8)[...])
    }

    private func broadcast(bundleID: String) throws -> APNsNotification {
        APNsNotification(
            channelID: try ChannelID(base64: "dHN0LXNyY2gtY2hubA=="), bundleID: bundleID, payload: Array("{}".utf8)[...])
    }

    @Test(arguments: [
        " score", "score ", "\tscore", "score\t", "sco\u{7F}re", "sco\u{1}re", "sco\rre", "sco\nre", "scoré", "score😀", "",
    ])
    func refusesACollapseIDThatIsNoWellFormedFieldValue(_ collapseID: String) throws {
        #expect(reason(try push(collapseID: collapseID)) == .badCollapseId, "\(Array(collapseID.utf8))")
    }

    @Test(arguments: ["score", "score update", "a", "~!#$%&'()*+,-./:;<=>?@[\\]^_`{|}", String(repeating: "c", count: 64)])
    func acceptsAPrintableASCIICollapseID(_ collapseID: String) throws {
        #expect(reason(try push(collapseID: collapseID)) == nil)
    }

    /// `apns-topic` reaches the wire as a header value even when an event's schema did not check it (a
    /// notification built by a command or a test).
    @Test(arguments: [" com.example.app", "com.example.app ", "com.example\u{7F}", "com.exämple", "com.ex\r\nample"])
    func refusesADeviceTopicThatIsNoWellFormedFieldValue(_ topic: String) throws {
        #expect(reason(try push(topic: topic)) == .badTopic, "\(Array(topic.utf8))")
    }

    /// apns-reference.md §10: the bundle id is the last segment of `/4/broadcasts/apps/<bundleID>`; `.` or `..`
    /// there would name another path. A bundle id is dot-separated segments of `A-Z a-z 0-9 -`.
    @Test(arguments: [".", "..", ".com.example", "com.example.", "com..example", "com.example_app", "com.example app", "com.exämple", "com.example%2F"])
    func refusesABroadcastBundleIDThatIsNoBundleID(_ bundleID: String) throws {
        let refused = reason(try broadcast(bundleID: bundleID))
        #expect(refused == .badTopic || refused == .topicDisallowed, "\(bundleID): \(String(describing: refused))")
    }

    @Test(arguments: ["com.example.app", "com.example-app.Widget2", "A", "io.x-y.z9"])
    func acceptsABroadcastBundleID(_ bundleID: String) throws {
        let notification = try broadcast(bundleID: bundleID)
        #expect(reason(notification) == nil)
        #expect(notification.path == "/4/broadcasts/apps/" + bundleID)
    }

    /// The push-type suffixes are bundle-id shaped too: device topics with them still pass.
    @Test func deviceTopicsWithEveryPushTypeSuffixStillPass() throws {
        for type in PushType.allCases {
            let notification = APNsNotification(
                deviceToken: try DeviceToken(hex: "abcd"), topic: type.topic(forBundleID: "com.example.app"), pushType: type,
                priority: type.requiredPriority, payload: Array("{}".utf8)[...])
            #expect(reason(notification) == nil, "\(type)")
        }
    }
}
