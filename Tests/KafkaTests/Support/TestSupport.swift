import Foundation
import Kafka
import KafkaMock
import Logging
import Synchronization
import TestSupport
import Testing

/// A logger that shows librdkafka warnings and worse on stderr (enough to diagnose a failing test).
func testLogger(_ label: String, level: Logger.Level = .warning) -> Logger {
    var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
    logger.logLevel = level
    return logger
}

/// A group id no other test (or earlier run) uses, so no test waits out another's session.
func uniqueGroupID(_ name: String = #function) -> String {
    "\(name.prefix { $0 != "(" })-\(UUID().uuidString.prefix(8))"
}

/// Consumer settings for the mock cluster: short timeouts so rebalances and evictions happen quickly.
/// `range` unless a test asks for cooperative-sticky: with librdkafka 2.0.2 a cooperative-sticky consumer
/// released without `close()` (a test that failed or hit its time limit) can abort the whole test process
/// (`rd_kafka_sticky_assignor_state_destroy` assertion, seen in a loaded run), hiding every other result.
///
/// librdkafka's periodic metadata refresh (`topic.metadata.refresh.interval.ms`) stays at its default
/// (5 min). A refresh that lands while the group leader waits for its assignor's metadata makes librdkafka
/// (2.0.2 and still upstream) rejoin the group, and each rejoin costs 5 s in the mock coordinator (session
/// timeout minus 1 s). With a 1 s refresh, loaded runs saw joins of 8–9 s (5 in 142) and once over 30 s.
func testConsumerConfiguration(
    _ cluster: MockKafkaCluster, group: String,
    strategy: KafkaPartitionAssignmentStrategy = .range
) -> KafkaConsumerConfiguration {
    var configuration = KafkaConsumerConfiguration(bootstrapServers: [cluster.bootstrapServers], groupID: group)
    configuration.sessionTimeout = .seconds(6)
    configuration.heartbeatInterval = .milliseconds(500)
    configuration.maxPollInterval = .seconds(10)
    configuration.autoCommitInterval = .milliseconds(200)
    configuration.partitionAssignmentStrategy = strategy
    configuration.revocationDrainTimeout = .seconds(10)
    return configuration
}

func testProducer(_ cluster: MockKafkaCluster, _ label: String = "producer") throws -> KafkaProducer {
    var configuration = KafkaProducerConfiguration(bootstrapServers: [cluster.bootstrapServers])
    configuration.messageTimeout = .seconds(30)
    let producer = try KafkaProducer(configuration: configuration, logger: testLogger("test.\(label)"))
    try producer.start()
    return producer
}

/// Sends `count` keyed records concurrently; returns the delivery report of each key.
@discardableResult
func produceKeyed(
    _ producer: KafkaProducer, topic: String, count: Int, keyPrefix: String = "key"
) async throws -> [String: KafkaDeliveryReport] {
    try await withThrowingTaskGroup(of: (String, KafkaDeliveryReport).self) { group in
        for index in 0..<count {
            group.addTask {
                let key = "\(keyPrefix)-\(index)"
                return (key, try await producer.send(topic: topic, key: key, value: "value-\(index)"))
            }
        }
        var reports: [String: KafkaDeliveryReport] = [:]
        for try await (key, report) in group { reports[key] = report }
        return reports
    }
}

extension KafkaConsumerMessage {
    var keyString: String? { key.map { String(decoding: $0, as: UTF8.self) } }
}

/// The next event, or a test failure naming what was expected.
func nextEvent(
    _ iterator: inout KafkaConsumerEvents.AsyncIterator, within timeout: Duration, expecting what: String
) async throws -> KafkaConsumerEvent {
    do {
        guard let event = try await iterator.next(within: timeout) else {
            throw TestFailure("consumer events finished while waiting for \(what)")
        }
        return event
    } catch let error as KafkaError where error.code == .timedOut {
        throw TestFailure("no \(what) within \(timeout)")
    }
}



