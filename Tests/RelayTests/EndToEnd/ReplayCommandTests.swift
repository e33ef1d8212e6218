import Foundation
import Kafka
import Logging
import RelaySandbox
import TestSupport
import Testing

/// `apns-relay replay`, run as a user runs it: events the relay dead-lettered go back to their input topic
/// with their original bytes, key and headers.
@Suite struct ReplayCommandTests {
    private let logger = Logger(label: "test.replay")

    private func replay(_ arguments: [String], _ environment: [String: String]) async throws -> (status: Int32, output: String) {
        let result = try await runProcess(try RelayProcess.binary().path, ["replay"] + arguments, environment: environment, timeout: .seconds(120))
        return (result.status, result.stdout + result.stderr)
    }

    @Test func deadLettersGoBackToTheirTopicFilteredWithADryRunFirst() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let token = String(repeating: "ab", count: 32)
            let badSchema = #"{"id":"b1","deviceToken":"\#(token)","topic":"com.example.app","pushType":"alertt","payload":{"aps":{}}}"#
            try await sandbox.produce(records: [
                .init(key: Array("broken-json".utf8), value: Array("{not json".utf8)),
                .init(key: Array("bad-schema".utf8), value: Array(badSchema.utf8), headers: [KafkaHeader(name: "trace-id", value: Array("t-42".utf8))]),
                .init(key: Array("good".utf8), value: SampleEvents.event(id: "g1", deviceToken: SampleEvents.token(1))),
            ])
            let reader = try OutputReader(sandbox: sandbox, logger: logger, alsoReading: sandbox.options.topics.input)
            let before = try await withRelay(sandbox, logger: logger) { _ in
                try await reader.collect(timeout: .seconds(60)) { records in
                    records.filter { $0.topic == sandbox.options.topics.deadLetters }.count >= 2
                        && records.filter { $0.topic == sandbox.options.topics.results }.count >= 3
                }
            }
            let environment = sandbox.relayEnvironment()

            let dry = try await replay(["--dry-run"], environment)
            #expect(dry.status == 0, "\(dry.output)")
            #expect(dry.output.contains("2 matched, 2 would be replayed, 0 not replayable"), "\(dry.output)")
            #expect(dry.output.contains("schema/invalid_json: 1") && dry.output.contains("schema/schema_violation: 1"), "\(dry.output)")

            let real = try await replay(["--reason", "schema_violation", "--yes"], environment)
            #expect(real.status == 0, "\(real.output)")
            #expect(real.output.contains("1 matched, 1 replayed"), "\(real.output)")

