/// Where a consumer group starts when it has no committed offset for a partition (`auto.offset.reset`).
package struct KafkaAutoOffsetReset: Hashable, Sendable {
    package let rawValue: String
    private init(_ rawValue: String) { self.rawValue = rawValue }
    package static let earliest = Self("earliest")
    package static let latest = Self("latest")
    /// Fail (an error event) instead of guessing.
    package static let error = Self("error")
}

/// librdkafka's `partitioner`: the hash that picks a keyed record's partition (records without a key go to a
/// random partition under the `_random` variants, and to one hash of the empty key otherwise).
package struct KafkaPartitioner: Hashable, Sendable, CustomStringConvertible {
    package let rawValue: String
    private init(_ rawValue: String) { self.rawValue = rawValue }
    /// Java's default partitioner: murmur2 of the key, a keyed record lands where a Java producer puts it.
    package static let murmur2Random = Self("murmur2_random")
    package static let murmur2 = Self("murmur2")
    /// librdkafka's default: CRC32 of the key.
    package static let consistentRandom = Self("consistent_random")
    package static let consistent = Self("consistent")
    /// What Sarama, the Go client, uses by default.
    package static let fnv1aRandom = Self("fnv1a_random")
    package static let fnv1a = Self("fnv1a")
    package static let random = Self("random")

    package static let all: [Self] = [.murmur2Random, .murmur2, .consistentRandom, .consistent, .fnv1aRandom, .fnv1a, .random]
    package var description: String { rawValue }
}

/// `partition.assignment.strategy`: one or more assignors of the same rebalance protocol.
///
/// Both protocols are supported by ``KafkaConsumer``'s rebalance handling: eager assignors (range,
/// roundrobin) revoke everything on every rebalance; cooperative-sticky revokes only what moves.
package struct KafkaPartitionAssignmentStrategy: Hashable, Sendable, CustomStringConvertible {
    /// The assignor names, in preference order, as librdkafka spells them.
    package let assignors: [String]
    package init(assignors: [String]) { self.assignors = assignors }

    package static let range = Self(assignors: ["range"])
    package static let roundRobin = Self(assignors: ["roundrobin"])
    package static let cooperativeSticky = Self(assignors: ["cooperative-sticky"])

    /// Whether this strategy uses the cooperative (incremental) protocol.
    package var isCooperative: Bool { assignors.contains("cooperative-sticky") }

    package var description: String { assignors.joined(separator: ",") }

    private static let known: Set<String> = ["range", "roundrobin", "cooperative-sticky"]

    /// Rejects unknown names, an empty list and a mix of eager and cooperative assignors (librdkafka would
    /// otherwise fail later, at the first rebalance).
    func validate() throws(KafkaError) {
        if assignors.isEmpty {
            throw KafkaError(code: .configuration, message: "partition.assignment.strategy is empty")
        }
        for name in assignors where !Self.known.contains(name) {
            throw KafkaError(
                code: .configuration,
                message: "unknown partition assignment strategy '\(name)' (known: range, roundrobin, cooperative-sticky)")
        }
        if isCooperative && assignors.count > 1 {
            throw KafkaError(
                code: .configuration,
                message: "cooperative-sticky cannot be combined with eager assignors: \(description)")
        }
    }
}

/// A record header. Kafka allows repeated names and a null value.
package struct KafkaHeader: Hashable, Sendable {
    package var name: String
    package var value: [UInt8]?
    package init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }
}

/// A topic and a partition.
package struct KafkaTopicPartition: Hashable, Sendable, Comparable, CustomStringConvertible {
    package var topic: String
    package var partition: Int32
    package init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }
    package var description: String { "\(topic)[\(partition)]" }
    package static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.topic, lhs.partition) < (rhs.topic, rhs.partition)
    }
}

extension Duration {
    /// Whole milliseconds, rounded up so that a short positive duration never becomes 0 ("don't wait").
    package var kafkaMilliseconds: Int {
        let (seconds, attoseconds) = components
        let millis = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        let remainder = attoseconds % 1_000_000_000_000_000
        return Int(clamping: remainder > 0 ? millis + 1 : millis)
    }
}
