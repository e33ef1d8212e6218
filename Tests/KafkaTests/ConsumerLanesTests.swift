import Foundation
@testable import Kafka
import ServiceSupport
import KafkaMock
import TestSupport
import Testing

/// The urgent lane, without I/O: the order the application sees, holds, and messages put back.
@Suite("Consumer lanes, without I/O")
struct ConsumerLaneStateTests {
    private let bulk = KafkaTopicPartition(topic: "bulk", partition: 0)
    private let urgent = KafkaTopicPartition(topic: "urgent", partition: 0)

    private func message(_ partition: KafkaTopicPartition, _ offset: Int64, _ lane: KafkaConsumerLane) -> KafkaConsumerMessage {
        KafkaConsumerMessage(topic: partition.topic, partition: partition.partition, offset: offset, key: nil, value: nil, lane: lane)
    }

    private func next(_ machine: inout KafkaConsumerStateMachine) -> String? {
        if case .event(.message(let message), _) = machine.next() { return "\(message.topic)@\(message.offset)" }
        return nil
    }

    private func assigned() -> KafkaConsumerStateMachine {
        var machine = KafkaConsumerStateMachine(capacity: 4)
        _ = machine.partitionsAssigned([bulk, urgent])
        _ = machine.next()
        return machine
    }

    @Test func urgentMessagesComeBeforeBulkOnesBufferedEarlier() {
        var machine = assigned()
        _ = machine.received([message(bulk, 0, .bulk), message(bulk, 1, .bulk)])
        _ = machine.received([message(urgent, 0, .urgent)])
        #expect(next(&machine) == "urgent@0")
        #expect(next(&machine) == "bulk@0")
        #expect(next(&machine) == "bulk@1")
        #expect(next(&machine) == nil)
    }

    @Test func eachLaneHasItsOwnRoom() {
        var machine = assigned()
        _ = machine.received((0..<4).map { message(bulk, Int64($0), .bulk) })
        let bulkRoom = machine.hasRoom(.bulk)
        let urgentRoom = machine.hasRoom(.urgent)
        #expect(!bulkRoom, "bulk is full")
        #expect(urgentRoom, "a full bulk buffer leaves urgent records flowing")
    }

    @Test func aHeldLaneIsSkippedAndReleasedInOrder() {
        var machine = assigned()
        _ = machine.setHeld(.bulk, true)
        _ = machine.received([message(bulk, 0, .bulk), message(urgent, 0, .urgent), message(bulk, 1, .bulk)])
        #expect(next(&machine) == "urgent@0")
        #expect(next(&machine) == nil, "bulk is held")
        _ = machine.setHeld(.bulk, false)
        #expect(next(&machine) == "bulk@0")
        #expect(next(&machine) == "bulk@1")
    }

    @Test func releasingALaneHandsAParkedIteratorItsFirstMessage() async {
        var machine = assigned()
        _ = machine.setHeld(.bulk, true)
        _ = machine.received([message(bulk, 7, .bulk)])
        let outcome = await DeadlineWaiter<KafkaConsumerStateMachine.WaitOutcome>.wait(
            timeout: .seconds(10), timedOut: .timedOut, cancelled: .finished
        ) { waiter in
            _ = machine.wait(waiter)
            _ = machine.setHeld(.bulk, false)
        }
        guard case .event(.message(let message)) = outcome else {
            Issue.record("expected bulk@7, got \(outcome)")
            return
        }
        #expect(message.offset == 7)
    }

    @Test func messagesPutBackComeOutFirstInTheirOrder() {
        var machine = assigned()
        _ = machine.received([message(bulk, 0, .bulk), message(bulk, 1, .bulk), message(bulk, 2, .bulk)])
        let taken = [machine.next(), machine.next()].compactMap { next -> KafkaConsumerMessage? in
            if case .event(.message(let message), _) = next { return message }
            return nil
        }
        _ = machine.putBack(taken)
        #expect(next(&machine) == "bulk@0")
        #expect(next(&machine) == "bulk@1")
        #expect(next(&machine) == "bulk@2")
    }

