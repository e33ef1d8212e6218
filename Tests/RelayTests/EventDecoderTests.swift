import APNsCore
@testable import Relay
import TestSupport
import Testing

private let token = String(repeating: "ab", count: 32)

/// An event with the required fields plus `extra` (raw JSON members) and the given payload text.
private func event(_ extra: String = "", payload: String = #"{"aps":{"alert":"hi"}}"#) -> [UInt8] {
    let members = [
        #""id":"evt-1""#, #""deviceToken":"\#(token)""#, #""topic":"com.example.app""#, #""pushType":"alert""#,
        #""payload":\#(payload)"#,
    ]
    return ("{" + members.joined(separator: ",") + (extra.isEmpty ? "" : "," + extra) + "}").bytes
}

private func decodeError(_ bytes: [UInt8]) throws -> EventDecodingError {
    let decoder = try EventDecoder()
    do {
        let decoded = try decoder.decode(bytes)
        Issue.record("expected an error, decoded \(decoded)")
        return EventDecodingError(code: .internalError, pointer: "", message: "none")
    } catch {
        return error
    }
}

@Suite struct EventDecoderTests {
    @Test func decodesMinimalEventWithDefaults() throws {
        let decoded = try EventDecoder().decode(event())
        #expect(decoded.id == "evt-1")
        #expect(decoded.deviceToken?.hex == token)
        #expect(decoded.topic == "com.example.app")
        #expect(decoded.pushType == .alert)
        #expect(decoded.priority == nil)
        #expect(decoded.expiration == nil)
        #expect(decoded.collapseID == nil)
        #expect(decoded.apnsID == nil)
        #expect(decoded.environment == .production)
        #expect(Array(decoded.payload) == #"{"aps":{"alert":"hi"}}"#.bytes)
        #expect(decoded.metadata == nil)
    }

