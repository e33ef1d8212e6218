import Foundation
import Kafka
import Logging
import Relay
import RelayApp
import RelaySandbox
import ServiceLifecycle
import TestSupport
import Testing
import APNsMock

/// Inputs whose records Kafka would refuse: every event still gets its result and the partition moves on.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct RefusedRecordTests {
    let logger = Logger.quiet("refused")

    /// A 200 KB key and an 800 KB value: the dead letter used to carry both (over Kafka's 1 MB record limit),
    /// was refused with MSG_SIZE_TOO_LARGE and retried every second forever, and the partition never moved.
    @Test func anOversizedKeyStillGetsItsResultAndDeadLetterAndThePartitionMovesOn() async throws {
        var options = RelaySandbox.Options()
        options.partitions = 1
        try await withSandbox(options, logger: logger) { sandbox in
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let topics = sandbox.options.topics
            let bigKey = Array(repeating: UInt8(ascii: "k"), count: 200_000)
            let bigValue = Array(repeating: UInt8(ascii: "v"), count: 800_000)
            let records = try await withRelay(sandbox, logger: logger) { _ in
                // One at a time: the oversized record sits in front of the next one on the partition.
                try await sandbox.produce(records: [.init(key: bigKey, value: bigValue)])
                try await sandbox.produce(records: [.init(key: Array("after".utf8), value: SampleEvents.event(id: "after", deviceToken: SampleEvents.token(3)))])
                return try await reader.collect(timeout: .seconds(60)) { records in
                    records.filter { $0.topic == topics.results }.count >= 2 && records.contains { $0.topic == topics.deadLetters }
                }
            }
            await reader.close()
            let results = records.filter { $0.topic == topics.results }.compactMap(\.json)
            let refused = try #require(results.first { $0["outcome"] as? String == "invalid" }, "\(results)")
            #expect(refused["reason"] as? String == "event_too_large")
            #expect((refused["message"] as? String)?.contains("key 200000") == true, "\(refused)")
            #expect(results.contains { $0["id"] as? String == "after" && $0["outcome"] as? String == "delivered" }, "the partition moved on")
            let letter = try #require(records.first { $0.topic == topics.deadLetters })
            let source = try #require(refused["source"] as? [String: Any])
            #expect(letter.keyString == "\(sandbox.options.inputTopic)/0/\(source["offset"] as? Int ?? -1)", "the oversized key is replaced by the source position")
            #expect(letter.header("apns-relay.original.key.size") == "200000")
            #expect(letter.value == bigValue, "without the key, the original value fits whole")
            #expect(letter.header("apns-relay.truncated") == nil)
        }
    }

    /// Headers count toward the event's size: a small event with 950 KB of headers is too large, and its
    /// dead letter leaves the headers out (saying so) instead of being refused by Kafka.
    @Test func oversizedHeadersAreCountedAndLeftOutOfTheDeadLetter() async throws {
        var options = RelaySandbox.Options()
        options.partitions = 1
        try await withSandbox(options, logger: logger) { sandbox in
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let topics = sandbox.options.topics
            let headers = (0..<95).map { KafkaHeader(name: "h\($0)", value: Array(repeating: UInt8(ascii: "h"), count: 10_000)) }
            let event = SampleEvents.event(id: "heavy", deviceToken: SampleEvents.token(4))
            let records = try await withRelay(sandbox, logger: logger) { _ in
                try await sandbox.produce(records: [.init(key: Array("heavy".utf8), value: event, headers: headers)])
                try await sandbox.produce(records: [.init(key: Array("after".utf8), value: SampleEvents.event(id: "after", deviceToken: SampleEvents.token(3)))])
                return try await reader.collect(timeout: .seconds(60)) { records in
                    records.filter { $0.topic == topics.results }.count >= 2 && records.contains { $0.topic == topics.deadLetters }
                }
            }
            await reader.close()
            let results = Dictionary(records.filter { $0.topic == topics.results }.map { ($0.keyString, $0.json ?? [:]) }) { a, _ in a }
            #expect(results["heavy"]?["outcome"] as? String == "invalid", "\(results["heavy"] ?? [:])")
            #expect(results["heavy"]?["reason"] as? String == "event_too_large")
            #expect(results["after"]?["outcome"] as? String == "delivered")
            let letter = try #require(records.first { $0.topic == topics.deadLetters })
            #expect(letter.keyString == "heavy", "a small key is kept")
            #expect(letter.header("apns-relay.original.headers.dropped") == "95")
            #expect(letter.header("h0") == nil)
            #expect(letter.value == event, "the value is small enough to keep whole")
        }
    }

    /// Thousands of tiny headers are few bytes but an object or two each: the consumer copies at most 128, the
    /// event is refused as too large from what was counted, and its dead letter keeps none of them.
    @Test func tooManyHeadersAreCountedNotCopied() async throws {
        var options = RelaySandbox.Options()
        options.partitions = 1
        try await withSandbox(options, logger: logger) { sandbox in
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let topics = sandbox.options.topics
            let headers = (0..<3_000).map { KafkaHeader(name: "t", value: [UInt8(truncatingIfNeeded: $0)]) }
            let event = SampleEvents.event(id: "many", deviceToken: SampleEvents.token(5))
            let records = try await withRelay(sandbox, logger: logger) { _ in
                try await sandbox.produce(records: [.init(key: Array("many".utf8), value: event, headers: headers)])
                try await sandbox.produce(records: [.init(key: Array("after".utf8), value: SampleEvents.event(id: "after", deviceToken: SampleEvents.token(3)))])
                return try await reader.collect(timeout: .seconds(60)) { records in
                    records.filter { $0.topic == topics.results }.count >= 2 && records.contains { $0.topic == topics.deadLetters }
                }
            }
            await reader.close()
            let results = Dictionary(records.filter { $0.topic == topics.results }.map { ($0.keyString, $0.json ?? [:]) }) { a, _ in a }
            #expect(results["many"]?["outcome"] as? String == "invalid", "\(results["many"] ?? [:])")
            #expect(results["many"]?["reason"] as? String == "event_too_large")
            #expect((results["many"]?["message"] as? String)?.contains("event has 3000 headers") == true, "\(results["many"] ?? [:])")
            #expect(results["after"]?["outcome"] as? String == "delivered")
            let letter = try #require(records.first { $0.topic == topics.deadLetters })
            #expect(letter.header("apns-relay.original.headers.dropped") == "3000")
            #expect(letter.header("t") == nil)
            #expect(letter.value == event)
        }
    }

    /// A fatal producer error (the idempotent producer lost its guarantees): the relay stops taking events,
    /// fails /healthz and its run ends with an error within seconds, storing no unfinished offset; a new relay
    /// then answers every event.
    @Test func aFatalProducerErrorStopsTheRelayAndARestartLosesNothing() async throws {
        try await withSandbox(logger: logger) { sandbox in
            let count = 400
            let events = (0..<count).map { n in (key: "k\(n)", value: SampleEvents.event(id: "e\(n)", deviceToken: SampleEvents.token(n))) }
            let group = "fatal-\(UUID().uuidString.prefix(8))"
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let topics = sandbox.options.topics

            let configuration = try await sandbox.relayConfiguration(groupID: group)
            let app = try RelayApp(configuration: configuration, logger: logger)
            let services = app.serviceGroup(logger: logger)
            let running = Task { try await services.run() }
            // Hold APNs' answers so that events are in flight when the producer fails.
            sandbox.apns.faults.withholdAllReplies = true
            try await sandbox.produce(events)
            try await eventually("events are in flight", within: .seconds(60)) { app.relay.status.inFlightEvents > 0 }
            let clock = ContinuousClock()
            let failedAt = clock.now
            app.producer.injectFatalError(.outOfOrderSequenceNumber, reason: "injected by the test")
            let outcome = await withTaskGroup(of: String?.self) { race in
                race.addTask { do { try await running.value; return "ended without an error" } catch { return nil } }
                race.addTask { try? await Task.sleep(for: .seconds(20)); return "still running 20 s after the fatal error" }  // deadline
                let first = await race.next() ?? nil
                race.cancelAll()
                return first
            }
            #expect(outcome == nil, "\(outcome ?? "")")
            #expect(clock.now - failedAt < .seconds(10), "stopped \(clock.now - failedAt) after the fatal error")
            #expect(app.relay.liveness?.contains("fatal") == true, "/healthz fails: \(app.relay.liveness ?? "healthy")")
            sandbox.apns.faults.withholdAllReplies = false

            let collected = try await withRelay(sandbox, groupID: group, logger: logger) { _ in
                try await reader.collect(timeout: .seconds(120)) { records in
                    Set(records.filter { $0.topic == topics.results }.map(\.keyString)).count >= count
                }
            }
            await reader.close()
            let keys = Set(collected.filter { $0.topic == topics.results }.map(\.keyString))
            #expect(keys == Set(events.map(\.key)), "every event answered after the restart")
        }
    }
}