    /// Lost and assigned again between the take and the put-back: the new assignment fetches from the
    /// committed offset, so a message of the old one put back in front would be processed ahead of earlier
    /// offsets, and its frontier would step over them (found in review).
    @Test func messagesPutBackFromAnEarlierAssignmentAreDropped() {
        var machine = assigned()
        _ = machine.received([message(bulk, 500, .bulk)])
        guard case .event(.message(let taken), _) = machine.next() else { Issue.record("no message"); return }
        _ = machine.partitionsRemoved([bulk], event: .partitionsLost([bulk]))
        _ = machine.partitionsAssigned([bulk])
        let action = machine.putBack([taken])
        #expect(action.droppedMessages == 1)
        _ = machine.next()  // the loss
        _ = machine.next()  // the assignment
        #expect(next(&machine) == nil, "nothing of the earlier assignment comes out")
    }

    /// A parked iterator gets the first message of a lane that is not held, even when a held lane's message
    /// came before it in the batch (found in review: it stayed parked).
    @Test func aParkedIteratorGetsTheFirstMessageOfALaneNotHeld() async {
        var machine = assigned()
        _ = machine.setHeld(.bulk, true)
        let outcome = await DeadlineWaiter<KafkaConsumerStateMachine.WaitOutcome>.wait(
            timeout: .seconds(10), timedOut: .timedOut, cancelled: .finished
        ) { waiter in
            _ = machine.wait(waiter)
            _ = machine.received([message(bulk, 0, .bulk), message(urgent, 0, .urgent), message(urgent, 1, .urgent)])
        }
        guard case .event(.message(let handed)) = outcome else {
            Issue.record("the parked iterator was not woken: \(outcome)")
            return
        }
        #expect(handed.topic == "urgent" && handed.offset == 0)
        #expect(next(&machine) == "urgent@1")
        #expect(next(&machine) == nil, "bulk is held")
        _ = machine.setHeld(.bulk, false)
        #expect(next(&machine) == "bulk@0")
    }

    @Test func messagesPutBackForAPartitionNoLongerAssignedAreDropped() {
        var machine = assigned()
        _ = machine.received([message(bulk, 0, .bulk)])
        guard case .event(.message(let taken), _) = machine.next() else { Issue.record("no message"); return }
        _ = machine.partitionsRemoved([bulk], event: .partitionsLost([bulk]))
        let action = machine.putBack([taken])
        #expect(action.droppedMessages == 1)
        _ = machine.next()  // the loss
        #expect(next(&machine) == nil)
    }
}

/// The urgent lane through librdkafka's mock cluster: a bulk backlog that the application holds — its
/// buffer full, librdkafka's prefetch full — never holds urgent records back.
@Suite("Consumer lanes against the mock cluster")
struct ConsumerLanesTests {
    @Test(.timeLimit(.minutes(1)))
    func urgentRecordsFlowWhileABulkBacklogIsHeld() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        try cluster.createTopic("bulk", partitions: 2)
        try cluster.createTopic("urgent", partitions: 1)
        let producer = try testProducer(cluster)
        try await produceKeyed(producer, topic: "bulk", count: 3_000, keyPrefix: "bulk")

        var configuration = testConsumerConfiguration(cluster, group: uniqueGroupID())
        configuration.urgentTopics = ["urgent"]
        configuration.bufferCapacity = 64
        // A small prefetch, so that librdkafka's queue for bulk fills and fetching stops there.
        configuration.additionalProperties["queued.min.messages"] = "100"
        let consumer = try KafkaConsumer(configuration: configuration, logger: testLogger("test.consumer"))
        try consumer.subscribe(topics: ["bulk", "urgent"])
        consumer.hold(.bulk)
        try consumer.start()
        var iterator = consumer.events.makeAsyncIterator()
        guard case .partitionsAssigned(let partitions) = try await nextEvent(&iterator, within: .seconds(20), expecting: "the assignment") else {
            throw TestFailure("the first event is not the assignment")
        }
        #expect(partitions.count == 3)
        // Bulk fills its buffer while held.
        try await eventually("bulk's buffer to fill", within: .seconds(20), every: .milliseconds(10)) { consumer.bufferedMessageCount(.bulk) >= 64 }

