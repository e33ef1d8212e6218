import Kafka
import KafkaMock
import TestSupport
import Testing

@Suite("Consumer events in batches")
struct EventBatchesTests {
    /// Batches carry every record once, in partition order, never more than asked for, and the assignment
    /// before any record; a backlog comes in batches larger than one.
    @Test(.timeLimit(.minutes(1)))
    func batchesCarryEveryRecordOnceInOrderWithinTheBound() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        let topic = "batched"
        try cluster.createTopic(topic, partitions: 3)
        let producer = try testProducer(cluster)
        try await produceKeyed(producer, topic: topic, count: 600)
        try await producer.close()

        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: uniqueGroupID()),
                                         logger: testLogger("test.consumer"))
        try consumer.subscribe(topics: [topic])
        try consumer.start()
        let maxCount = 50
        struct Seen: Sendable {
            var keys: Set<String> = []
            var lastOffset: [Int32: Int64] = [:]
            var largest = 0
            var assignedFirst = false
            var problems: [String] = []
        }
        let seen = try await withDeadline("600 records in batches", timeout: .seconds(30)) {
            var seen = Seen()
            for await batch in consumer.events.batches(maxCount: maxCount) {
                if batch.isEmpty || batch.count > maxCount { seen.problems.append("a batch of \(batch.count)") }
                seen.largest = max(seen.largest, batch.count)
                for event in batch {
                    switch event {
                    case .partitionsAssigned:
                        seen.assignedFirst = seen.assignedFirst || seen.keys.isEmpty
                    case .message(let message):
                        if !seen.keys.insert(message.keyString ?? "").inserted { seen.problems.append("\(message.keyString ?? "") came twice") }
                        if message.offset <= seen.lastOffset[message.partition, default: -1] { seen.problems.append("offset \(message.offset) out of order") }
                        seen.lastOffset[message.partition] = message.offset
                    case .partitionsRevoked(let revocation):
                        revocation.acknowledge()
                    case .partitionsLost:
                        break
                    }
                }
                if seen.keys.count == 600 { break }
            }
            return seen
        }
        #expect(seen.problems.isEmpty, "\(seen.problems.prefix(5))")
        #expect(seen.keys.count == 600)
        #expect(seen.assignedFirst)
        #expect(seen.largest > 1, "a backlog of 600 records never came more than one at a time")
        try await consumer.close()
    }
}
