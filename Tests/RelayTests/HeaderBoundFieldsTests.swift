import APNsCore
import Kafka
import RelayContract
import ServiceSupport
import Testing

@testable import Relay

/// Every event field that becomes a header or part of `:path` is refused, with an `invalid` result and a dead
/// letter, when its value would make a malformed HTTP/2 request (RFC 9113 §8.2.1: no leading or trailing
/// whitespace, no control characters in a field value) or name another path. The values in the JSON below are
/// written as JSON escapes (`\u007f` is DEL).
@Suite struct HeaderBoundFieldsTests {
    private static let token = String(repeating: "ab", count: 32)

    /// A device push with `fields` replacing or adding to the required members.
    private static func device(_ fields: [String: String]) -> String {
        object(["id": #""e1""#, "deviceToken": "\"\(token)\"", "topic": #""com.example.app""#, "pushType": #""alert""#, "payload": #"{"aps":{"alert":"hi"}}"#], fields)
    }

    private static func broadcast(_ fields: [String: String]) -> String {
        object(["id": #""e1""#, "channelId": #""dHN0LXNyY2gtY2hubA==""#, "topic": #""com.example.app""#, "pushType": #""liveactivity""#, "payload": #"{"aps":{"event":"update","timestamp":1,"content-state":{}}}"#], fields)
    }

    private static func object(_ base: [String: String], _ fields: [String: String]) -> String {
        let merged = base.merging(fields) { $1 }
        return "{" + merged.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
    }

    /// The triage's answer: `nil` when the event would be sent.
    private func answer(_ json: String) throws -> (result: DeliveryResult, refusal: Refusal?)? {
        let triage = EventTriage(
            configuration: RelayConfiguration(topics: .init(input: ["in"], results: "results", removedTokens: "removed", deadLetters: "dead")),
            decoder: try EventDecoder(), credentials: CredentialDirectory([.init(patterns: [], authentication: .token, sender: NoSender())]))
        let message = KafkaConsumerMessage(topic: "in", partition: 0, offset: 0, key: nil, value: Array(json.utf8))
        switch triage.triage(InFlightEvent(message, receivedAt: 0), nowSeconds: 1_000) {
        case .deliver: return nil
        case .answer(let result, let refusal, _): return (result, refusal)
        }
    }

    private func expectRefused(_ json: String, reason: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws {
        guard let (result, refusal) = try answer(json) else {
            Issue.record("sent, not refused: \(json)", sourceLocation: sourceLocation)
            return
        }
        #expect(result.outcome == .invalid, "\(json)", sourceLocation: sourceLocation)
        #expect(refusal != nil, "no dead letter for \(json)", sourceLocation: sourceLocation)
        if let reason {
            #expect(result.reason == reason, "\(json): \(result.message ?? "")", sourceLocation: sourceLocation)
        }
    }

    /// The controls: the same events with well-formed values are sent.
    @Test func wellFormedValuesAreSent() throws {
        let sent = [
            Self.device([:]),
            Self.device(["collapseId": #""score update""#, "apnsId": #""123e4567-e89b-12d3-a456-426614174000""#, "priority": "5", "expiration": "0"]),
            Self.device(["topic": #""com.example.app.voip""#, "pushType": #""voip""#]),
            Self.device(["topic": #""com.example.app""#, "pushType": #""fileprovider""#]),
            Self.device(["topic": #""com.example.app.complication""#, "pushType": #""complication""#]),
            Self.broadcast([:]),
            Self.broadcast(["topic": #""com.example-app.push-type.liveactivity""#, "apnsRequestId": #""123e4567-e89b-12d3-a456-426614174000""#]),
        ]
        for json in sent {
            let refused = try answer(json)
            #expect(refused == nil, "\(json): \(refused.map { "\($0.result.reason ?? ""): \($0.result.message ?? "")" } ?? "")")
        }
    }

    /// Past the schema (64 characters, no U+0000–U+001F), the APNs rules refuse what is no header value.
    @Test(arguments: [#"" score""#, #""score ""#, #""sco\u007fre""#, #""scoré""#, #""score😀""#, #""\u00a0score""#])
    func aCollapseIDThatIsNoFieldValueIsRefusedAsBadCollapseId(_ value: String) throws {
        try expectRefused(Self.device(["collapseId": value]), reason: "BadCollapseId")
    }

    @Test(arguments: [#""sco\tre""#, #""score\r\n""#, #""\u0000""#])
    func aCollapseIDWithAControlCharacterBreaksTheSchema(_ value: String) throws {
        try expectRefused(Self.device(["collapseId": value]), reason: "schema_violation")
    }

    @Test(arguments: [#"" 123e4567-e89b-12d3-a456-426614174000""#, #""123e4567-e89b-12d3-a456-42661417400\u007f""#, #""123e4567-e89b-12d3-a456-42661417400é""#, #""123e4567-e89b-12d3-a456-426614174000 ""#])
    func aMalformedApnsIDIsRefused(_ value: String) throws {
        try expectRefused(Self.device(["apnsId": value]))
        try expectRefused(Self.broadcast(["apnsRequestId": value]))
    }

    @Test(arguments: [#"" com.example.app""#, #""com.example.app ""#, #""com.example app""#, #""com.example\u007f""#, #""com.exämple""#, #""com.example\r\n""#, #""""#])
    func aMalformedTopicIsRefused(_ value: String) throws {
        try expectRefused(Self.device(["topic": value]))
        try expectRefused(Self.broadcast(["topic": value]))
    }

    @Test(arguments: [#""alert ""#, #"" alert""#, #""alert\u007f""#, #""alerté""#, #""ALERT""#])
    func aMalformedPushTypeIsRefused(_ value: String) throws {
        try expectRefused(Self.device(["pushType": value]))
    }

    @Test(arguments: [#""10""#, #"" 10""#, "10.0", "1e1", "11", "-10"])
    func aMalformedPriorityIsRefused(_ value: String) throws {
        try expectRefused(Self.device(["priority": value]))
    }

    @Test(arguments: ["-1", #""0""#, "1.5", "1e3", "99999999999"])
    func aMalformedExpirationIsRefused(_ value: String) throws {
        try expectRefused(Self.device(["expiration": value]))
    }

    @Test(arguments: [#""dHN0 LXNyY2gtY2hubA==""#, #"" dHN0LXNyY2gtY2hubA==""#, #""dHN0LXNyY2gtY2hubA\u007f""#, #""dHN0LXNyY2gtY2hubé""#, #""dHN0LXNyY2gtY2hubA==\n""#])
    func aMalformedChannelIDIsRefused(_ value: String) throws {
        try expectRefused(Self.broadcast(["channelId": value]))
    }

    /// The device token is the last segment of `:path`.
    @Test(arguments: [#""ab cd""#, #""abcd\u007f""#, #""ab/../cd""#, #""abcé""#, #""abcd ""#])
    func aMalformedDeviceTokenIsRefused(_ value: String) throws {
        try expectRefused(Self.device(["deviceToken": value]))
    }

    /// A broadcast's topic is the bundle id in `/4/broadcasts/apps/<bundleID>`: `.` and `..` would name
    /// another path; a bundle id is dot-separated segments of `A-Z a-z 0-9 -` (the push-type suffix is dropped
    /// first).
    @Test(arguments: [#"".""#, #""..""#, #""...""#, #""com..example""#, #"".com.example""#, #""com.example.""#, #""com.example_app""#])
    func aBroadcastTopicThatIsNoBundleIDIsRefused(_ value: String) throws {
        try expectRefused(Self.broadcast(["topic": value]), reason: "BadTopic")
    }
}

/// Triage only looks the credential up; nothing is sent.
private struct NoSender: NotificationSender {
    func send(
        _ notification: APNsNotification, deadline: MonotonicInstant,
        completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    ) { Issue.record("triage sent a notification") }
    func holdUnsentRequests() {}
}
