import Foundation
import Kafka
import ServiceSupport
import Logging
import TestSupport
import Testing

/// The producer's transactions against noida-db, a broker that stores transactional offset commits and
/// fences zombie producers (librdkafka's mock cluster does neither; see `NoidaBroker`).
@Suite(.serialized, .timeLimit(.minutes(3)))
struct TransactionTests {
    let logger = testLogger("transactions")

    @Test func aCommittedTransactionShowsItsRecordsOnceAndCommitsItsOffsets() async throws {
        try await withNoida { servers in
            try await KafkaTopicCreation.create(["in": 1, "out": 1], bootstrapServers: [servers], logger: logger)
            try await produce(["a", "b", "c"], to: "in", servers: servers)
            let group = uniqueGroupID()
            let consumer = try groupConsumer(servers, group: group, topic: "in")
            let consumed = try await receive(3, from: consumer)
            #expect(consumed.map(\.offset) == [0, 1, 2])

            let producer = try transactionalProducer(servers, id: "tx-\(group)")
            try await producer.initTransactions(timeout: .seconds(10))
            try producer.beginTransaction()
            for message in consumed { _ = try await producer.send(topic: "out", key: message.key.map(Array.init), value: message.value.map(Array.init)) }
            try await producer.sendOffsetsToTransaction(
                [KafkaTopicPartition(topic: "in", partition: 0): 3], groupMetadata: try consumer.groupMetadata(), timeout: .seconds(10))
            try await producer.commitTransaction(timeout: .seconds(10))
            try await producer.close(timeout: .seconds(5))
            try await consumer.close(timeout: .seconds(5))

            #expect(try await readKeys("out", servers: servers, isolation: "read_committed", until: "c") == ["a", "b", "c"])
            let inspector = try KafkaConsumer(configuration: KafkaConsumerConfiguration(bootstrapServers: [servers], groupID: group), logger: logger)
            let committed = try await inspector.committedOffsets(for: [KafkaTopicPartition(topic: "in", partition: 0)])
            try await inspector.close(timeout: .seconds(5))
            #expect(committed[KafkaTopicPartition(topic: "in", partition: 0)] == .some(3), "the offsets went with the transaction: \(committed)")
        }
    }

