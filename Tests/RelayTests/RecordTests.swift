import APNsCore
import Foundation
import RelayContract
import Testing
@testable import Relay

@Suite struct RecordTests {
    private func object(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test func resultEchoesMetadataVerbatimAndEscapesStrings() throws {
        let result = DeliveryResult(
            eventID: "id \"1\"\n\u{01}", metadata: Array(#"{"user": [1, 2, {"x": "é"}]}"#.utf8), outcome: .rejected,
            status: 400, reason: "BadTopic", message: "tab\there", apnsID: "A", attempts: 2,
            source: SourcePosition(topic: "events", partition: 3, offset: 42), receivedAt: 1000, completedAt: 1250
        )
        let bytes = result.jsonBytes()
        #expect(String(decoding: bytes, as: UTF8.self).contains(#""metadata":{"user": [1, 2, {"x": "é"}]}"#))
        let json = try object(bytes)
        #expect(json["id"] as? String == "id \"1\"\n\u{01}")
        #expect(json["outcome"] as? String == "rejected")
        #expect(json["status"] as? Int == 400)
        #expect(json["message"] as? String == "tab\there")
        #expect(json["apnsUniqueId"] is NSNull)
        let source = try #require(json["source"] as? [String: Any])
        #expect(source["offset"] as? Int == 42)
        #expect(source["partition"] as? Int == 3)
        #expect(source["topic"] as? String == "events")
        #expect(json["latencyMs"] as? Int == 250)
    }

    @Test func missingIdAndMetadataAreNull() throws {
        let result = DeliveryResult(
            eventID: nil, metadata: nil, outcome: .invalid, reason: "invalid_json", attempts: 0,
            source: SourcePosition(topic: "t", partition: 0, offset: 0), receivedAt: 1, completedAt: 1
        )
        let json = try object(result.jsonBytes())
        #expect(json["id"] as? String == "", "the schema's empty id for unreadable events")
        #expect(json["metadata"] is NSNull)
        #expect(json["status"] is NSNull)
    }

    /// Attempts that may have reached APNs are reported, so a producer can tell a possible double push; the
    /// member is absent when no attempt was in doubt (the schema requires at least 1 when present).
    @Test func resultSaysHowManyAttemptsMayHaveReachedAPNs() throws {
        var result = DeliveryResult(
            eventID: "e", metadata: nil, outcome: .delivered, status: 200, attempts: 3, possibleDuplicates: 2,
            source: SourcePosition(topic: "t", partition: 0, offset: 7), receivedAt: 1, completedAt: 20_001
        )
        let validator = try SchemaValidator(schemaJSON: JSONSchemas.deliveryResult)
        #expect(try object(result.jsonBytes())["possibleDuplicates"] as? Int == 2)
        #expect(validator.validate(result.jsonBytes()) == [])
        result.possibleDuplicates = 0
        #expect(try object(result.jsonBytes())["possibleDuplicates"] == nil)
        #expect(validator.validate(result.jsonBytes()) == [])
    }

    @Test func tokenRemovedIsKeyedByToken() throws {
        let token = try DeviceToken(hex: "ABCDEF01")
        let record = TokenRemoved(deviceToken: token, topic: "com.example", environment: .development, reason: "Unregistered", invalidatedAt: 1_700_000_000_123, eventID: "e1")
        #expect(record.key == Array("abcdef01".utf8))
        let json = try object(record.jsonBytes())
        #expect(json["invalidatedAt"] as? Int == 1_700_000_000_123)
        #expect(json["environment"] as? String == "development")
    }

    @Test func channelRemovedIsKeyedByChannelAndMatchesItsSchema() throws {
        let channel = try ChannelID(base64: "dHN0LXNyY2gtY2hubA==")
        let record = ChannelRemoved(
            channelID: channel, bundleID: "com.example.app", environment: .production, reason: "ChannelNotRegistered",
            eventID: "e1", metadata: Array(#"{"match":7}"#.utf8)
        )
        #expect(record.key == Array("dHN0LXNyY2gtY2hubA==".utf8))
        let validator = try SchemaValidator(schemaJSON: JSONSchemas.channelRemoved)
        #expect(validator.validate(record.jsonBytes()) == [])
        let json = try object(record.jsonBytes())
        #expect(json["channelId"] as? String == "dHN0LXNyY2gtY2hubA==")
        #expect(json["bundleId"] as? String == "com.example.app")
        #expect((json["metadata"] as? [String: Any])?["match"] as? Int == 7)
    }

    /// `apnsId` is written as APNs sent it: a UUID in either case (kept as 16 bytes) or any other text
    /// (kept as it came, escaped as a JSON string).
    @Test(arguments: ["7C0CD09D-9A4B-4B1E-9D6E-2F0E6F7B2C11", "7c0cd09d-9a4b-4b1e-9d6e-2f0e6f7b2c11", "7C0cd09d-x", "a\"b"])
    func theAPNsIDIsWrittenAsItCame(_ id: String) throws {
        var result = DeliveryResult(
            eventID: "p", metadata: nil, outcome: .delivered, status: 200, attempts: 1,
            source: SourcePosition(topic: "t", partition: 0, offset: 1), receivedAt: 1, completedAt: 2
        )
        result.pushID = APNsID(id)
        let json = try object(result.jsonBytes())
        #expect(json["apnsId"] as? String == id)
        #expect(json["apnsUniqueId"] is NSNull)
    }

    /// A broadcast's result carries `apns-request-id` as `apnsRequestId` (and `apnsId` null).
    @Test func broadcastResultCarriesTheRequestID() throws {
        let result = DeliveryResult(
            eventID: "b", metadata: nil, outcome: .delivered, status: 200, apnsRequestID: "7c0cd09d-9a4b-4b1e-9d6e-2f0e6f7b2c11",
            apnsUniqueID: "7c0cd09d-9a4b-4b1e-9d6e-2f0e6f7b2c12", attempts: 1, source: SourcePosition(topic: "t", partition: 0, offset: 1),
            receivedAt: 1, completedAt: 2
        )
        let validator = try SchemaValidator(schemaJSON: JSONSchemas.deliveryResult)
        #expect(validator.validate(result.jsonBytes()) == [])
        let json = try object(result.jsonBytes())
        #expect(json["apnsRequestId"] as? String == "7c0cd09d-9a4b-4b1e-9d6e-2f0e6f7b2c11")
        #expect(json["apnsId"] is NSNull)
    }
}
