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

            let real = try await replay(["--reason", "schema_violation"], environment)
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
