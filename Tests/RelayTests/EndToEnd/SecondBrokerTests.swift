import Foundation
import Kafka
import Logging
import RelaySandbox
import TestSupport
import Testing
import APNsMock

/// The relay on noida-db, a Kafka-protocol broker written by others (`NoidaBroker`): what the end-to-end
/// tests show on librdkafka's mock cluster must not depend on that one implementation's quirks. (The
/// exactly-once tests need it too: the mock neither stores transactional offsets nor fences.)
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SecondBrokerTests {
    let logger = Logger.quiet("noida")

    @Test func resultsRemovalsAndDeadLettersAreWrittenAndEveryOffsetCommittedOnASecondBroker() async throws {
        let broker = try await NoidaBroker.start()
        do {
            try await run(on: broker)
        } catch {
            let log = broker.log
            await broker.stop()
            throw TestFailure("\(error); noida-db's output:\n\(log.suffix(2000))")
        }
        await broker.stop()
    }

    /// A rolling deployment's hand-over (`GroupHandOver`) on a second coordinator, which ends a generation
    /// at once when a member joins or leaves: the first relay's partitions are *lost* (not revoked) when the
    /// second joins, so this covers the lost-partition path, and nothing may be lost on it either.
    ///
    /// Duplicates are printed, not bounded (on librdkafka's mock, `RelayProcessTests` bounds the leave's at 0;
    /// here the run does not wait for a settled group before the leave: with that wait, no result came for
    /// 120 s on noida-db, which needs a look of its own): on both test brokers they come from the broker. Apache Kafka's
    /// coordinator accepts the old generation's commits while it prepares a rebalance (it refuses them only
    /// between the JoinGroup and SyncGroup answers); librdkafka's mock refuses them with
    /// REBALANCE_IN_PROGRESS for the whole join phase, and noida-db with ILLEGAL_GENERATION. What the
    /// leaving relay finished but had not committed before the rebalance began is then done again, and how
    /// much that is depends on timing, not on any setting.
    @Test func twoRelaysHandOverTheGroupOnASecondBrokerAndNothingIsLost() async throws {
        let broker = try await NoidaBroker.start()
        do {
            var options = RelaySandbox.Options()
            options.externalBootstrapServers = broker.bootstrapServers
            options.partitions = 8
            try await withSandbox(options, logger: logger) { sandbox in
                // The first relay's heartbeat comes 10 s apart: noida-db has ended its generation (and made the
                // second relay's) by its next one, which is then refused, so the lost-partition path is taken.
                // At librdkafka's 3 s a heartbeat sometimes came while noida-db still prepared the rebalance,
                // and the partitions were revoked instead (1 run in 4, once results flowed sooner).
                let run = try await GroupHandOver.run(
                    sandbox, environment: ["APNS_RELAY_KAFKA_CONSUMER_PROPERTIES": "heartbeat.interval.ms=10000"], judgesTheLeave: false,
                    logger: logger)
                run.expectNothingLost("two relays on noida-db")
                #expect(run.logA.contains("partitions lost"), "noida-db ends the first relay's generation when the second joins; log:\n\(run.logA.suffix(3000))")
            }
        } catch {
            let log = broker.log
            await broker.stop()
            throw TestFailure("\(error); noida-db's output:\n\(log.suffix(2000))")
        }
        await broker.stop()
    }

    private func run(on broker: NoidaBroker) async throws {
        var options = RelaySandbox.Options()
        options.externalBootstrapServers = broker.bootstrapServers
        options.partitions = 3
        try await withSandbox(options, logger: logger) { sandbox in
            let topics = sandbox.options.topics
            let gone = SampleEvents.token(9_999)
            sandbox.apns.registry.unregister(gone, sinceMilliseconds: 1_700_000_000_000)
            var events = (0..<200).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
            events.append((key: "gone", value: SampleEvents.event(id: "gone", deviceToken: gone)))
            events.append((key: "not-json", value: Array("hello, kafka".utf8)))
            try await sandbox.produce(events)
            let group = "noida-\(UUID().uuidString.prefix(8))"
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let records = try await withRelay(sandbox, groupID: group, logger: logger) { _ in
                try await reader.collect(timeout: .seconds(90)) { records in
                    records.filter { $0.topic == topics.results }.count >= events.count
                        && records.contains { $0.topic == topics.removedTokens } && records.contains { $0.topic == topics.deadLetters }
                }
            }
            // The relay has stopped: read every output topic to its end, so a late duplicate is seen too.
            var all = records
            for topic in topics.outputs { all += try await reader.readToEnd(of: topic, timeout: .seconds(30)) }
            await reader.close()

            let results = all.filter { $0.topic == topics.results }
            #expect(results.count == events.count, "one result per event: \(results.count) for \(events.count)")
            #expect(Set(results.map(\.keyString)) == Set(events.map(\.key)))
            let outcomes = Dictionary(results.map { ($0.keyString, $0.json?["outcome"] as? String ?? "?") }) { a, _ in a }
            #expect(outcomes.filter { $0.value == "delivered" }.count == 200)
            #expect(outcomes["gone"] == "unregistered")
            #expect(outcomes["not-json"] == "invalid")
            #expect(all.filter { $0.topic == topics.removedTokens }.map(\.keyString) == [gone])
            let letters = all.filter { $0.topic == topics.deadLetters }
            #expect(letters.count == 1 && letters.first?.value == Array("hello, kafka".utf8), "the dead letter carries the original bytes")

            // Every offset committed: the group's committed position is each input partition's end.
            let ends = try await KafkaClusterInspection.watermarks(bootstrapServers: [sandbox.bootstrapServers], topic: sandbox.options.inputTopic, logger: logger)
            var configuration = KafkaConsumerConfiguration(bootstrapServers: [sandbox.bootstrapServers], groupID: group)
            configuration.sessionTimeout = .seconds(6)
            let inspector = try KafkaConsumer(configuration: configuration, logger: logger)
            let partitions = ends.keys.map { KafkaTopicPartition(topic: sandbox.options.inputTopic, partition: $0) }
            let committed = try await inspector.committedOffsets(for: partitions)
            try? await inspector.close(timeout: .seconds(5))
            for partition in partitions {
                #expect(committed[partition] == .some(ends[partition.partition]!.high), "\(partition): committed \(String(describing: committed[partition])), end \(ends[partition.partition]!.high)")
            }
        }
    }
}
