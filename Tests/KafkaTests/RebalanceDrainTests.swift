import Kafka
import KafkaMock
import ServiceSupport
import TestSupport
import Testing

@Suite("Revocation waits for the application")
struct RebalanceDrainTests {
    /// How long a member may be silent before the coordinator drops it. It sets the mock coordinator's
    /// clock: a rebalance started by a member joining completes `sessionTimeout - 1 s` after it began, and
    /// a member that does not rejoin (member 1, holding its revocation: the mock counts no heartbeat during
    /// a rebalance) is dropped `sessionTimeout` after its last heartbeat, after which a new round gives
    /// member 2 the partitions another `sessionTimeout - 1 s` later. Long, so that round is far off.
    static let sessionTimeout = Duration.seconds(12)

    /// While the application has not acknowledged a revocation, nobody else gets the partitions; once it
    /// does, the rebalance completes.
    ///
    /// The check that matters is the negative one: member 2 gets nothing while member 1 holds. It holds
    /// for `sessionTimeout` from the moment the test saw the revocation. A consumer that did not wait for
    /// the application would rejoin at once, and the rebalance would give member 2 partitions when the
    /// coordinator completes it, `sessionTimeout - 1 s` after member 2 joined, before member 1's revocation:
    /// inside the hold whatever the machine's speed. With the wait, member 2 gets nothing before the
    /// coordinator drops member 1 and runs a new round, about `2 × sessionTimeout` after member 2 joined:
    /// the test may see the revocation up to `sessionTimeout - 2 s` late (a loaded machine delays it by
    /// seconds) and still pass. The waits for what must happen are hang guards (60 s).
    @Test(.timeLimit(.minutes(5)), arguments: [KafkaPartitionAssignmentStrategy.range, .cooperativeSticky])
    func revokedPartitionsStayUntilTheApplicationAcknowledges(strategy: KafkaPartitionAssignmentStrategy) async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        let topic = "drain"
        try cluster.createTopic(topic, partitions: 4)
        let group = uniqueGroupID()

        enum Entry: Sendable {
            case assigned(member: Int, [KafkaTopicPartition])
            case revoked(member: Int, KafkaPartitionRevocation)
        }
        let log = EventRecorder<Entry>()
        // The first revocation is held until the test acknowledges it; later ones (a busy mock cluster may
        // need more than one round to settle the group) are acknowledged at once. Leaving them unacknowledged
        // held the group for the drain timeout and member 2 missed the deadline below.
        let released = Latch<Void>()
        let trail = GroupTrail()
        let consumers = try (1...2).map { member in
            var configuration = testConsumerConfiguration(cluster, group: group, strategy: strategy)
            configuration.sessionTimeout = Self.sessionTimeout
            // Neither may end the hold before the test does (the revocation is served inside a poll).
            configuration.revocationDrainTimeout = Self.sessionTimeout * 3
            configuration.maxPollInterval = Self.sessionTimeout * 3
            trail.configure(&configuration)
            return try KafkaConsumer(configuration: configuration, logger: trail.logger("test.member\(member)"))
        }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for (index, consumer) in consumers.enumerated() {
                tasks.addTask {
                    for await event in consumer.events {
                        switch event {
                        case .partitionsAssigned(let partitions): log.append(.assigned(member: index + 1, partitions))
                        // Held: the test decides when the member has drained.
                        case .partitionsRevoked(let revocation):
                            log.append(.revoked(member: index + 1, revocation))
                            if released.isSet { revocation.acknowledge() }
                        case .message, .partitionsLost: break
                        }
                    }
                }
            }
            do {
                try await trail.explaining {
                    try consumers[0].subscribe(topics: [topic])
                    try consumers[0].start()
                    try await log.waitUntil("member 1's first assignment", within: .seconds(60)) {
                        $0.contains { if case .assigned(1, let partitions) = $0 { partitions.count == 4 } else { false } }
                    }
                    try consumers[1].subscribe(topics: [topic])
                    try consumers[1].start()
                    try await log.waitUntil("a revocation at member 1 when member 2 joins", within: .seconds(60)) {
                        $0.contains { if case .revoked(1, _) = $0 { true } else { false } }
                    }
                    let memberTwoAssigned: @Sendable ([Entry]) -> Bool = {
                        $0.contains { if case .assigned(2, let partitions) = $0 { !partitions.isEmpty } else { false } }
                    }
                    // Waiting for something that must not happen: member 2 gets nothing while member 1 drains.
                    if (try? await log.waitUntil("member 2 being assigned partitions", within: Self.sessionTimeout, memberTwoAssigned)) != nil {
                        throw TestFailure("member 2 got partitions before member 1 acknowledged its revocation")
                    }
                    released.set(())
                    for entry in log.entries {
                        if case .revoked(_, let revocation) = entry { revocation.acknowledge() }
                    }
                    try await log.waitUntil("member 2 being assigned partitions after member 1 acknowledged",
                                            within: .seconds(60), memberTwoAssigned)
                }
                // close() releases a revocation still waiting for acknowledgement, so nothing else to do.
                for consumer in consumers { try await consumer.close() }
                try await tasks.waitForAll()
            } catch {
                // A consumer released without close() under cooperative-sticky can abort the whole test
                // process (librdkafka 2.0.2's sticky assignor); closing also ends the loops above.
                for consumer in consumers { try? await consumer.close() }
                throw error
            }
        }
    }
}