        try await produceKeyed(producer, topic: "urgent", count: 5, keyPrefix: "urgent")
        var urgentKeys: Set<String> = []
        while urgentKeys.count < 5 {
            guard case .message(let message) = try await nextEvent(&iterator, within: .seconds(20), expecting: "the urgent records") else { continue }
            #expect(message.lane == .urgent && message.topic == "urgent", "only urgent records while bulk is held, got \(message.topic)")
            urgentKeys.insert(message.keyString ?? "")
        }

        consumer.release(.bulk)
        var next: [Int32: Int64] = [:]
        var bulkCount = 0
        while bulkCount < 3_000 {
            guard case .message(let message) = try await nextEvent(&iterator, within: .seconds(20), expecting: "the bulk backlog") else { continue }
            #expect(message.lane == .bulk)
            if let expected = next[message.partition] { #expect(message.offset == expected, "bulk records in order per partition") }
            next[message.partition] = message.offset + 1
            bulkCount += 1
        }
        try await consumer.close()
    }
}

/// The topics of one lane through the mock cluster: a topic's new records do not wait behind what librdkafka
/// prefetched of another topic's backlog.
@Suite("Consumer topics read in turn against the mock cluster")
struct ConsumerTopicTurnsTests {
    @Test(.timeLimit(.minutes(1)))
    func aTopicsNewRecordsDoNotWaitBehindAnotherTopicsPrefetch() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        try cluster.createTopic("campaign", partitions: 2)
        try cluster.createTopic("app-b", partitions: 1)
        let producer = try testProducer(cluster)
        let backlog = 20_000
        try await produceKeyed(producer, topic: "campaign", count: backlog, keyPrefix: "campaign")

        // librdkafka's statistics say how far it fetched each partition (`next_offset`): the events this
        // test waits on.
        let fetched = BlockingMutex<[String: Int64]>([:])
        var configuration = testConsumerConfiguration(cluster, group: uniqueGroupID())
        configuration.bufferCapacity = 64
        configuration.statisticsInterval = .milliseconds(20)
        configuration.statisticsHandler = { json in
            guard let stats = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any],
                let topics = stats["topics"] as? [String: Any]
            else { return }
            var positions: [String: Int64] = [:]
            for (topic, value) in topics {
                let partitions = (value as? [String: Any])?["partitions"] as? [String: Any] ?? [:]
                for (id, partition) in partitions where id != "-1" {
                    positions[topic, default: 0] += max(0, ((partition as? [String: Any])?["next_offset"] as? NSNumber)?.int64Value ?? 0)
                }
            }
            fetched.withLock { $0 = positions }
        }
        let consumer = try KafkaConsumer(configuration: configuration, logger: testLogger("test.consumer"))
        try consumer.subscribe(topics: ["campaign", "app-b"])
        consumer.hold(.bulk)  // the application takes nothing until both topics' records are in librdkafka
        try consumer.start()
        var iterator = consumer.events.makeAsyncIterator()
        guard case .partitionsAssigned = try await nextEvent(&iterator, within: .seconds(20), expecting: "the assignment") else {
            throw TestFailure("the first event is not the assignment")
        }
        try await eventually("campaign's backlog fetched", within: .seconds(20), every: .milliseconds(10)) { fetched.withLock { $0["campaign"] ?? 0 } >= Int64(backlog) }
        try await produceKeyed(producer, topic: "app-b", count: 5, keyPrefix: "b")
        try await eventually("app-b's records fetched", within: .seconds(20), every: .milliseconds(10)) { fetched.withLock { $0["app-b"] ?? 0 } >= 5 }

        consumer.release(.bulk)
        var campaignBefore = 0
        var appB = 0
        while appB < 5 {
            guard case .message(let message) = try await nextEvent(&iterator, within: .seconds(20), expecting: "app-b's records") else { continue }
            if message.topic == "app-b" { appB += 1 } else { campaignBefore += 1 }
        }
        // What was buffered (64 and the batch that filled it), then at most one poll round's share of the
        // campaign (half a batch) before app-b's turn. With one queue for the lane, app-b's records came
        // after the whole prefetched backlog (about 20,000).
        #expect(campaignBefore <= 64 + KafkaConsumerShared.maximumBatch * 2, "campaign records before app-b's: \(campaignBefore)")
        try await consumer.close()
    }
}

