@testable import Kafka
import TestSupport
import Testing
import Kafka
import KafkaMock

/// What the Kafka layer tells its application when things go wrong for good, and how it lets go.
@Suite("Failing loudly")
struct FailLoudlyTests {
    /// A record larger than `message.max.bytes` can never be sent: the caller is told so at once, as a
    /// refusal of the record (not a transient error to retry forever).
    @Test(.timeLimit(.minutes(1)))
    func anOversizedRecordIsRejectedForGood() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        try cluster.createTopic("sized", partitions: 1)
        let producer = try testProducer(cluster)
        let error = await #expect(throws: KafkaError.self) {
            _ = try await producer.send(topic: "sized", key: Array(repeating: 1, count: 200_000), value: Array(repeating: 2, count: 900_000))
        }
        #expect(error?.responseCode == .messageSizeTooLarge)
        #expect(error?.sendFailure == .recordRejected)
        // The producer is fine for the next record.
        _ = try await producer.send(topic: "sized", key: "small", value: "ok")
        try await producer.close()
    }

    @Test func sendFailuresAreClassified() {
        #expect(KafkaError(code: .delivery, responseCode: .invalidRecord, message: "").sendFailure == .recordRejected)
        #expect(KafkaError(code: .delivery, responseCode: .recordListTooLarge, message: "").sendFailure == .recordRejected)
        #expect(KafkaError(code: .delivery, responseCode: .notLeaderForPartition, message: "").sendFailure == .retriable)
        #expect(KafkaError(code: .delivery, responseCode: .messageTimedOut, message: "").sendFailure == .retriable)
        #expect(KafkaError(code: .delivery, responseCode: .purgedInFlight, message: "").sendFailure == .closed)
        #expect(KafkaError(code: .enqueue, responseCode: .fatal, message: "").sendFailure == .fatal)
        #expect(KafkaError(code: .delivery, responseCode: .outOfOrderSequenceNumber, message: "", isFatal: true).sendFailure == .fatal)
    }

    /// A fatal error (the idempotent producer lost its guarantees) is announced, and every later send
    /// fails as fatal instead of being retried.
    @Test(.timeLimit(.minutes(1)))
    func aFatalProducerErrorIsAnnouncedAndEndsSending() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        try cluster.createTopic("fatal", partitions: 1)
        let producer = try testProducer(cluster)
        _ = try await producer.send(topic: "fatal", key: "warm-up", value: "x")
        producer.injectFatalError(.outOfOrderSequenceNumber, reason: "injected by the test")
        let fatal = try #require(await producer.fatalError.wait(timeout: .seconds(10)), "no fatal error announced")
        #expect(fatal.isFatal)
        let error = await #expect(throws: KafkaError.self) {
            _ = try await producer.send(topic: "fatal", key: "after", value: "x")
        }
        #expect(error?.sendFailure == .fatal)
        try? await producer.close(timeout: .seconds(2))
    }

    /// With every broker down a send would wait for `message.timeout.ms`; withdrawing fails it at once (and
    /// every later send), so a shutdown never waits for a broker that is gone.
    @Test(.timeLimit(.minutes(1)))
    func withdrawingFailsWaitingSendsWhileEveryBrokerIsDown() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock", level: .critical))
        try cluster.createTopic("gone", partitions: 1)
        var configuration = KafkaProducerConfiguration(bootstrapServers: [cluster.bootstrapServers])
        configuration.messageTimeout = .seconds(300)
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger("test.producer", level: .critical))
        try producer.start()
        _ = try await producer.send(topic: "gone", key: "warm-up", value: "x")
        try cluster.setBrokerDown(1)
        let clock = ContinuousClock()
        let start = clock.now
        async let stuck: KafkaError? = {
            do { _ = try await producer.send(topic: "gone", key: "stuck", value: "x"); return nil } catch let error as KafkaError { return error } catch { return nil }
        }()
        await producer.withdrawAll()
        let error = try #require(await stuck, "the waiting send succeeded with every broker down")
        #expect(error.sendFailure == .closed, "\(error)")
        let later = await #expect(throws: KafkaError.self) { _ = try await producer.send(topic: "gone", key: "later", value: "x") }
        #expect(later?.sendFailure == .closed)
        try? await producer.close(timeout: .seconds(2))
        #expect(clock.now - start < .seconds(15), "withdrawing took \(clock.now - start)")
    }

    /// An iterator whose task is already cancelled returns at once: the cancellation handler used to run
    /// before the iterator was parked, found nothing to cancel, and the iterator then waited forever.
    @Test(.timeLimit(.minutes(1)))
    func aCancelledTaskDoesNotParkOnTheEvents() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        try cluster.createTopic("quiet", partitions: 1)
        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: uniqueGroupID(), strategy: .range),
                                         logger: testLogger("test.consumer"))
        // Never started: no event will ever come to end the wait.
        let events = consumer.events
        let returned = TestSignal()
        Task {
            withUnsafeCurrentTask { $0?.cancel() }
            var iterator = events.makeAsyncIterator()
            _ = await iterator.next()
            returned.raise()
        }
        #expect(await returned.wait(within: .seconds(10)), "next() still waiting 10 s after its task was cancelled")
        try await consumer.close()
    }

    /// A wait with a deadline of zero and nothing to read times out instead of hanging, however the deadline
    /// and the parking of the iterator interleave.
    ///
    /// Each wait is a few hops through the cooperative pool (park, the deadline's child task, resume), so
    /// the 200 take as long as the pool is busy: on a loaded machine running the suite in parallel, far more
    /// than a quiet second. What this catches is a wait that never returns, so the waits have one generous
    /// deadline that names them, and the time limit is above it.
    @Test(.timeLimit(.minutes(5)))
    func aZeroDeadlineOnTheEventsTimesOut() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        try cluster.createTopic("quiet", partitions: 1)
        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: uniqueGroupID(), strategy: .range),
                                         logger: testLogger("test.consumer"))
        try consumer.subscribe(topics: ["quiet"])
        try consumer.start()
        do {
            let timedOut = try await withDeadline("200 waits with a zero deadline", timeout: .seconds(180)) {
                var iterator = consumer.events.makeAsyncIterator()
                var timedOut = 0
                for _ in 0..<200 {
                    do {
                        let event = try await iterator.next(within: .zero)
                        if case .message = event { Issue.record("a message on an empty topic") }
                    } catch let error as KafkaError {
                        #expect(error.code == .timedOut)
                        timedOut += 1
                    }
                }
                return timedOut
            }
            // The group's assignment may come in as an event; nothing else can, so most waits time out.
            #expect(timedOut >= 190, "\(timedOut) of 200 waits timed out")
        } catch {
            try? await consumer.close()
            throw error
        }
        try await consumer.close()
    }
}

