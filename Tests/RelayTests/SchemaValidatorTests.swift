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