    @Test func decodesEveryField() throws {
        let bytes = event(
            #""priority":5,"expiration":1893456000,"collapseId":"score","apnsId":"123E4567-e89b-12d3-a456-426614174000","#
                + #""environment":"development","metadata":{"user":42,"tags":["a"]}"#)
        let decoded = try EventDecoder().decode(bytes)
        #expect(decoded.priority == .powerConsiderate)
        #expect(decoded.expiration == 1_893_456_000)
        #expect(decoded.collapseID == "score")
        #expect(decoded.apnsID == "123E4567-e89b-12d3-a456-426614174000")
        #expect(decoded.environment == .development)
        #expect(decoded.metadata == #"{"user":42,"tags":["a"]}"#.bytes)
    }

    @Test(arguments: [
        #"{"aps":{"alert":"caf\u00e9 \"q\" \ud83d\ude00 \n"}}"#,
        "{\n  \"aps\" : {\n\t\"alert\" :  \"spaced\"   }\n,\"x\":[1, 2.5e3, -0, true, false, null, {}, []]  }",
        #"{"aps":{"alert":"raw ünïcödé ☕ 😀"},"k":"\/slash"}"#,
        "{}",
    ])
    func preservesPayloadBytesExactly(payload: String) throws {
        let decoded = try EventDecoder().decode(event(payload: payload))
        #expect(Array(decoded.payload) == payload.bytes)
    }

    @Test func preservesPayloadWhenItIsNotTheLastMember() throws {
        let payload = "{ \"aps\" : { } }  "
        let bytes = (#"{"payload":"# + payload + #"  ,"id":"e","deviceToken":"abcd","topic":"t","pushType":"alert"}"#).bytes
        let decoded = try EventDecoder().decode(bytes)
        #expect(Array(decoded.payload) == "{ \"aps\" : { } }".bytes)
    }

    @Test func unescapesStringFieldsAndEscapedKeys() throws {
        let bytes = (#"{"\u0069d":"\u00e9v\u00e9nement","deviceToken":"\u0061\u0062","topic":"com.example.app","#
            + #""pushType":"alert","payload":{}}"#).bytes
        let decoded = try EventDecoder().decode(bytes)
        #expect(decoded.id == "événement")
        #expect(decoded.deviceToken?.hex == "ab")
    }

    @Test func appendsThePushTypeSuffixToTheTopic() throws {
        let decoder = try EventDecoder()
        let voip = try decoder.decode(
            (#"{"id":"e","deviceToken":"abcd","topic":"com.example.app","pushType":"voip","payload":{}}"#).bytes)
        #expect(voip.notification.topic == "com.example.app.voip")
        let given = try decoder.decode(
            (#"{"id":"e","deviceToken":"abcd","topic":"com.example.app.voip","pushType":"voip","payload":{}}"#).bytes)
        #expect(given.notification.topic == "com.example.app.voip")
        #expect(given.notification.path == "/3/device/abcd")
    }

    @Test(arguments: [
        (#""deviceToken":"abc""#, "/deviceToken"),
        (#""priority":7"#, "/priority"),
        (#""priority":"10""#, "/priority"),
        (#""priority":10.0"#, "/priority"),
        (#""expiration":-1"#, "/expiration"),
        (#""expiration":1893456000000"#, "/expiration"),
        (#""expiration":99999999999999999999999"#, "/expiration"),
        (#""collapseId":"""#, "/collapseId"),
        (#""apnsId":"not-a-uuid""#, "/apnsId"),
        (#""environment":"sandbox""#, "/environment"),
        (#""metadata":[1]"#, "/metadata"),
        (#""badge":1"#, "/badge"),
        (#""a/b~c":1"#, "/a~1b~0c"),
    ])
    func reportsSchemaViolationsWithAPointer(member: String, pointer: String) throws {
        // Replace the valid deviceToken when the member redefines it, to test the rule and not duplicates.
        var bytes = event(member)
        if member.hasPrefix(#""deviceToken""#) {
            bytes = (#"{"id":"e",\#(member),"topic":"t","pushType":"alert","payload":{}}"#).bytes
        }
        let error = try decodeError(bytes)
        #expect(error.code == .schemaViolation)
        #expect(error.pointer == pointer, "\(error)")
    }

    @Test func reportsMissingRequiredFields() throws {
        let error = try decodeError((#"{"id":"e","deviceToken":"abcd","topic":"t","payload":{}}"#).bytes)
        #expect(error.code == .schemaViolation)
        #expect(error.pointer == "/pushType")
        #expect(error.message == "is required")
    }

    @Test(arguments: [
        ("", EventDecodingError.Code.invalidJSON),
        ("   ", .invalidJSON),
        ("{", .invalidJSON),
        (#"{"id":"e","#, .invalidJSON),
        (#"{"id":"e"} x"#, .invalidJSON),
        (#"{"id":"e"}}"#, .invalidJSON),
        (#"{"id":"e","payload":{}"#, .invalidJSON),
        (#"{"payload":{"a":[1,{"b":2}]}"#, .invalidJSON),
        (#"{"id":"e","payload":{"#, .invalidJSON),
        (#"{"id":'e'}"#, .invalidJSON),
        ("{\"id\":\"tab\there\"}", .invalidJSON),
        (#"{"id":"\ud800"}"#, .invalidJSON),
        (#"{"id":"\x"}"#, .invalidJSON),
        ("[1,2]", .schemaViolation),
        ("\"text\"", .schemaViolation),
        ("42", .schemaViolation),
        ("true", .schemaViolation),
        ("null", .schemaViolation),
        // Not JSON at all, though the first byte could start a scalar (`t`, `n`, a digit, a quote).
        ("test", .invalidJSON),
        ("nul", .invalidJSON),
        ("true x", .invalidJSON),
        ("42 43", .invalidJSON),
        ("\"open", .invalidJSON),
        ("1e", .invalidJSON),
    ])
    func reportsMalformedInput(text: String, code: EventDecodingError.Code) throws {
        let error = try decodeError(text.bytes)
        #expect(error.code == code, "\(text): \(error)")
    }

    @Test func reportsInvalidUTF8() throws {
        var bytes = event()
        bytes.insert(contentsOf: [0xC3, 0x28], at: 9)  // inside the id string
        #expect(try decodeError(bytes).code == .invalidUTF8)
    }

    @Test func refusesMalformedPayloadTokens() throws {
        for payload in [#"{"a":01}"#, #"{"a":1.}"#, #"{"a":-}"#, #"{"a":tru}"#, #"{"a":[1,]}"#, #"{"a" 1}"#,
                        #"{"a":"\u12"}"#, #"{"a":"\udc00"}"#, "{\"a\":\"\u{01}\"}", #"{"a":1e}"#, #"{"a":nul}"#]
        {
            #expect(try decodeError(event(payload: payload)).code == .invalidJSON, "\(payload)")
        }
    }

    @Test func refusesAByteOrderMark() throws {
        #expect(try decodeError([0xEF, 0xBB, 0xBF] + event()).code == .invalidJSON)
    }

    @Test func refusesDuplicateTopLevelKeys() throws {
        let error = try decodeError(event(#""id":"again""#))
        #expect(error.code == .duplicateKey)
        #expect(error.pointer == "/id")
        // Duplicates inside the payload are the payload's business: sent untouched.
        #expect(throws: Never.self) { try EventDecoder().decode(event(payload: #"{"a":1,"a":2}"#)) }
    }

    @Test func enforcesTheNestingLimit() throws {
        func nested(_ levels: Int) -> String {  // payload at level 2 plus `levels` arrays inside it
            #"{"a":"# + String(repeating: "[", count: levels) + String(repeating: "]", count: levels) + "}"
        }
        #expect(throws: Never.self) { try EventDecoder().decode(event(payload: nested(62))) }
        let error = try decodeError(event(payload: nested(63)))
        #expect(error.code == .tooDeep)
        #expect(error.pointer == "/payload")
        let deepest = try decodeError(event(payload: nested(30_000)))
        #expect(deepest.code == .tooDeep, "\(deepest)")
    }

    @Test func refusesOversizedEvents() throws {
        let filler = String(repeating: "x", count: EventDecoder.maxEventBytes)
        let error = try decodeError(event(#""metadata":{"f":"\#(filler)"}"#))
        #expect(error.code == .eventTooLarge)
    }

    @Test func explainerSuppliesTheDetailedMessage() throws {
        let decoder = try EventDecoder(explainer: SchemaValidator.notificationEvent())
        do {
            _ = try decoder.decode((#"{"id":"e","deviceToken":"xyz","topic":"t","pushType":"alert","payload":{}}"#).bytes)
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .schemaViolation)
            #expect(error.pointer == "/deviceToken")
            #expect(error.message.contains("does not match pattern ^([0-9a-fA-F]{2})+$"), "\(error)")
        }
    }

    @Test func decodesFromMemoryTheCallerOwns() throws {
        let bytes = Array("garbage".utf8) + event(payload: #"{ "a" : 1 }"#) + Array("more".utf8)
        let decoder = try EventDecoder()
        let decoded = try bytes.withUnsafeBytes { all in
            try decoder.decode(UnsafeRawBufferPointer(rebasing: all[7..<(all.count - 4)]))
        }
        #expect(Array(decoded.payload) == #"{ "a" : 1 }"#.bytes)
        #expect(throws: EventDecodingError.self) { try decoder.decode(UnsafeRawBufferPointer(start: nil, count: 0)) }
    }

    @Test func decoderIsReusableAfterErrors() throws {
        let decoder = try EventDecoder()
        for _ in 0..<3 {
            #expect(throws: EventDecodingError.self) { try decoder.decode("{".bytes) }
            #expect(try decoder.decode(event()).id == "evt-1")
        }
    }

    @Test func neverCrashesOnArbitraryBytes() throws {
        let decoder = try EventDecoder()
        var generator = SeededGenerator(seed: 7)
        let alphabet = Array(#"{}[]:,"\ 0123456789abcdefeEtrunl-+."#.utf8) + [0x00, 0x1F, 0x80, 0xC3, 0xFF]
        for _ in 0..<3000 {
            let length = Int.random(in: 0..<64, using: &generator)
            let bytes = (0..<length).map { _ in alphabet.randomElement(using: &generator) ?? 0 }
            _ = try? decoder.decode(bytes)
        }
    }

    @Test func checksAPNsRulesAfterTheSchema() throws {
        let decoder = try EventDecoder()
        // 64 characters but 128 bytes: passes the schema, breaks APNs' 64-byte rule.
        let collapse = String(repeating: "é", count: 64)
        let event1 = try decoder.decode(event(#""collapseId":"\#(collapse)""#))
        #expect(throws: NotificationRuleViolation(.badCollapseId, "apns-collapse-id is 128 bytes; at most 64 allowed")) {
            try event1.validatedNotification()
        }
        let background = try decoder.decode(
            (#"{"id":"e","deviceToken":"abcd","topic":"t","pushType":"background","priority":10,"payload":{}}"#).bytes)
        do {
            _ = try background.validatedNotification()
            Issue.record("expected BadPriority")
        } catch {
            #expect(error.reason == .badPriority)
        }
        let big = try decoder.decode(event(payload: #"{"x":""# + String(repeating: "y", count: 4100) + #""}"#))
        do {
            _ = try big.validatedNotification()
            Issue.record("expected PayloadTooLarge")
        } catch {
            #expect(error.reason == .payloadTooLarge)
        }
        let ok = try decoder.decode(event(#""priority":10"#)).validatedNotification(authentication: .token, now: 0)
        #expect(ok.priority == .immediate)
    }

    /// The schema lets `priority` out; APNs refuses its default (10) for background pushes, so an omitted
    /// priority must become 5 there (it used to be refused as BadPriority, for a header the producer never set).
    @Test func anOmittedPriorityGetsWhatThePushTypeRequires() throws {
        let decoder = try EventDecoder()
        let background = try decoder.decode(
            (#"{"id":"e","deviceToken":"abcd","topic":"t","pushType":"background","payload":{"aps":{"content-available":1}}}"#).bytes)
        #expect(try background.validatedNotification().priority == .powerConsiderate)
        let alert = try decoder.decode(event())
        #expect(try alert.validatedNotification().priority == nil, "APNs' default (10) is fine for alerts: no header")
    }
}
