import CRdKafka
import Kafka
import Logging


/// An in-process Kafka cluster (librdkafka's mock brokers on 127.0.0.1) with fault injection, for tests,
/// the demo and benchmarks. Any Kafka client can connect to ``bootstrapServers``.
///
/// librdkafka 2.0.2's mock keeps only about 5 MB per partition (older messages are dropped silently), the
/// first group join takes about 3 s, and a downed broker keeps its partition leaderships (move them with
/// ``setPartitionLeader(topic:partition:brokerID:)``). Brokers are numbered 1…N.
///
/// The fault-injection calls hand a request to the mock cluster's thread and wait briefly for it.
package final class MockKafkaCluster: Sendable {
    /// Kafka protocol request types (API keys) that faults can target.
    package struct APIKey: Hashable, Sendable {
        package let rawValue: Int16
        package init(rawValue: Int16) { self.rawValue = rawValue }
        package static let produce = Self(rawValue: 0)
        package static let fetch = Self(rawValue: 1)
        package static let listOffsets = Self(rawValue: 2)
        package static let metadata = Self(rawValue: 3)
        package static let offsetCommit = Self(rawValue: 8)
        package static let offsetFetch = Self(rawValue: 9)
        package static let findCoordinator = Self(rawValue: 10)
        package static let joinGroup = Self(rawValue: 11)
        package static let heartbeat = Self(rawValue: 12)
        package static let leaveGroup = Self(rawValue: 13)
        package static let syncGroup = Self(rawValue: 14)
        package static let initProducerID = Self(rawValue: 22)
    }

    /// The producer handle that owns the mock cluster (librdkafka needs one; it never produces).
    private let owner: KafkaClient
    private let cluster: MockClusterHandle
    /// The number of brokers, numbered 1…brokerCount.
    package let brokerCount: Int
    /// `host:port,…` of the brokers, for `bootstrap.servers`.
    package let bootstrapServers: String

    /// Starts `brokers` mock brokers on 127.0.0.1 (ephemeral ports).
    package init(brokers: Int = 3, logger: Logger = Logger(label: "kafka.mock")) throws {
        guard brokers >= 1 else { throw KafkaError(code: .mockCluster, message: "a mock cluster needs at least one broker") }
        let context = KafkaClientContext(logger: logger, statisticsHandler: nil, errorHandler: nil, rebalanceHandler: nil)
        // No bootstrap servers: this handle only hosts the cluster.
        owner = try KafkaClient(kind: .producer(deliveryReport: false), properties: ["log_level": "4"], context: context)
        guard let cluster = owner.withHandle({ rd_kafka_mock_cluster_new($0, Int32(brokers)) }) else {
            throw KafkaError(code: .mockCluster, message: "rd_kafka_mock_cluster_new failed")
        }
        self.cluster = MockClusterHandle(cluster, owner: owner)
        brokerCount = brokers
        bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
    }

    /// Creates `name` with `partitions` partitions.
    package func createTopic(_ name: String, partitions: Int, replicationFactor: Int = 1) throws {
        let error = cluster.with { rd_kafka_mock_topic_create($0, name, Int32(partitions), Int32(replicationFactor)) }
        try check(error, "create topic \(name)")
    }

    /// Takes a broker offline: its connections close and it stops accepting new ones (it keeps its port).
    /// Partition leadership does not move by itself.
    ///
    /// Holds ``ForkGuard``: librdkafka closes the broker's listener and binds its port again at once, and
    /// aborts the process if a child process being started still holds a copy of the listener (see
    /// ``ForkGuard``).
    package func setBrokerDown(_ brokerID: Int32) throws {
        let error = ForkGuard.withLock { cluster.with { rd_kafka_mock_broker_set_down($0, brokerID) } }
        try check(error, "set broker \(brokerID) down")
    }

    /// Brings a broker back (on the port it had).
    package func setBrokerUp(_ brokerID: Int32) throws {
        try check(cluster.with { rd_kafka_mock_broker_set_up($0, brokerID) }, "set broker \(brokerID) up")
    }

    /// Delays every response of a broker by `rtt`.
    package func setBrokerRoundTripTime(_ brokerID: Int32, _ rtt: Duration) throws {
        try check(cluster.with { rd_kafka_mock_broker_set_rtt($0, brokerID, Int32(clamping: rtt.kafkaMilliseconds)) },
                  "set broker \(brokerID) rtt")
    }

    /// Makes the next `errors.count` requests of type `api` (to any broker) fail with these codes, in order.
    /// `.brokerTransport` disconnects the client instead.
    ///
    /// Produce errors and idempotent producers: the mock checks an idempotent producer's sequence numbers only
    /// when it is transactional (librdkafka 2.0.2, and still today). When a request with an uncertain outcome
    /// (`REQUEST_TIMED_OUT`) is overtaken by a later request that succeeds, librdkafka concludes that the
    /// first one was written — right against a real broker, which refuses a sequence gap — and reports its
    /// records delivered although the mock never stored them. A producer that must lose nothing under
    /// injected produce errors needs `max.in.flight.requests.per.connection=1`.
    package func pushRequestErrors(_ api: APIKey, _ errors: [KafkaResponseCode]) {
        let raw = errors.map(\.raw)
        raw.withUnsafeBufferPointer { buffer in
            cluster.with { rd_kafka_mock_push_request_errors_array($0, api.rawValue, buffer.count, buffer.baseAddress) }
        }
    }

    /// Forgets queued request errors for `api`.
    package func clearRequestErrors(_ api: APIKey) {
        cluster.with { rd_kafka_mock_clear_request_errors($0, api.rawValue) }
    }

    /// Makes `brokerID` the leader of a partition (e.g. to fail over away from a downed broker).
    package func setPartitionLeader(topic: String, partition: Int32, brokerID: Int32) throws {
        try check(cluster.with { rd_kafka_mock_partition_set_leader($0, topic, partition, brokerID) },
                  "move leader of \(topic)[\(partition)] to broker \(brokerID)")
    }

    /// Makes metadata requests report `error` for the topic (e.g. `.unknownTopicOrPartition`);
    /// `.noError` clears it.
    package func setTopicError(_ topic: String, _ error: KafkaResponseCode) {
        cluster.with { rd_kafka_mock_topic_set_error($0, topic, error.raw) }
    }

    /// Makes `brokerID` the coordinator of a consumer group.
    package func setGroupCoordinator(group: String, brokerID: Int32) throws {
        try check(cluster.with { rd_kafka_mock_coordinator_set($0, "group", group, brokerID) },
                  "set coordinator of group \(group)")
    }

    private func check(_ error: rd_kafka_resp_err_t, _ what: String) throws {
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(code: .mockCluster, rawResponse: error,
                             message: "\(what): \(KafkaResponseCode(error).explanation)")
        }
    }
}

/// Owns the `rd_kafka_mock_cluster_t`; destroyed before the handle that hosts it.
// @unchecked Sendable: the pointer is immutable; librdkafka's mock API posts operations to the cluster's
// own thread and is safe to call from any thread.
final class MockClusterHandle: @unchecked Sendable {
    private let pointer: OpaquePointer
    /// The mock cluster must be destroyed before its rd_kafka_t; holding the owner guarantees the order.
    private let owner: KafkaClient

    init(_ pointer: OpaquePointer, owner: KafkaClient) {
        self.pointer = pointer
        self.owner = owner
    }

    deinit { rd_kafka_mock_cluster_destroy(pointer) }

    func with<T>(_ body: (OpaquePointer) -> T) -> T { body(pointer) }
}