@Suite("Failover on the mock cluster")
struct FailoverTests {
    /// A broker goes down and its partitions' leadership moves: producing and consuming carry on and no
    /// record is lost (duplicates are tolerated: librdkafka 2.0.2 may redeliver).
    @Test(.timeLimit(.minutes(1)))
    func producerAndConsumerFollowMovedLeaders() async throws {
        let cluster = try MockKafkaCluster(brokers: 3, logger: testLogger("test.mock", level: .critical))
        let topic = "failover"
        try cluster.createTopic(topic, partitions: 2)
        let group = uniqueGroupID()
        try cluster.setGroupCoordinator(group: group, brokerID: 3)
        for partition in Int32(0)..<2 { try cluster.setPartitionLeader(topic: topic, partition: partition, brokerID: 1) }

        let producer = try testProducer(cluster)
        try await produceKeyed(producer, topic: topic, count: 50, keyPrefix: "before")
        let consumer = try KafkaConsumer(configuration: testConsumerConfiguration(cluster, group: group),
                                         logger: testLogger("test.consumer", level: .critical))
        try consumer.subscribe(topics: [topic])
        try consumer.start()
        var keys: Set<String> = []
        var iterator = consumer.events.makeAsyncIterator()
        while keys.count < 50 {
            if case .message(let message) = try await nextEvent(&iterator, within: .seconds(20), expecting: "records before failover") {
                keys.insert(message.keyString ?? "")
                try consumer.storeOffset(for: message)
            }
        }

        try cluster.setBrokerDown(1)
        for partition in Int32(0)..<2 { try cluster.setPartitionLeader(topic: topic, partition: partition, brokerID: 2) }
        try await produceKeyed(producer, topic: topic, count: 50, keyPrefix: "after")
        while keys.count < 100 {
            switch try await nextEvent(&iterator, within: .seconds(20), expecting: "records after failover (\(keys.count) of 100)") {
            case .message(let message):
                keys.insert(message.keyString ?? "")
            case .partitionsRevoked(let revocation):
                revocation.acknowledge()
            case .partitionsAssigned, .partitionsLost:
                break
            }
        }
        #expect(keys == Set((0..<50).map { "before-\($0)" } + (0..<50).map { "after-\($0)" }))
        try await consumer.close()
        try await producer.close()
    }
}

@Suite("Lost assignments and slow brokers")
struct FaultInjectionTests {
    /// When the group coordinator is unreachable for longer than the session timeout, librdkafka gives the
    /// assignment up as lost; the application hears `partitionsLost` (not a revocation it could drain) and
    /// gets the partitions back once the coordinator returns.
    @Test(.timeLimit(.minutes(1)))
    func unreachableCoordinatorMakesTheAssignmentLost() async throws {
        let cluster = try MockKafkaCluster(brokers: 2, logger: testLogger("test.mock", level: .critical))
        let topic = "lost"
        try cluster.createTopic(topic, partitions: 2)
        let group = uniqueGroupID()
        try cluster.setGroupCoordinator(group: group, brokerID: 2)
        for partition in Int32(0)..<2 { try cluster.setPartitionLeader(topic: topic, partition: partition, brokerID: 1) }

        var configuration = testConsumerConfiguration(cluster, group: group)
        configuration.sessionTimeout = .seconds(3)
        configuration.maxPollInterval = .seconds(3)
        let consumer = try KafkaConsumer(configuration: configuration, logger: testLogger("test.consumer", level: .critical))
        try consumer.subscribe(topics: [topic])
        try consumer.start()
        var iterator = consumer.events.makeAsyncIterator()
        guard case .partitionsAssigned(let assigned) = try await nextEvent(&iterator, within: .seconds(20), expecting: "the first assignment") else {
            Issue.record("first event was not an assignment")
            return
        }
        #expect(assigned.count == 2)

        try cluster.setBrokerDown(2)
        var lost: [KafkaTopicPartition] = []
        while lost.isEmpty {
            switch try await nextEvent(&iterator, within: .seconds(20), expecting: "partitionsLost after the coordinator went away") {
            case .partitionsLost(let partitions): lost = partitions
            case .partitionsRevoked(let revocation):
                Issue.record("got a drainable revocation instead of a loss: \(revocation)")
                revocation.acknowledge()
            case .partitionsAssigned, .message: break
            }
        }
        #expect(Set(lost) == Set(assigned))

        try cluster.setBrokerUp(2)
        while true {
            if case .partitionsAssigned(let again) = try await nextEvent(&iterator, within: .seconds(30), expecting: "a new assignment after the coordinator returned") {
                #expect(Set(again) == Set(assigned))
                break
            }
        }
        try await consumer.close()
    }

    /// Broker round-trip time injection slows deliveries down by at least that much.
    @Test(.timeLimit(.minutes(1)))
    func injectedRoundTripTimeDelaysDelivery() async throws {
        let cluster = try MockKafkaCluster(brokers: 1, logger: testLogger("test.mock"))
        try cluster.createTopic("slow", partitions: 1)
        let producer = try testProducer(cluster)
        _ = try await producer.send(topic: "slow", key: "warm-up", value: "x")
        try cluster.setBrokerRoundTripTime(1, .milliseconds(400))
        let clock = ContinuousClock()
        let elapsed = try await clock.measure { _ = try await producer.send(topic: "slow", key: "k", value: "v") }
        #expect(elapsed >= .milliseconds(400), "delivery took \(elapsed)")
        try cluster.setBrokerRoundTripTime(1, .zero)
        try await producer.close()
    }
}
