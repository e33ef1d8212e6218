import Foundation
import Testing

@testable import Relay

@Suite struct SchemaValidatorTests {
    @Test func embeddedSchemasMatchSchemaFiles() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Checkout.root.appendingPathComponent("Schemas").path)
            .filter { $0.hasSuffix(".schema.json") }.sorted()
        #expect(files == JSONSchemas.all.map(\.fileName).sorted(), "every schema file is embedded")
        for (fileName, text) in JSONSchemas.all {
            let onDisk = FileManager.default.contents(atPath: Checkout.schemaFile(fileName).path).map { [UInt8]($0) }
            #expect(onDisk == Array(text.utf8), "\(fileName) differs: run Tests/schema/generate_schemas_swift.py")
        }
    }

    @Test(arguments: ["notification-event", "delivery-result", "token-removed"])
    func examplesValidateAndCounterExamplesDoNot(schema: String) throws {
        let text = try #require(JSONSchemas.all.first { $0.fileName == "\(schema).schema.json" }?.text)
        let validator = try SchemaValidator(schemaJSON: text)
        let valid = Checkout.examples(schema, "valid")
        let invalid = Checkout.examples(schema, "invalid") + Checkout.examples(schema, "invalid-beyond-schema")
        #expect(valid.count >= 2 && invalid.count >= 5)
        for example in valid {
            #expect(validator.validate(example.bytes) == [], "\(example.name)")
        }
        for example in invalid {
            #expect(!validator.validate(example.bytes).isEmpty, "\(example.name)")
        }
    }

    @Test func detailedErrorsNameThePointerAndThePattern() throws {
        let validator = try SchemaValidator.notificationEvent()
        let errors = validator.validate(
            (#"{"id":"e","deviceToken":"abc","topic":"t","pushType":"Alert","payload":{},"extra":1}"#).bytes)
        let described = errors.map(\.description)
        #expect(described.contains("/deviceToken: does not match pattern ^([0-9a-fA-F]{2})+$"), "\(described)")
        #expect(errors.contains { $0.pointer == "/pushType" })
        #expect(described.contains { $0.hasPrefix("/pushType: must be one of \"alert\"") }, "\(described)")
        #expect(described.contains("/extra: unknown member \"extra\" (the schema allows no other members)"), "\(described)")
        let missing = validator.validate((#"{"id":"e"}"#).bytes).map(\.description)
        #expect(missing.contains("/: required member \"deviceToken\" is missing"), "\(missing)")
    }

    @Test func extraRulesAreReported() throws {
        let validator = try SchemaValidator.notificationEvent()
        let duplicate = validator.validate((#"{"id":"a","id":"b"}"#).bytes)
        #expect(duplicate == [SchemaError(pointer: "/id", message: "member \"id\" appears more than once")])
        let nestedDuplicate = #"{"id":"e","deviceToken":"abcd","topic":"t","pushType":"alert","payload":{"a":1,"a":2}}"#
        #expect(validator.validate(nestedDuplicate.bytes) == [], "duplicates below the top level pass through")
        let deep = validator.validate(("{\"payload\":" + String(repeating: "[", count: 100_000)).bytes)
        #expect(deep.count == 1)
        let syntax = validator.validate("{\"id\":".bytes)
        #expect(syntax.first?.message.hasPrefix("invalid JSON") == true)
    }

    @Test func longStringsDoNotOverflowTheRegexStack() throws {
        // libstdc++'s regex recurses per character; a 60 KiB token must still get a detailed answer.
        let validator = try SchemaValidator.notificationEvent()
        let token = String(repeating: "a", count: 60_000)
        let bytes = (#"{"id":"e","deviceToken":"\#(token)","topic":"t","pushType":"alert","payload":{}}"#).bytes
        #expect(!validator.isValid(bytes))
        let errors = validator.validate(bytes)
        #expect(errors.contains { $0.pointer == "/deviceToken" }, "\(errors)")
    }

    @Test func refusesAnInvalidSchema() {
        #expect(throws: SchemaValidator.InvalidSchema.self) { try SchemaValidator(schemaJSON: "{not json") }
    }

    @Test func validatesOutputRecordsAgainstTheirSchemas() throws {
        let results = try SchemaValidator(schemaJSON: JSONSchemas.deliveryResult)
        let record = #"{"id":"e","outcome":"delivered","status":200,"reason":null,"attempts":1,"receivedAt":1,"#
            + #""completedAt":2,"latencyMs":1,"source":{"topic":"t","partition":0,"offset":0}}"#
        #expect(results.validate(record.bytes) == [])
        let removed = try SchemaValidator(schemaJSON: JSONSchemas.tokenRemoved)
        #expect(!removed.isValid(record.bytes))
    }
}

@Suite struct SalvagedEventTests {
    @Test func salvagesIDAndMetadataOfARefusedEvent() {
        let salvaged = SalvagedEvent(salvaging: (#"{"id":"evt-9","priority":"high","metadata":{ "user" : 42 }}"#).bytes)
        #expect(salvaged.id == "evt-9")
        #expect(salvaged.metadata == #"{"user":42}"#.bytes)
    }

    @Test func salvagesNothingFromNonsense() {
        #expect(SalvagedEvent(salvaging: "{\"id\":".bytes) == SalvagedEvent())
        #expect(SalvagedEvent(salvaging: "[1]".bytes) == SalvagedEvent())
        #expect(SalvagedEvent(salvaging: (#"{"id":5,"metadata":"x"}"#).bytes) == SalvagedEvent())
        let deep = #"{"id":"e","metadata":{"a":"# + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "}}"
        #expect(SalvagedEvent(salvaging: deep.bytes) == SalvagedEvent(id: "e"))
    }
}

/// The detailed pass never runs a `pattern` on a string that already failed its `maxLength`: libstdc++'s
/// std::regex costs stack and time per character (measured: 22 MiB and 115 ms for a 60,000-character device
/// token against `^([0-9a-fA-F]{2})+$`), and a pattern problem on top of a length problem says nothing new.
@Suite struct BoundedPatternTests {
    /// An event whose device token and topic are far over their `maxLength` (400 and 255 characters, the
    /// schema's) and do not match their patterns either; its `id` ("e") is short, so the `not` pattern of
    /// `id` is the one pattern left to run.
    private static func event(token: String, topic: String, id: String = "e") -> [UInt8] {
        Array(#"{"id":"\#(id)","deviceToken":"\#(token)","topic":"\#(topic)","pushType":"alert","payload":{"n":\#(String(repeating: "[", count: 60) + String(repeating: "]", count: 60))}}"#.utf8)
    }

    @Test func aStringOverItsMaxLengthIsNotRunAgainstItsPattern() throws {
        let validator = try SchemaValidator.notificationEvent()
        let long = Self.event(token: String(repeating: "z", count: 50_001), topic: String(repeating: "!", count: 10_000))
        let before = validator.patternEvaluations
        let problems = validator.validate(long).map(\.description)
        let evaluated = validator.patternEvaluations - before
        #expect(problems.contains("/deviceToken: must be at most 400 characters long"), "\(problems)")
        #expect(problems.contains("/topic: must be at most 255 characters long"), "\(problems)")
        #expect(!problems.contains { $0.contains("does not match pattern") }, "no pattern problem on top of a length one: \(problems)")
        #expect(evaluated == 1, "only id's pattern ran (\(evaluated) patterns evaluated)")

        // The control: the same strings within their maxLength are run against their patterns and fail them.
        let short = Self.event(token: "zzz", topic: "!")
        let shortBefore = validator.patternEvaluations
        let shortProblems = validator.validate(short).map(\.description)
        #expect(validator.patternEvaluations - shortBefore == 3, "id, deviceToken and topic patterns ran")
        #expect(shortProblems.contains("/deviceToken: does not match pattern ^([0-9a-fA-F]{2})+$"), "\(shortProblems)")
        #expect(shortProblems.contains("/topic: does not match pattern ^[A-Za-z0-9_.-]+$"), "\(shortProblems)")
    }

    /// Under `not` (`id` must not contain a control character) a skipped pattern counts as no match, so an id
    /// that is too long gets its length problem only, whatever it contains; within its length the rule holds.
    @Test func aNegatedPatternOnAStringOverItsMaxLengthAddsNoProblem() throws {
        let validator = try SchemaValidator.notificationEvent()
        let token = String(repeating: "ab", count: 32)
        for id in [String(repeating: "x", count: 300), String(repeating: "x", count: 300) + "\\u0001"] {
            let problems = validator.validate(Self.event(token: token, topic: "com.example.app", id: id)).map(\.description)
            #expect(problems == ["/id: must be at most 256 characters long"], "\(problems)")
        }
        let control = validator.validate(Self.event(token: token, topic: "com.example.app", id: "x\\u0001")).map(\.description)
        #expect(control == ["/id: must not contain a match of [\\x00-\\x1F]"], "\(control)")
    }

    /// The verdict is the schema's whichever patterns the detailed pass skips.
    @Test func skippedPatternsNeverChangeTheVerdict() throws {
        let validator = try SchemaValidator.notificationEvent()
        let long = Self.event(token: String(repeating: "ab", count: 300), topic: "com.example.app")
        #expect(!validator.isValid(long))
        #expect(validator.validate(long).map(\.description) == ["/deviceToken: must be at most 400 characters long"])
        let valid = Self.event(token: String(repeating: "ab", count: 200), topic: "com.example.app")
        #expect(validator.isValid(valid))
        #expect(validator.validate(valid) == [])
    }
}
