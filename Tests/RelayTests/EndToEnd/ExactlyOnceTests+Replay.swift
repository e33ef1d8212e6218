import Foundation
import Kafka
import RelaySandbox
import TestSupport
import Testing

extension ExactlyOnceTests {
    /// `replay` of dead letters an exactly-once relay wrote: each of the relay's transactions ends in a commit
    /// marker on the dead-letter topic's partitions, one past the last dead letter, which no reader is given.
    /// The replay reads to where librdkafka's position passed the end, and finishes: it used to wait for the
    /// last record before the high watermark until its timeout, then report the topic unread (exit 1).
    @Test func replayReadsATransactionalDeadLetterTopicToItsEnd() async throws {
        try await onNoida { sandbox in
            let topics = sandbox.options.topics
            let badSchema = #"{"id":"b1","deviceToken":"\#(String(repeating: "ab", count: 32))","topic":"com.example.app","pushType":"alertt","payload":{"aps":{}}}"#
            try await sandbox.produce(records: [
                .init(key: Array("bad-schema".utf8), value: Array(badSchema.utf8)),
                .init(key: Array("good".utf8), value: SampleEvents.event(id: "g1", deviceToken: SampleEvents.token(1))),
            ])
            let environment = exactlyOnceEnvironment(sandbox, group: "replay-\(UUID().uuidString.prefix(8))", member: "relay-0")
            let relay = try RelayProcess(environment: environment)
            let committed = try OutputReader(sandbox: sandbox, logger: logger)
            do {
                _ = try await committed.collect(timeout: .seconds(120)) { records in
                    records.contains { $0.topic == topics.deadLetters && $0.keyString == "bad-schema" }
                        && records.filter { $0.topic == topics.results }.count >= 2
                }
            } catch {
                throw TestFailure("\(error); relay log:\n\(relay.log.suffix(3000))")
            }
            #expect(await relay.terminate(timeout: .seconds(30)) == 0)
            await committed.close()

            // The timeout is what the old read ran into; well within it, the read is done.
            let replay = try await runProcess(
                try RelayProcess.binary().path, ["replay", "--dry-run", "--timeout-seconds", "60"],
                environment: sandbox.relayEnvironment(), timeout: .seconds(120))
            let output = replay.stdout + replay.stderr
            #expect(replay.status == 0, "\(output)")
            #expect(output.contains("1 matched, 1 would be replayed"), "\(output)")
            #expect(!output.contains("stopped reading"), "\(output)")
        }
    }
}
