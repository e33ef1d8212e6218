import Kafka
import KafkaMock
import TestSupport
import Testing

@Suite("Producer delivery")
struct ProducerTests {
    /// NOT_LEADER_FOR_PARTITION is retriable: librdkafka refreshes metadata and retries; nothing is lost.
    @Test(.timeLimit(.minutes(5)))
    func deliversEverythingDespiteNotLeaderErrors() async throws {
        let cluster = try MockKafkaCluster(brokers: 3, logger: testLogger("test.mock"))
        let topic = "not-leader"
        try cluster.createTopic(topic, partitions: 4)
        let producer = try testProducer(cluster)
        // Warm up (idempotent producer id, metadata) so the errors hit Produce requests of the real batch.
        _ = try await producer.send(topic: topic, key: "warm-up", value: "x")
        cluster.pushRequestErrors(.produce, Array(repeating: .notLeaderForPartition, count: 6))

        let reports = try await produceKeyed(producer, topic: topic, count: 200)
        #expect(reports.count == 200)
        let positions = Set(reports.values.map { KafkaTopicPartition(topic: "\($0.offset)", partition: $0.partition) })
        #expect(positions.count == 200, "every record has its own partition/offset")
        try await producer.close()

        // An independent read of the topic finds every key.
        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: uniqueGroupID()),
                                         logger: testLogger("test.consumer"))
        try consumer.subscribe(topics: [topic])
        try consumer.start()
        var keys: Set<String> = []
        var iterator = consumer.events.makeAsyncIterator()
        while keys.count < 201 {
            // Deadlines that catch a hang, not a speed: the first record waits for the group join, and any
            // record may wait for a rejoin (a loaded machine delays heartbeats past the 6 s session), which
            // took the last record past 20 s once.
            let deadline: Duration = keys.isEmpty ? .seconds(90) : .seconds(60)
            if case .message(let message) = try await nextEvent(&iterator, within: deadline, expecting: "record \(keys.count + 1) of 201") {
                keys.insert(message.keyString ?? "")
            }
        }
        #expect(keys.isSuperset(of: reports.keys))
        try await consumer.close()
    }

    /// A non-retriable broker error reaches the caller as a typed error instead of vanishing.
    @Test(.timeLimit(.minutes(1)))
    func nonRetriableErrorIsReportedToTheCaller() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        let topic = "rejected"
        try cluster.createTopic(topic, partitions: 1)
        let producer = try testProducer(cluster)
        _ = try await producer.send(topic: topic, key: "warm-up", value: "x")
        cluster.pushRequestErrors(.produce, [.topicAuthorizationFailed])

        let error = await #expect(throws: KafkaError.self) {
            _ = try await producer.send(topic: topic, key: "k", value: "v")
        }
        #expect(error?.code == .delivery)
        #expect(error?.responseCode == .topicAuthorizationFailed)
        #expect(error?.isRetriable == false)
        try await producer.close()
    }

    /// Null key, null value, empty value and headers (including a null one) survive the round trip.
    @Test(.timeLimit(.minutes(1)))
    func nullKeyNullValueAndHeadersRoundTrip() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        let topic = "nulls"
        try cluster.createTopic(topic, partitions: 1)
        let producer = try testProducer(cluster)
        let headers = [KafkaHeader(name: "trace", value: Array("abc".utf8)), KafkaHeader(name: "empty", value: nil),
                       KafkaHeader(name: "trace", value: [])]
        _ = try await producer.send(topic: topic, key: nil as [UInt8]?, value: nil, headers: headers, partition: 0)
        _ = try await producer.send(topic: topic, key: [1, 2], value: [], partition: 0)
        try await producer.close()

        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: uniqueGroupID()),
                                         logger: testLogger("test.consumer"))
        try consumer.subscribe(topics: [topic])
        try consumer.start()
        var messages: [KafkaConsumerMessage] = []
        var iterator = consumer.events.makeAsyncIterator()
        while messages.count < 2 {
            if case .message(let message) = try await nextEvent(&iterator, within: .seconds(20), expecting: "both records") {
                messages.append(message)
            }
        }
        #expect(messages[0].key == nil)
        #expect(messages[0].value == nil)
        #expect(messages[0].headers == headers)
        #expect(messages[1].key == [1, 2])
        #expect(messages[1].value == [])
        #expect(messages[1].headers.isEmpty)
        try await consumer.close()
    }

    /// librdkafka 2.0 asks the cluster about a topic only after its first record, at its next once-a-second
    /// topic scan. A learned topic is known at once: a record for a partition it does not have is refused
    /// as it is produced, where an unlearned topic's record is queued, its partition unknown, and refused
    /// only in its delivery report (a scan later).
    @Test(.timeLimit(.minutes(1)))
    func learnedTopicsAreKnownBeforeTheirFirstRecord() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        try cluster.createTopic("learned", partitions: 3)
        try cluster.createTopic("unlearned", partitions: 3)
        cluster.setTopicError("absent", .unknownTopicOrPartition)
        let producer = try testProducer(cluster)

        let missing = try await producer.learnTopics(["learned", "absent"], timeout: .seconds(10))
        #expect(missing == ["absent": .unknownTopicOrPartition], "\(missing)")

        let refused = #expect(throws: KafkaError.self) {
            try producer.produce(topic: "learned", key: nil as [UInt8]?, value: [1], partition: 7) { _ in }
        }
        #expect(refused?.code == .enqueue)
        #expect(refused?.responseCode == .unknownPartition, "\(String(describing: refused))")

        // The premise, on librdkafka 2.0: without the lookup the same record is taken, and fails only later.
        // Later versions may know the topic already (they refuse it at once too): either way it is never sent.
        let report = EventRecorder<Result<KafkaDeliveryReport, KafkaError>>()
        do {
            try producer.produce(topic: "unlearned", key: nil as [UInt8]?, value: [1], partition: 7) { report.append($0) }
            try await report.waitUntil("the unlearned topic's delivery report", within: .seconds(10)) { !$0.isEmpty }
            #expect(throws: KafkaError.self) { try report.entries[0].get() }
        } catch let error as KafkaError where !KafkaLibrary.version.hasPrefix("2.0.") {
            #expect(error.responseCode == .unknownPartition, "\(error)")
        }
        try await producer.close()
    }

    @Test(.timeLimit(.minutes(1)))
    func statisticsReachTheHandler() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        let received = EventRecorder<String>()
        var configuration = KafkaProducerConfiguration(bootstrapServers: [cluster.bootstrapServers])
        configuration.statisticsInterval = .milliseconds(100)
        configuration.statisticsHandler = { received.append($0) }
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger("test.producer"))
        try producer.start()
        try await received.waitUntil("a statistics callback", within: .seconds(10)) { !$0.isEmpty }
        #expect(received.entries[0].contains("\"type\": \"producer\"") || received.entries[0].contains("\"type\":\"producer\""))
        try await producer.close()
    }
}
