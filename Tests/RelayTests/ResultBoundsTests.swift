import Foundation
import Kafka
import RelayContract
import ServiceSupport
import TestSupport
import Testing

@testable import Relay

/// A refused event's result echoes a salvaged `id` and explains every problem; both are capped, so a producer
/// cannot make a result many times its event's size or break `Schemas/delivery-result.schema.json` (`id` at most
/// 256 characters, `message` at most 4096).
@Suite struct ResultBoundsTests {
    /// The caps: a salvaged id keeps at most the schema's 256 characters (Unicode scalars, as JSON Schema counts);
    /// a message at most 2048 bytes.
    static let maxIDCharacters = 256
    static let maxMessageBytes = 2048

    /// The largest result JSON a result with no metadata can be: the id and message each escaped at worst 6 bytes
    /// per character (`\u0001`), plus the fixed members (names, `reason` at most 128 characters, numbers of at most
    /// 20 digits, the source topic) well under 1 KiB.
    static let maxResultBytes = 6 * (maxIDCharacters + maxMessageBytes) + 1024

    /// The result records the relay publishes for `event`: as the fast decoder refused it, and explained by the
    /// reference validator as the pipeline does when it has one; with the first one's key.
    private func resultRecords(for event: [UInt8]) throws -> (fast: [UInt8], explained: [UInt8], key: [UInt8]) {
        let triage = EventTriage(
            configuration: RelayConfiguration(topics: .init(input: ["in"], results: "results", removedTokens: "removed", deadLetters: "dead")),
            decoder: try EventDecoder(), credentials: CredentialDirectory([]))
        let message = KafkaConsumerMessage(topic: "in", partition: 0, offset: 7, key: nil, value: event)
        guard case .answer(let answer, let refusal?, _) = triage.triage(InFlightEvent(message, receivedAt: 0), nowSeconds: 0) else {
            throw TestFailure("the event was not refused with a dead letter")
        }
        let (explained, _) = EventTriage.explained(answer, refusal, bytes: event[...], by: try SchemaValidator.notificationEvent())
        let outputs = OutputRecords(topics: .defaults, maxDeadLetterBytes: 1 << 20)
        let source = SourcePosition(topic: "in", partition: 0, offset: 7)
        let buffers = ByteBufferPool.forRecords()
        let fast = outputs.result(answer, key: nil, source: source)
        return (
            fast.withValue(buffers) { Array($0 ?? []) }, outputs.result(explained, key: nil, source: source).withValue(buffers) { Array($0 ?? []) },
            Array(fast.key ?? [])
        )
    }

    private func resultRecord(for event: [UInt8]) throws -> (value: [UInt8], key: [UInt8]) {
        let records = try resultRecords(for: event)
        return (records.explained, records.key)
    }

    /// `count` unknown members with names of `nameLength` characters.
    private static func unknownMembers(_ count: Int, nameLength: Int = 10) -> String {
        (0..<count).map { "\"\(String(format: "%0\(nameLength)d", $0))\":0" }.joined(separator: ",")
    }

