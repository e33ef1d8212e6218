/// Where a consumer group starts when it has no committed offset for a partition (`auto.offset.reset`).
public struct KafkaAutoOffsetReset: Hashable, Sendable {
    public let rawValue: String
    private init(_ rawValue: String) { self.rawValue = rawValue }
    public static let earliest = Self("earliest")
    public static let latest = Self("latest")
    /// Fail (an error event) instead of guessing.
    public static let error = Self("error")
}

/// `partition.assignment.strategy`: one or more assignors of the same rebalance protocol.
///
/// Both protocols are supported by ``KafkaConsumer``'s rebalance handling: eager assignors (range,
/// roundrobin) revoke everything on every rebalance; cooperative-sticky revokes only what moves.
public struct KafkaPartitionAssignmentStrategy: Hashable, Sendable, CustomStringConvertible {
    /// The assignor names, in preference order, as librdkafka spells them.
    public let assignors: [String]
    public init(assignors: [String]) { self.assignors = assignors }

    public static let range = Self(assignors: ["range"])
    public static let roundRobin = Self(assignors: ["roundrobin"])
    public static let cooperativeSticky = Self(assignors: ["cooperative-sticky"])

    /// Whether this strategy uses the cooperative (incremental) protocol.
    public var isCooperative: Bool { assignors.contains("cooperative-sticky") }

    public var description: String { assignors.joined(separator: ",") }

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
public struct KafkaHeader: Hashable, Sendable {
    public var name: String
    public var value: [UInt8]?
    public init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }
}

/// A topic and a partition.
public struct KafkaTopicPartition: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32
    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }
    public var description: String { "\(topic)[\(partition)]" }
    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.topic, lhs.partition) < (rhs.topic, rhs.partition)
    }
}

extension Duration {
    /// Whole milliseconds, rounded up so that a short positive duration never becomes 0 ("don't wait").
    var kafkaMilliseconds: Int {
        let (seconds, attoseconds) = components
        let millis = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        let remainder = attoseconds % 1_000_000_000_000_000
        return Int(clamping: remainder > 0 ? millis + 1 : millis)
    }
}
