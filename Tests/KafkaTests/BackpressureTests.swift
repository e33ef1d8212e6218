import Kafka
import KafkaMock
import TestSupport
import Testing

@Suite("Backpressure keeps the member in the group")
struct BackpressureTests {
    /// Settings where a member that stops polling is evicted after 3 s.
    private func shortPollIntervalConfiguration(_ cluster: MockKafkaCluster, group: String) -> KafkaConsumerConfiguration {
        var configuration = testConsumerConfiguration(cluster, group: group)
        configuration.sessionTimeout = .seconds(3)
        configuration.maxPollInterval = .seconds(3)
        return configuration
    }

    @Test(.timeLimit(.minutes(1)))
    func aConsumerHoldingItsLanesIsNotEvictedAndReleaseDeliversWhatWaited() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        let topic = "paused"
        try cluster.createTopic(topic, partitions: 2)
        let producer = try testProducer(cluster)
        try await produceKeyed(producer, topic: topic, count: 20, keyPrefix: "before")

        let maxPollExceeded = TestSignal()
        var configuration = shortPollIntervalConfiguration(cluster, group: uniqueGroupID())
        configuration.errorHandler = { error in
            if error.responseCode == .maxPollExceeded { maxPollExceeded.raise() }
        }
        let consumer = try KafkaConsumer(configuration: configuration, logger: testLogger("test.consumer"))
        try consumer.subscribe(topics: [topic])
        try consumer.start()
        var iterator = consumer.events.makeAsyncIterator()
        var before = 0
        while before < 20 {
            if case .message(let message) = try await nextEvent(&iterator, within: .seconds(20), expecting: "the first 20 records") {
                before += 1
                try consumer.storeOffset(for: message)
            }
        }

        let assignment = try consumer.assignment()
        #expect(assignment.count == 2)
        // The relay's backpressure: both lanes held, the poll thread keeps serving the group.
        consumer.hold(.urgent)
        consumer.hold(.bulk)
        try await produceKeyed(producer, topic: topic, count: 20, keyPrefix: "while-held")

        // Nothing may happen for twice max.poll.interval.ms: no record (held), no revocation or loss.
        do {
            let event = try await iterator.next(within: .seconds(6))
            Issue.record("a consumer holding its lanes produced an event: \(String(describing: event))")
        } catch let error as KafkaError where error.code == .timedOut {
            // Expected: silence.
        }
        #expect(!maxPollExceeded.isRaised, "librdkafka reported max.poll.interval.ms exceeded")
        #expect(try consumer.assignment() == assignment, "still a member with the same partitions")

        consumer.release(.bulk)
        consumer.release(.urgent)
        var afterRelease: Set<String> = []
        while afterRelease.count < 20 {
            switch try await nextEvent(&iterator, within: .seconds(10), expecting: "the records produced while held") {
            case .message(let message):
                afterRelease.insert(message.keyString ?? "")
            case let other:
                Issue.record("unexpected \(other) after the release (a rejoin means the member was evicted)")
            }
        }
        #expect(afterRelease == Set((0..<20).map { "while-held-\($0)" }))
        try await consumer.close()
        try await producer.close()
    }

    /// An application that stops reading: the buffer fills, the poll thread leaves the rest in librdkafka
    /// and keeps serving the group, and everything arrives once the application reads again.
    @Test(.timeLimit(.minutes(1)))
    func fullBufferLeavesRecordsInLibrdkafkaAndKeepsMembership() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        let topic = "buffered"
        try cluster.createTopic(topic, partitions: 3)
        let producer = try testProducer(cluster)
        try await produceKeyed(producer, topic: topic, count: 300)
        try await producer.close()

        let maxPollExceeded = TestSignal()
        var configuration = shortPollIntervalConfiguration(cluster, group: uniqueGroupID())
        configuration.bufferCapacity = 50
        configuration.errorHandler = { error in
            if error.responseCode == .maxPollExceeded { maxPollExceeded.raise() }
        }
        let consumer = try KafkaConsumer(configuration: configuration, logger: testLogger("test.consumer"))
        try consumer.subscribe(topics: [topic])
        try consumer.start()
        var iterator = consumer.events.makeAsyncIterator()
        guard case .partitionsAssigned(let assigned) = try await nextEvent(&iterator, within: .seconds(20), expecting: "an assignment") else {
            Issue.record("first event was not an assignment")
            return
        }
        #expect(assigned.count == 3)

        // Don't read for twice max.poll.interval.ms.
        #expect(await !maxPollExceeded.wait(within: .seconds(6)), "member was evicted while the app did not read")

        var keys: Set<String> = []
        while keys.count < 300 {
            switch try await nextEvent(&iterator, within: .seconds(10), expecting: "record \(keys.count + 1) of 300") {
            case .message(let message): keys.insert(message.keyString ?? "")
            case let other: Issue.record("unexpected \(other): the member should have kept its partitions")
            }
        }
        try await consumer.close()
    }
}
