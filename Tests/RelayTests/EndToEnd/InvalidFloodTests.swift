import APNsMock
import Foundation
import Logging
import RelaySandbox
import ServiceSupport
import TestSupport
import Testing

/// No producer can stall a lane for the others: a flood of schema-invalid events on one input topic, each as
/// costly to explain as a producer can make it, leaves the valid events of another input topic flowing.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct InvalidFloodTests {
    let logger = Logger.quiet("invalid-flood")
    static let floodTopic = "apns-flood"
    static let validTopic = "apns-valid"

    /// A schema-invalid event built to be slow to explain: strings far over their `maxLength` that fail their
    /// patterns too (a device token of thousands of non-hex characters, a topic of characters the pattern
    /// refuses, a long id), a push type the schema does not allow, and a payload nested 60 levels deep (within
    /// the limit of 64). Every tenth is near the 64 KiB limit, the rest just under the detailed pass's 16 KiB.
    static func floodEvent(_ n: Int) -> [UInt8] {
        let large = n % 10 == 0
        let token = String(repeating: "z", count: large ? 40_001 : 9_001)
        let topic = String(repeating: "!", count: large ? 12_000 : 3_000)
        let id = "flood-\(n)-" + String(repeating: "i", count: large ? 6_000 : 1_500)
        let nested = String(repeating: "[", count: 60) + String(repeating: "]", count: 60)
        return Array(
            #"{"id":"\#(id)","deviceToken":"\#(token)","topic":"\#(topic)","pushType":"Alert","collapseId":"\#(String(repeating: "c", count: 500))","payload":{"aps":{},"n":\#(nested)},"metadata":{"n":\#(n)}}"#
                .utf8)
    }

    /// The 99th percentile of `latencies` (nearest rank).
    static func p99(_ latencies: [Int64]) -> Int64 {
        let sorted = latencies.sorted()
        return sorted[max(0, Int((Double(sorted.count) * 0.99).rounded(.up)) - 1)]
    }

    @Test func aFloodOfCostlyInvalidEventsOnOneTopicLeavesAnotherTopicsValidEventsFlowing() async throws {
        var options = RelaySandbox.Options()
        options.topics.input = [Self.floodTopic, Self.validTopic]
        options.partitions = 2
        try await withSandbox(options, logger: logger) { sandbox in
            let topics = sandbox.options.topics
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            let floodCount = 1_500
            let validCount = 200
            func valid(_ prefix: String) -> [(key: String, value: [UInt8])] {
                (0..<validCount).map { n in
                    (key: "\(prefix)\(n)", value: SampleEvents.event(id: "\(prefix)\(n)", deviceToken: SampleEvents.token(n), topic: "com.example.b"))
                }
            }
            let quiet = valid("quiet")
            let busy = valid("busy")
            let flood = (0..<floodCount).map { n in (key: "flood\(n)", value: Self.floodEvent(n)) }
            // An in-flight budget well under the flood: events waiting for their explanation hold it, so a slow
            // explanation would keep the valid topic's events out of the relay.
            let overrides = ["relay.maxInFlightEvents": "300", "kafka.consumerProperties": "fetch.wait.max.ms=10"]
            let produced = BlockingMutex<[String: Int64]>([:])
            let produce: @Sendable ([(key: String, value: [UInt8])], String) async throws -> Void = { events, topic in
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                produced.withLock { for event in events { $0[event.key] = now } }
                try await sandbox.produce(events, to: topic)
            }
            let records = try await withRelay(sandbox, overrides: overrides, logger: logger) { _ in
                // Joined, connected and answering before anything is timed.
                try await produce(valid("warm"), Self.validTopic)
                _ = try await reader.results(count: validCount, timeout: .seconds(60))
                // Without the flood.
                try await produce(quiet, Self.validTopic)
                var records = try await reader.results(count: validCount, timeout: .seconds(60))
                // With it: the flood goes in chunks while the valid events are produced after its first chunk.
                let flooding = Task {
                    for chunk in stride(from: 0, to: floodCount, by: 100) {
                        try await produce(Array(flood[chunk..<min(chunk + 100, floodCount)]), Self.floodTopic)
                    }
                }
                try await eventually("the flood reaches the relay", within: .seconds(60)) {
                    produced.withLock { $0["flood99"] != nil }
                }
                try await produce(busy, Self.validTopic)
                try await flooding.value
                records += try await reader.collect(timeout: .seconds(150)) { more in
                    more.filter { $0.topic == topics.results }.count >= floodCount + validCount
                        && more.filter { $0.topic == topics.deadLetters }.count >= floodCount
                }
                return records
            }
            await reader.close()

            var results: [String: [[String: any Sendable]]] = [:]
            for record in records where record.topic == topics.results {
                results[record.keyString, default: []].append(record.json ?? [:])
            }
            let letters = records.filter { $0.topic == topics.deadLetters }.map(\.keyString)
            // Every event answered: once (librdkafka 2.0.2 may redeliver, so a repeat must agree), and every
            // flood event dead-lettered.
            for (key, _) in flood {
                let answers = results[key] ?? []
                #expect(!answers.isEmpty && answers.allSatisfy { $0["outcome"] as? String == "invalid" }, "\(key): \(answers.map { $0["reason"] ?? "" })")
            }
            #expect(Set(letters) == Set(flood.map(\.key)), "every flood event has its dead letter (\(Set(letters).count) of \(floodCount))")
            for (key, _) in quiet + busy {
                let answers = results[key] ?? []
                #expect(!answers.isEmpty && answers.allSatisfy { $0["outcome"] as? String == "delivered" }, "\(key): \(answers)")
            }
            func completed(_ key: String) -> Int64? { (results[key]?.first?["completedAt"] as? NSNumber)?.int64Value }
            func latencies(_ events: [(key: String, value: [UInt8])]) -> [Int64] {
                events.compactMap { event in completed(event.key).flatMap { done in produced.withLock { $0[event.key] }.map { done - $0 } } }
            }
            let quietP99 = Self.p99(latencies(quiet))
            let busyP99 = Self.p99(latencies(busy))
            let floodDone = flood.compactMap { completed($0.key) }
            let busyDone = busy.compactMap { completed($0.key) }
            try #require(floodDone.count == floodCount && busyDone.count == validCount, "every event has its result's times")
            let explained = flood.filter { results[$0.key]?.first?["id"] != nil }.count
            print(
                "invalid flood: the valid topic's p99 produce → result was \(quietP99) ms without the flood and \(busyP99) ms with "
                    + "\(floodCount) costly invalid events on the other topic; of those, \(explained) were echoed and explained off the loop, "
                    + "\(floodCount - explained) answered at once past the explanation backlog")
            // The valid topic was answered while the flood was still being processed.
            #expect(busyDone.max()! < floodDone.max()!, "the valid topic's last result came after the flood's last")
        }
    }
}