            // The input topic now holds the schema-violating event twice: as produced, and replayed as it was.
            let input = try await before + reader.collect(timeout: .seconds(30)) { records in
                (before + records).filter { $0.topic == sandbox.options.topics.input[0] && $0.key == Array("bad-schema".utf8) }.count >= 2
            }
            let copies = input.filter { $0.topic == sandbox.options.topics.input[0] && $0.key == Array("bad-schema".utf8) }
            #expect(copies.count == 2)
            #expect(copies.allSatisfy { $0.value == Array(badSchema.utf8) }, "the original bytes")
            let replayed = try #require(copies.last)
            #expect(replayed.headers.map(\.name) == ["trace-id"], "original headers only: \(replayed.headers.map(\.name))")
            #expect(input.filter { $0.topic == sandbox.options.topics.input[0] && $0.key == Array("broken-json".utf8) }.count == 1, "filtered out")
            await reader.close()
        }
    }

    /// The attack this command once allowed: a producer sends an invalid event whose value is a removed-token
    /// record for someone else's token and whose own headers pose as the dead-letter headers, naming the
    /// removed-tokens topic. The relay keeps the producer's headers under `__original.` in the dead letter, so
    /// its one block of `__connect.errors.*` headers names the real input topic, and the replay writes the event
    /// back there; nothing reaches the removed-tokens topic, which token-cleanup jobs act on.
    @Test func forgedDeadLetterHeadersCannotRedirectAReplay() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let topics = sandbox.options.topics
            let victim = SampleEvents.token(7)
            let forged = #"{"id":"evt-victim","deviceToken":"\#(victim)","topic":"com.example.app","environment":"production","reason":"Unregistered","invalidatedAt":1700000000000}"#
            func header(_ name: String, _ value: String) -> KafkaHeader { KafkaHeader(name: name, value: Array(value.utf8)) }
            let posing = [
                header("__connect.errors.topic", topics.removedTokens), header("__connect.errors.partition", "0"),
                header("__connect.errors.offset", "0"), header("__connect.errors.stage", "schema"),
                header("__connect.errors.exception.class.name", "schema_violation"),
                header("apns-relay.note", "forged"), header("trace-id", "t-7"),
            ]
            try await sandbox.produce(records: [.init(key: Array("forged".utf8), value: Array(forged.utf8), headers: posing)])
            let reader = try OutputReader(sandbox: sandbox, logger: logger, alsoReading: topics.input)
            var seen = try await withRelay(sandbox, logger: logger) { _ in
                try await reader.collect(timeout: .seconds(60)) { records in
                    records.contains { $0.topic == topics.deadLetters && $0.keyString == "forged" }
                }
            }
            let letter = try #require(seen.first { $0.topic == topics.deadLetters && $0.keyString == "forged" })
            let names = letter.headers.map(\.name)
            #expect(letter.header("__original.__connect.errors.topic") == topics.removedTokens, "kept for forensics: \(names)")
            #expect(letter.header("__original.apns-relay.note") == "forged", "\(names)")
            #expect(letter.header("trace-id") == "t-7", "an ordinary header is copied as it was")
            for name in ["__connect.errors.topic", "__connect.errors.partition", "__connect.errors.offset", "__connect.errors.stage",
                         "__connect.errors.exception.class.name", "__connect.errors.exception.message"] {
                #expect(names.filter { $0 == name }.count == 1, "exactly one relay block: \(name) in \(names)")
            }
            #expect(!names.contains("apns-relay.note"), "\(names)")
            #expect(letter.header("__connect.errors.topic") == topics.input[0])

            let replayed = try await replay(["--reason", "schema_violation", "--yes"], sandbox.relayEnvironment())
            #expect(replayed.status == 0, "\(replayed.output)")
            #expect(replayed.output.contains("1 matched, 1 replayed"), "\(replayed.output)")

            seen += try await reader.readToEnd(of: topics.removedTokens, timeout: .seconds(30))
            let reached = seen.filter { $0.topic == topics.removedTokens }.map { String(decoding: $0.value, as: UTF8.self) }
            #expect(reached.isEmpty, "the forged record reached \(topics.removedTokens): \(reached)")
            seen += try await reader.collect(timeout: .seconds(30)) { records in
                (seen + records).filter { $0.topic == topics.input[0] && $0.keyString == "forged" }.count >= 2
            }
            let copies = seen.filter { $0.topic == topics.input[0] && $0.keyString == "forged" }
            #expect(copies.count == 2, "produced once, replayed once")
            let back = try #require(copies.max { $0.offset < $1.offset })
            #expect(back.value == Array(forged.utf8), "the original bytes")
            #expect(back.headers.map(\.name) == ["trace-id"], "the producer's headers, less those posing as the relay's: \(back.headers.map(\.name))")
            await reader.close()
        }
    }

    /// A dead letter as the relay writes one, produced straight to the dead-letter topic: the event's own
    /// `headers` first, then the relay's block naming `origin`.
    private func deadLetter(
        key: String, value: String = #"{"id":"x"}"#, origin: String, code: String = "schema_violation", headers: [KafkaHeader] = []
    ) -> RelaySandbox.InputRecord {
        func header(_ name: String, _ value: String) -> KafkaHeader { KafkaHeader(name: name, value: Array(value.utf8)) }
        let block = [
            header("__connect.errors.topic", origin), header("__connect.errors.partition", "0"), header("__connect.errors.offset", "0"),
            header("__connect.errors.stage", "schema"), header("__connect.errors.exception.class.name", code),
            header("__connect.errors.exception.message", "refused"),
        ]
        return .init(key: Array(key.utf8), value: Array(value.utf8), headers: headers + block)
    }

    /// Without `--yes`, and with no terminal to ask (the test reads the command's standard error through a
    /// pipe), the plan is printed with its counts and nothing is written; the same command with `--yes` writes.
    @Test func withoutYesThePlanIsPrintedAndNothingWritten() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let topics = sandbox.options.topics
            try await sandbox.produce(records: [
                deadLetter(key: "a", origin: topics.input[0]), deadLetter(key: "b", origin: topics.input[0]),
                deadLetter(key: "c", origin: topics.input[0], code: "invalid_json"),
            ], to: topics.deadLetters)
            let reader = try OutputReader(sandbox: sandbox, logger: logger, alsoReading: topics.input)
            let environment = sandbox.relayEnvironment()

            let plan = try await replay(["--reason", "schema_violation"], environment)
            #expect(plan.status == 0, "\(plan.output)")
            #expect(plan.output.contains("cluster: \(sandbox.bootstrapServers)"), "\(plan.output)")
            #expect(plan.output.contains("source: \(topics.deadLetters) (kafka.topics.deadLetters), 3 dead letter(s)"), "\(plan.output)")
            #expect(plan.output.contains("filters: --reason schema_violation"), "\(plan.output)")
            #expect(plan.output.contains("  \(topics.input[0]): 2 dead letter(s)"), "\(plan.output)")
            #expect(plan.output.contains("2 matched, 2 would be replayed, 0 not replayable (cut to fit), 0 refused"), "\(plan.output)")
            #expect(plan.output.contains("nothing written; add --yes"), "\(plan.output)")
            let unwritten = try await reader.readToEnd(of: topics.input[0], timeout: .seconds(30))
            #expect(!unwritten.contains { $0.topic == topics.input[0] }, "written without --yes: \(unwritten.map(\.keyString))")

            let written = try await replay(["--reason", "schema_violation", "--yes"], environment)
            #expect(written.status == 0, "\(written.output)")
            #expect(written.output.contains("2 matched, 2 replayed"), "\(written.output)")
            let input = try await reader.readToEnd(of: topics.input[0], timeout: .seconds(30)).filter { $0.topic == topics.input[0] }
            #expect(input.map(\.keyString).sorted() == ["a", "b"])
            await reader.close()
        }
    }

    /// `--to-topic` may name an input topic (bulk or urgent) and nothing else: an output topic is refused before
    /// anything is read, naming it and the topics allowed.
    @Test func aToTopicThatIsNotAnInputTopicIsRefused() async throws {
        var options = RelaySandbox.Options()
        options.topics.urgent = ["apns-urgent"]
        try await withSandbox(options, logger: logger) { sandbox in
            let topics = sandbox.options.topics
            try await sandbox.produce(records: [deadLetter(key: "a", origin: topics.input[0])], to: topics.deadLetters)
            let reader = try OutputReader(sandbox: sandbox, logger: logger, alsoReading: topics.inputs)
            let environment = sandbox.relayEnvironment()

            let refused = try await replay(["--to-topic", topics.removedTokens, "--yes"], environment)
            #expect(refused.status == 64, "wrong usage: \(refused.output)")
            #expect(refused.output.contains("--to-topic \(topics.removedTokens) is not an input topic of this relay"), "\(refused.output)")
            #expect(refused.output.contains("kafka.topics.input and kafka.topics.urgent: \(topics.input[0]), apns-urgent"), "\(refused.output)")
            let removed = try await reader.readToEnd(of: topics.removedTokens, timeout: .seconds(30))
            #expect(!removed.contains { $0.topic == topics.removedTokens })

            let urgent = try await replay(["--to-topic", "apns-urgent", "--yes"], environment)
            #expect(urgent.status == 0, "\(urgent.output)")
            #expect(urgent.output.contains("1 matched, 1 replayed"), "\(urgent.output)")
            let written = try await reader.readToEnd(of: "apns-urgent", timeout: .seconds(30))
            #expect(written.filter { $0.topic == "apns-urgent" }.map(\.keyString) == ["a"])
            await reader.close()
        }
    }

    /// Dead letters written before original headers were renamed: one whose relay names repeat (the producer's
    /// copy first) cannot be attributed and is refused, saying why; one whose single block names a topic the
    /// relay does not read is refused, naming it; the others are replayed.
    @Test func untrustworthyDeadLettersAreRefusedAndTheOthersReplayed() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let topics = sandbox.options.topics
            let posing = [KafkaHeader(name: "__connect.errors.topic", value: Array(topics.removedTokens.utf8))]
            try await sandbox.produce(records: [
                deadLetter(key: "forged", origin: topics.input[0], headers: posing),
                deadLetter(key: "elsewhere", origin: topics.results),
                deadLetter(key: "good", origin: topics.input[0], headers: [KafkaHeader(name: "trace-id", value: Array("t-1".utf8))]),
            ], to: topics.deadLetters)
            let reader = try OutputReader(sandbox: sandbox, logger: logger, alsoReading: topics.input)

            let result = try await replay(["--yes"], sandbox.relayEnvironment())
            #expect(result.status == 0, "\(result.output)")
            #expect(result.output.contains("3 matched, 1 replayed, 0 not replayable (cut to fit), 2 refused"), "\(result.output)")
            #expect(result.output.contains("more than one __connect.errors.topic header"), "\(result.output)")
            #expect(result.output.contains("\(topics.results) is not an input topic of this relay (kafka.topics.input and kafka.topics.urgent: \(topics.input[0]);"), "\(result.output)")

            var seen = try await reader.readToEnd(of: topics.removedTokens, timeout: .seconds(30))
            seen += try await reader.readToEnd(of: topics.results, timeout: .seconds(30))
            seen += try await reader.readToEnd(of: topics.input[0], timeout: .seconds(30))
            #expect(!seen.contains { $0.topic == topics.removedTokens || $0.topic == topics.results }, "\(seen.map(\.topic))")
            let input = seen.filter { $0.topic == topics.input[0] }
            #expect(input.map(\.keyString) == ["good"])
            #expect(input.first?.headers.map(\.name) == ["trace-id"])
            await reader.close()
        }
    }

    @Test func aBadTimeFilterIsAUsageError() async throws {
        let result = try await replay(["--since", "yesterday"], ["APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"])
        #expect(result.status != 0)
        #expect(result.output.contains("--since wants UNIX milliseconds or an ISO 8601 date-time"), "\(result.output)")
    }

    /// A stage no dead letter has (here the Swift spelling of `apns-rules`) would match nothing: a usage error
    /// that names the stages there are, before Kafka is asked for anything.
    @Test func anUnknownStageIsAUsageErrorNamingTheStages() async throws {
        let result = try await replay(["--stage", "apnsRules"], ["APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"])
        #expect(result.status == 64, "wrong usage")
        #expect(result.output.contains("--stage wants one of size, schema, apns-rules, got 'apnsRules'"), "\(result.output)")
    }
}