    /// Thousands of unknown members, one of them with a long name, and values the messages quote (a push type and
    /// an environment that are none of the allowed ones): each problem names or quotes what the producer wrote.
    @Test func manyLongProblemsGiveABoundedResultThatNamesTheFirstAndCountsTheRest() async throws {
        let long = String(repeating: "z", count: 12_000)
        let event = Array(
            ("{\"id\":\"e1\",\"topic\":\"t\",\"pushType\":\"\(long)\",\"environment\":\"\(long)\",\"payload\":{},\"\(long)\":0,"
                + Self.unknownMembers(1500) + "}").utf8)
        // The control: the event is far larger than the bound, so an uncapped message quoting its values breaks it.
        #expect(event.count > 3 * Self.maxResultBytes && event.count <= 64 * 1024, "\(event.count)")
        let (fast, explained, _) = try resultRecords(for: event)
        for value in [fast, explained] {
            #expect(value.count <= Self.maxResultBytes, "a result of \(value.count) bytes for an event of \(event.count)")
        }
        let problems = try await validateWithPython([fast, explained], schema: "delivery-result.schema.json")
        #expect(problems.isEmpty, "\(problems.map { $0.prefix(300) })")
        for value in [fast, explained] {
            let json = try #require(JSONSerialization.jsonObject(with: Data(value)) as? [String: Any])
            #expect(json["id"] as? String == "e1")
            #expect(json["outcome"] as? String == "invalid" && json["reason"] as? String == "schema_violation")
            let message = try #require(json["message"] as? String)
            #expect(message.utf8.count <= Self.maxMessageBytes)
            #expect(message.hasSuffix("…") || message.contains("… and "), "says it was cut: \(message.suffix(100))")
        }
        // The explanation names the first problems whole and counts the ones it left out.
        let json = try #require(JSONSerialization.jsonObject(with: Data(explained)) as? [String: Any])
        let message = try #require(json["message"] as? String)
        #expect(message.hasPrefix("/: required member"), "\(message.prefix(100))")
        let more = try #require(message.firstMatch(of: /… and (\d+) more$/), "\(message.suffix(100))")
        #expect((Int(more.1) ?? 0) >= 2, "\(message.suffix(100))")
    }

    @Test func aSixtyKiBIdIsCutOnACharacterBoundaryAndSaysSo() async throws {
        // "a" then two-byte characters: a cut counted in bytes would split one.
        let id = "a" + String(repeating: "é", count: 30 * 1024)
        let event = Array(("{\"id\":\"\(id)\",\"topic\":\"t\",\"pushType\":\"alert\",\"payload\":{}," + Self.unknownMembers(300, nameLength: 4) + "}").utf8)
        #expect(id.utf8.count > 60 * 1024 && event.count <= 64 * 1024, "\(id.utf8.count), \(event.count)")
        let (value, key) = try resultRecord(for: event)
        #expect(value.count <= Self.maxResultBytes, "a result of \(value.count) bytes for an event of \(event.count)")
        let problems = try await validateWithPython([value], schema: "delivery-result.schema.json")
        #expect(problems.isEmpty, "\(problems)")
        let json = try #require(JSONSerialization.jsonObject(with: Data(value)) as? [String: Any])
        let echoed = try #require(json["id"] as? String)
        #expect(echoed.unicodeScalars.count == Self.maxIDCharacters, "\(echoed.unicodeScalars.count) characters")
        #expect(echoed.hasSuffix("…"), "says it was cut: \(echoed.suffix(10))")
        let kept = echoed.dropLast()
        #expect(id.hasPrefix(kept), "the id's first \(kept.unicodeScalars.count) characters")
        // Keyed by the (cut) id: the event had no key.
        #expect(key == Array(echoed.utf8))
    }

    /// An id the schema would accept (at most 256 characters, whatever their bytes) is echoed whole even when the
    /// rest of the event is broken: the producer can still correlate.
    @Test func anIdTheSchemaAcceptsIsEchoedWhole() async throws {
        let id = String(repeating: "é", count: 256)
        let event = Array(("{\"id\":\"\(id)x\",\"topic\":\"t\",\"pushType\":\"alert\",\"payload\":{}}").utf8)
        let (value, _) = try resultRecord(for: event)
        let json = try #require(JSONSerialization.jsonObject(with: Data(value)) as? [String: Any])
        #expect((json["id"] as? String)?.hasSuffix("…") == true, "257 characters are cut")
        let exact = Array(("{\"id\":\"\(id)\",\"topic\":\"t\",\"pushType\":\"alert\",\"payload\":{},\"x\":0}").utf8)
        let whole = try #require(JSONSerialization.jsonObject(with: Data(try resultRecord(for: exact).value)) as? [String: Any])
        #expect(whole["id"] as? String == id)
    }
}