@Suite("Consumer health")
struct ConsumerHealthTests {
    /// Ready means joined: not before the first assignment; and Kafka unreachable shows until a broker
    /// answers again.
    @Test(.timeLimit(.minutes(2)))
    func healthFollowsTheGroupAndTheBrokers() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock", level: .critical))
        try cluster.createTopic("health", partitions: 2)
        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: uniqueGroupID(), strategy: .range),
                                         logger: testLogger("test.consumer", level: .critical))
        #expect(consumer.health.isJoined == false)
        try consumer.subscribe(topics: ["health"])
        try consumer.start()
        let events = Task {
            for await _ in consumer.events {}
        }
        try await eventually("the member joins its group", within: .seconds(30)) { consumer.health.isJoined }
        #expect(consumer.health.isKafkaReachable)
        try cluster.setBrokerDown(1)
        try await eventually("the consumer sees every broker down", within: .seconds(30)) { !consumer.health.isKafkaReachable }
        try cluster.setBrokerUp(1)
        try await eventually("the consumer sees Kafka again", within: .seconds(30)) { consumer.health.isKafkaReachable }
        try await consumer.close(timeout: .seconds(10))
        events.cancel()
    }

    /// librdkafka drops a partition's forward when it stops the partition's fetcher, asynchronously: after a
    /// quick revoke-and-assign the stop can land after the new assignment forwarded the partition, and its
    /// records then waited in librdkafka, unread, for good. The poll thread forwards every assigned partition
    /// again every half second. Here the forward is dropped the way librdkafka drops it.
    @Test(.timeLimit(.minutes(1)))
    func aPartitionWhoseForwardLibrdkafkaDroppedIsReadAgain() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        let topic = "unforwarded"
        try cluster.createTopic(topic, partitions: 1)
        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: uniqueGroupID()),
                                         logger: testLogger("test.consumer"))
        try consumer.subscribe(topics: [topic])
        try consumer.start()
        var iterator = consumer.events.makeAsyncIterator()
        guard case .partitionsAssigned(let partitions) = try await nextEvent(&iterator, within: .seconds(30), expecting: "the assignment") else {
            Issue.record("first event was not an assignment")
            return
        }
        consumer.client.withHandle { consumer.shared.setForwarding(false, partitions, handle: $0) }
        let producer = try testProducer(cluster)
        try await produceKeyed(producer, topic: topic, count: 10)
        try await producer.close()
        var keys: Set<String> = []
        while keys.count < 10 {
            if case .message(let message) = try await nextEvent(&iterator, within: .seconds(10), expecting: "record \(keys.count + 1) of 10 (the partition's records stayed in librdkafka)") {
                keys.insert(message.keyString ?? "")
            }
        }
        try await consumer.close()
    }
}
