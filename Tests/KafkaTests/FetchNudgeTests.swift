import Foundation
@testable import Kafka
import KafkaMock
import TestSupport
import Testing

/// When the poll thread asks for a fetch nudge (`FetchQueueWatch`), without I/O.
@Suite("Fetch queue watch")
struct FetchQueueWatchTests {
    /// Whether each step — (records taken, their bytes, records left) — asked for a nudge.
    private func nudges(_ watch: inout FetchQueueWatch, _ steps: [(taken: Int, bytes: Int, left: Int)]) -> [Bool] {
        steps.map { watch.took($0.taken, bytes: $0.bytes, leaving: $0.left) }
    }

    @Test func aQueueThatFilledIsNudgedOnceWhenDrainedToAQuarter() {
        var watch = FetchQueueWatch(maxRecords: 100, maxBytes: 1 << 30)
        let asked = nudges(&watch, [
            (10, 1000, 90),  // full: librdkafka may have stopped fetching
            (40, 4000, 50), (24, 2400, 26),  // not yet a quarter
            (1, 100, 25),  // drained to a quarter
            (25, 2500, 0), (0, 0, 0),  // once per fill
            (10, 1000, 60), (40, 4000, 20),  // filled again, drained again
            (100, 10_000, 0),  // a full queue emptied by one take
        ])
        #expect(asked == [false, false, false, true, false, false, false, true, true])
    }

    @Test func aQueueThatNeverFillsIsNeverNudged() {
        var watch = FetchQueueWatch(maxRecords: 100, maxBytes: 1 << 30)
        let asked = nudges(&watch, Array(repeating: (5, 500, 10), count: 100) + Array(repeating: (0, 0, 0), count: 100)
            + Array(repeating: (30, 3000, 0), count: 100))
        #expect(!asked.contains(true))
    }

    @Test func theByteLimitBindsWhenRecordsAreLarge() {
        // 10 kB records in 100 kB: librdkafka stops at about 10 records, not at queued.min.messages.
        var watch = FetchQueueWatch(maxRecords: 10_000, maxBytes: 100_000)
        let asked = nudges(&watch, [(1, 10_000, 9), (7, 70_000, 2)])
        #expect(watch.capacity == 10)
        #expect(asked == [false, true])
    }
}

/// librdkafka 2.0 stops fetching into a full queue and looks again only when its broker thread wakes, at
/// the latest a second later; the consumer wakes it once the application drained the queue
/// (`FetchNudger`). Through the mock cluster, 10 kB records: a fetch brings more than the queue may hold
/// (200 kB), so the fetcher stops after each fetch, and the application drains the queue at once. The same
/// backlog is read twice, without the nudge and with it.
@Suite("Fetch nudge against the mock cluster")
struct FetchNudgeTests {
    @Test(.timeLimit(.minutes(2)))
    func aDrainedQueueIsRefilledWithoutWaitingForLibrdkafkasTimer() async throws {
        let cluster = try MockKafkaCluster(brokers: 2, logger: testLogger("test.mock"))
        try cluster.createTopic("backlog", partitions: 8)
        let producer = try testProducer(cluster)
        let count = 2_400
        let value = [UInt8](repeating: UInt8(ascii: "v"), count: 10_000)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask { _ = try await producer.send(topic: "backlog", key: Array("key-\(index)".utf8), value: value) }
            }
            try await group.waitForAll()
        }

        let without = try await read(count, from: cluster, wakingTheFetcher: false)
        #expect(without.nudges == 0)
        #expect(without.timerWaits.count >= 3, "the premise: without the nudge, refills wait for the timer: \(without.timerWaits)")
        let with = try await read(count, from: cluster, wakingTheFetcher: true)
        if KafkaLibrary.hasFetchQueueBackoff {
            // librdkafka 2.3+ postpones a full queue's fetch by fetch.queue.backoff.ms, set low instead of nudging.
            #expect(with.nudges == 0, "fetch.queue.backoff.ms refills the queue; nudges: \(with.nudges)")
        } else {
            #expect(with.nudges >= 4, "the queue filled and was drained several times; nudges: \(with.nudges)")
        }
        // A busy host may stall a thread now and then: one long gap is allowed, not one per refill.
        #expect(with.timerWaits.count <= 1, "gaps of 0.7 s or more between records: \(with.timerWaits)")
    }

    /// Reads the topic's `count` records in a group of its own, checking their order per partition.
    /// - Returns: the gaps of 0.7 s or more between records (librdkafka's timer is a second), and the nudges.
    private func read(_ count: Int, from cluster: MockKafkaCluster, wakingTheFetcher: Bool) async throws -> (timerWaits: [Duration], nudges: Int) {
        var configuration = testConsumerConfiguration(cluster, group: uniqueGroupID() + "-\(wakingTheFetcher)")
        configuration.wakesFetcher = wakingTheFetcher
        configuration.additionalProperties["queued.max.messages.kbytes"] = "200"
        configuration.additionalProperties["max.partition.fetch.bytes"] = "100000"
        // As the relay sets it: a fetch for partitions already read to their end waits this long on the broker,
        // and librdkafka sends the next fetch to that broker only after it.
        configuration.additionalProperties["fetch.wait.max.ms"] = "100"
        let consumer = try KafkaConsumer(configuration: configuration, logger: testLogger("test.consumer"))
        try consumer.subscribe(topics: ["backlog"])
        try consumer.start()
        var iterator = consumer.events.makeAsyncIterator()
        var next: [Int32: Int64] = [:]
        var received = 0
        var last: ContinuousClock.Instant?
        var timerWaits: [Duration] = []
        while received < count {
            guard case .message(let message) = try await nextEvent(&iterator, within: .seconds(20), expecting: "the backlog") else { continue }
            if let expected = next[message.partition] { #expect(message.offset == expected, "in order per partition, none lost or repeated") }
            next[message.partition] = message.offset + 1
            received += 1
            let now = ContinuousClock.now
            if let last, now - last >= .milliseconds(700) { timerWaits.append(now - last) }
            last = now
        }
        let nudges = consumer.shared.nudger.sent.load(ordering: .relaxed)
        try await consumer.close()
        return (timerWaits, nudges)
    }
}