    @Test func anAbortedTransactionIsHiddenFromReadCommittedReadersOnly() async throws {
        try await withNoida { servers in
            try await KafkaTopicCreation.create(["out": 1], bootstrapServers: [servers], logger: logger)
            let producer = try transactionalProducer(servers, id: "tx-\(uniqueGroupID())")
            try await producer.initTransactions(timeout: .seconds(10))
            try producer.beginTransaction()
            _ = try await producer.send(topic: "out", key: "aborted", value: "x")
            try await producer.abortTransaction(timeout: .seconds(10))
            try producer.beginTransaction()
            _ = try await producer.send(topic: "out", key: "kept", value: "y")
            try await producer.commitTransaction(timeout: .seconds(10))
            try await producer.close(timeout: .seconds(5))

            #expect(try await readKeys("out", servers: servers, isolation: "read_committed", until: "kept") == ["kept"])
            #expect(try await readKeys("out", servers: servers, isolation: "read_uncommitted", until: "kept") == ["aborted", "kept"],
                    "the aborted record is in the log: only read_committed hides it")
        }
    }

    @Test func aNewProducerWithTheSameTransactionalIDFencesTheOldOne() async throws {
        try await withNoida { servers in
            try await KafkaTopicCreation.create(["out": 1], bootstrapServers: [servers], logger: logger)
            let id = "tx-\(uniqueGroupID())"
            let zombie = try transactionalProducer(servers, id: id)
            try await zombie.initTransactions(timeout: .seconds(10))
            try zombie.beginTransaction()
            _ = try await zombie.send(topic: "out", key: "zombie", value: "x")

            let successor = try transactionalProducer(servers, id: id)
            try await successor.initTransactions(timeout: .seconds(10))
            let fenced = await #expect(throws: KafkaError.self, "the old producer cannot commit once fenced") {
                try await zombie.commitTransaction(timeout: .seconds(10))
            }
            #expect(fenced?.isFatal == true, "fencing is fatal for the old producer: \(String(describing: fenced))")
            try successor.beginTransaction()
            _ = try await successor.send(topic: "out", key: "successor", value: "y")
            try await successor.commitTransaction(timeout: .seconds(10))
            try await successor.close(timeout: .seconds(5))
            try? await zombie.close(timeout: .seconds(2))

            #expect(try await readKeys("out", servers: servers, isolation: "read_committed", until: "successor") == ["successor"])
        }
    }

    /// A producer that stopped mid-transaction after adding consumed offsets to it (a relay killed between
    /// producing and committing): its successor with the same transactional id aborts that transaction,
    /// so `read_committed` readers move past its records, and the group's offsets are the successor's.
    @Test func aSuccessorAbortsTheOpenTransactionOfAProducerThatStoppedMidTransaction() async throws {
        try await withNoida { servers in
            try await KafkaTopicCreation.create(["in": 1, "out": 4], bootstrapServers: [servers], logger: logger)
            try await produce(["a", "b"], to: "in", servers: servers)
            let group = uniqueGroupID()
            let consumer = try groupConsumer(servers, group: group, topic: "in")
            let consumed = try await receive(2, from: consumer)
            let id = "tx-\(group)"
            let stopped = try transactionalProducer(servers, id: id)
            try await stopped.initTransactions(timeout: .seconds(10))
            try stopped.beginTransaction()
            for partition: Int32 in 0..<4 { _ = try await stopped.send(topic: "out", key: "stopped", value: "x", partition: partition) }
            try await stopped.sendOffsetsToTransaction(
                [KafkaTopicPartition(topic: "in", partition: 0): 1], groupMetadata: try consumer.groupMetadata(), timeout: .seconds(10))
            // It sends nothing more (as a killed process): no commit, no abort.
            let successor = try transactionalProducer(servers, id: id)
            try await successor.initTransactions(timeout: .seconds(10))
            // A new member of the group reads from the committed offset at once: the stopped producer's
            // offsets went with its aborted transaction (none pending that would hold the fetch).
            try await consumer.close(timeout: .seconds(5))
            let newcomer = try groupConsumer(servers, group: group, topic: "in", isolation: "read_committed")
            let first = try await receive(1, from: newcomer)
            #expect(first.first?.offset == 0, "nothing was committed before: \(first.map(\.offset))")
            try successor.beginTransaction()
            _ = try await successor.send(topic: "out", key: consumed[0].keyString ?? "", value: "y", partition: 0)
            for partition: Int32 in 1..<4 { _ = try await successor.send(topic: "out", key: "p\(partition)", value: "y", partition: partition) }
            _ = try await successor.send(topic: "out", key: "successor", value: "y", partition: 0)
            try await successor.sendOffsetsToTransaction(
                [KafkaTopicPartition(topic: "in", partition: 0): 2], groupMetadata: try newcomer.groupMetadata(), timeout: .seconds(10))
            try await successor.commitTransaction(timeout: .seconds(10))
            try await successor.close(timeout: .seconds(5))
            try? await stopped.close(timeout: .seconds(2))
            try await newcomer.close(timeout: .seconds(5))

            let keys = try await readKeys("out", servers: servers, isolation: "read_committed", until: "successor", count: 5)
            #expect(Set(keys) == ["a", "p1", "p2", "p3", "successor"] && keys.count == 5, "\(keys)")
            let inspector = try KafkaConsumer(configuration: KafkaConsumerConfiguration(bootstrapServers: [servers], groupID: group), logger: logger)
            let committed = try await inspector.committedOffsets(for: [KafkaTopicPartition(topic: "in", partition: 0)])
            try await inspector.close(timeout: .seconds(5))
            #expect(committed[KafkaTopicPartition(topic: "in", partition: 0)] == .some(2), "\(committed)")
        }
    }

    /// The relay commits a transaction every 100 ms, each with two blocking calls (its offsets, its commit):
    /// they run on the producer's one transaction thread. A thread per call, as they once were, made 2,000
    /// threads here.
    @Test func transactionsReuseOneThread() async throws {
        try await withNoida { servers in
            let count = 1_000
            try await KafkaTopicCreation.create(["in": 1, "out": 1], bootstrapServers: [servers], logger: logger)
            try await produce(["a"], to: "in", servers: servers)
            let group = uniqueGroupID()
            let consumer = try groupConsumer(servers, group: group, topic: "in")
            _ = try await receive(1, from: consumer)
            let producer = try transactionalProducer(servers, id: "tx-\(group)")
            try await producer.initTransactions(timeout: .seconds(10))
            let threadsBefore = DedicatedThread.started.load(ordering: .relaxed)
            for n in 0..<count {
                try producer.beginTransaction()
                _ = try await producer.send(topic: "out", key: "k\(n)", value: "v")
                try await producer.sendOffsetsToTransaction(
                    [KafkaTopicPartition(topic: "in", partition: 0): 1], groupMetadata: try consumer.groupMetadata(), timeout: .seconds(10))
                try await producer.commitTransaction(timeout: .seconds(10))
            }
            let threads = DedicatedThread.started.load(ordering: .relaxed) - threadsBefore
            let transactionThreads = producer.transactionThread.threadsStarted
            try await producer.close(timeout: .seconds(5))
            try await consumer.close(timeout: .seconds(5))
            print("\(count) transactions: \(threads) threads started in the process meanwhile, \(transactionThreads) transaction thread(s)")
            // Other suites' clients may start a few threads meanwhile; a thread per call would be 2,000.
            #expect(threads < 100, "\(threads) threads started during \(count) transactions")
            #expect(transactionThreads <= 2, "the transaction thread idles out only after 5 s without a call")
            #expect(try await readKeys("out", servers: servers, isolation: "read_committed", until: "k\(count - 1)").count == count)
        }
    }

    // MARK: Helpers

    private func withNoida(_ body: (String) async throws -> Void) async throws {
        let broker = try await NoidaBroker.start()
        do {
            try await body(broker.bootstrapServers)
        } catch {
            let log = broker.log
            await broker.stop()
            throw TestFailure("\(error); noida-db's output:\n\(log.suffix(1500))")
        }
        await broker.stop()
    }

    private func transactionalProducer(_ servers: String, id: String) throws -> KafkaProducer {
        var configuration = KafkaProducerConfiguration(bootstrapServers: [servers])
        configuration.transactionalID = id
        configuration.messageTimeout = .seconds(30)
        let producer = try KafkaProducer(configuration: configuration, logger: logger)
        try producer.start()
        return producer
    }

    private func produce(_ keys: [String], to topic: String, servers: String) async throws {
        let producer = try KafkaProducer(configuration: KafkaProducerConfiguration(bootstrapServers: [servers]), logger: logger)
        try producer.start()
        for key in keys { _ = try await producer.send(topic: topic, key: key, value: key) }
        try await producer.close(timeout: .seconds(5))
    }

    private func groupConsumer(_ servers: String, group: String, topic: String, isolation: String? = nil) throws -> KafkaConsumer {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: [servers], groupID: group)
        configuration.sessionTimeout = .seconds(6)
        if let isolation { configuration.additionalProperties["isolation.level"] = isolation }
        let consumer = try KafkaConsumer(configuration: configuration, logger: logger)
        try consumer.subscribe(topics: [topic])
        try consumer.start()
        return consumer
    }

    /// The next `count` messages, within 30 s.
    private func receive(_ count: Int, from consumer: KafkaConsumer) async throws -> [KafkaConsumerMessage] {
        var iterator = consumer.events.makeAsyncIterator()
        var messages: [KafkaConsumerMessage] = []
        let deadline = ContinuousClock.now + .seconds(30)
        while messages.count < count {
            let event = try await nextEvent(&iterator, within: deadline - .now, expecting: "message \(messages.count + 1) of \(count)")
            switch event {
            case .message(let message): messages.append(message)
            case .partitionsRevoked(let revocation): revocation.acknowledge()
            default: break
            }
        }
        return messages
    }

    /// Keys of `topic` from its start, as a reader with `isolation` sees them, up to the record keyed `last`.
    private func readKeys(_ topic: String, servers: String, isolation: String, until last: String, count: Int = 0) async throws -> [String] {
        let reader = try groupConsumer(servers, group: uniqueGroupID("reader"), topic: topic, isolation: isolation)
        var keys: [String] = []
        var iterator = reader.events.makeAsyncIterator()
        let deadline = ContinuousClock.now + .seconds(30)
        while !(keys.contains(last) && keys.count >= count) {
            let event = try await nextEvent(&iterator, within: deadline - .now, expecting: "the record keyed \(last) (\(isolation)), after \(keys)")
            switch event {
            case .message(let message): keys.append(message.keyString ?? "")
            case .partitionsRevoked(let revocation): revocation.acknowledge()
            default: break
            }
        }
        try await reader.close(timeout: .seconds(5))
        return keys
    }
}
