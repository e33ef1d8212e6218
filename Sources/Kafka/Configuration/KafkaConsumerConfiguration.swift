/// Settings of a ``KafkaConsumer``.
///
/// The typed fields cover what apns-relay uses; ``additionalProperties`` passes any other librdkafka
/// property through (SASL, SSL, fetch tuning, …). A pass-through property that contradicts a typed field or
/// a guarantee of this wrapper is rejected when the consumer is created (``KafkaError/Code/configuration``).
package struct KafkaConsumerConfiguration: Sendable {
    /// `bootstrap.servers`, as `host:port` entries.
    package var bootstrapServers: [String]
    /// `group.id`.
    package var groupID: String
    /// `client.id`.
    package var clientID: String = "apns-relay"
    /// `group.instance.id` (static membership, KIP-345): set, a member that restarts with the same id within
    /// the session timeout takes its old place without a rebalance. Unique per live member; a member with it
    /// does not leave the group on close (the group waits out its session for its partitions).
    package var groupInstanceID: String? = nil
    /// `session.timeout.ms`: how long the group waits for a silent member before evicting it.
    package var sessionTimeout: Duration = .seconds(45)
    /// `heartbeat.interval.ms`; `nil` keeps librdkafka's default (3 s), which must stay below the session
    /// timeout.
    package var heartbeatInterval: Duration? = nil
    /// `max.poll.interval.ms`. Our poll thread keeps polling while partitions are paused, so a slow
    /// application is not evicted by this timer; it only fires if the poll thread itself is stuck.
    package var maxPollInterval: Duration = .seconds(300)
    /// `auto.offset.reset`.
    package var autoOffsetReset: KafkaAutoOffsetReset = .earliest
    /// `partition.assignment.strategy` (the relay's `kafka.assignmentStrategy`). `range` by default:
    /// cooperative-sticky aborts the process on librdkafka < 2.3 when a consumer that never got an assignment
    /// is destroyed (`rd_kafka_sticky_assignor_state_destroy: Assertion 'assignor_state' failed`, librdkafka
    /// #4312; Debian 12 ships 2.0.2).
    package var partitionAssignmentStrategy: KafkaPartitionAssignmentStrategy = .range
    /// `auto.commit.interval.ms`. Auto commit is on, but it only commits offsets the application stored
    /// (`enable.auto.offset.store` is always false). 1 s, not librdkafka's 5 s: after a crash the group
    /// redoes every event stored but not yet committed, so the interval bounds those duplicates, and a
    /// commit a second per member costs the coordinator little.
    package var autoCommitInterval: Duration = .seconds(1)
    /// `enable.auto.commit`. `false` when offsets are committed only through a transactional producer
    /// (``KafkaProducer/sendOffsetsToTransaction(_:groupMetadata:timeout:)``): then nothing is ever
    /// committed by the consumer itself, at close neither.
    package var autoCommit = true
    /// `statistics.interval.ms`; `nil` disables statistics.
    package var statisticsInterval: Duration? = nil
    /// Receives librdkafka's statistics JSON on the poll thread (keep it short).
    package var statisticsHandler: (@Sendable (String) -> Void)? = nil
    /// Receives errors librdkafka reports through its error callback (they are also logged).
    package var errorHandler: (@Sendable (KafkaError) -> Void)? = nil

    /// How many received messages may wait in ``KafkaConsumer/events``. While it is full the poll thread
    /// takes no more records out of librdkafka (their prefetch, bounded by `queued.min.messages` and
    /// `queued.max.messages.kbytes`, holds them) and it takes more once the application has consumed half.
    /// A soft bound: it may be passed by one poll batch (512 records).
    package var bufferCapacity: Int = 2_048
    /// How many bytes of records (their ``KafkaConsumerMessage/footprint``) each lane's buffer may hold: with
    /// large records (header-heavy ones) the count alone would let the buffer hold hundreds of megabytes. A
    /// soft bound like `bufferCapacity`: it may be passed by one poll batch.
    package var bufferBytes: Int = 16 * 1024 * 1024
    /// How many headers of a record are copied, and how many of their bytes; the rest are counted, not copied
    /// (``KafkaConsumerMessage/headersLeftOut``).
    package var headerLimits = HeaderLimits()

    package struct HeaderLimits: Sendable, Hashable {
        package var count = 128
        package var bytes = 64 * 1024
        package init() {}
    }
    /// Topics read in the urgent lane (``KafkaConsumerLane``): their partitions' records are fetched into a
    /// queue of their own, buffered apart (up to `bufferCapacity` more) and handed out before any other
    /// record, so a backlog in the other topics never delays them. Subscribe to them like any other topic.
    package var urgentTopics: Set<String> = []
    /// How long a revocation waits for the application's ``KafkaPartitionRevocation/acknowledge()``
    /// before the partitions are released anyway.
    package var revocationDrainTimeout: Duration = .seconds(15)
    /// How long one blocking `rd_kafka_consumer_poll` on the poll thread may wait.
    package var pollTimeout: Duration = .milliseconds(100)
    /// Whether a drained topic queue's fetcher is woken at once rather than at librdkafka's one-second timer:
    /// on librdkafka 2.3 and later by `fetch.queue.backoff.ms` (`fetchQueueBackoff`), before that by a
    /// `FetchNudger`. Off only to measure what it does.
    package var wakesFetcher = true
    /// `fetch.queue.backoff.ms` where librdkafka has it (2.3+) and `wakesFetcher` is on: how long a full
    /// queue's partition waits before its next fetch, so how late a drained queue is refilled at most.
    package var fetchQueueBackoff: Duration = .milliseconds(20)

    /// Any other librdkafka property, passed through verbatim.
    package var additionalProperties: [String: String] = [:]

    package init(bootstrapServers: [String], groupID: String) {
        self.bootstrapServers = bootstrapServers
        self.groupID = groupID
    }

    /// The librdkafka properties this configuration stands for, after checking for contradictions.
    func librdkafkaProperties() throws(KafkaError) -> [String: String] {
        try partitionAssignmentStrategy.validate()
        if bufferCapacity < 1 || bufferBytes < 1 {
            throw KafkaError(code: .configuration, message: "bufferCapacity and bufferBytes must be at least 1")
        }
        if maxPollInterval < sessionTimeout {
            throw KafkaError(code: .configuration,
                             message: "maxPollInterval (\(maxPollInterval)) must not be below sessionTimeout (\(sessionTimeout))")
        }
        var owned: [String: String] = [
            "bootstrap.servers": bootstrapServers.joined(separator: ","),
            "group.id": groupID,
            "client.id": clientID,
            "session.timeout.ms": String(sessionTimeout.kafkaMilliseconds),
            "max.poll.interval.ms": String(maxPollInterval.kafkaMilliseconds),
            "auto.offset.reset": autoOffsetReset.rawValue,
            "partition.assignment.strategy": partitionAssignmentStrategy.description,
            "enable.auto.commit": autoCommit ? "true" : "false",
            "auto.commit.interval.ms": String(autoCommitInterval.kafkaMilliseconds),
            // The application stores offsets itself once results are durable (at-least-once).
            "enable.auto.offset.store": "false",
            "enable.partition.eof": "false",
        ]
        if let heartbeatInterval {
            owned["heartbeat.interval.ms"] = String(heartbeatInterval.kafkaMilliseconds)
        }
        if let groupInstanceID {
            owned["group.instance.id"] = groupInstanceID
        }
        if let statisticsInterval {
            owned["statistics.interval.ms"] = String(statisticsInterval.kafkaMilliseconds)
        }
        if wakesFetcher, KafkaLibrary.hasFetchQueueBackoff {
            owned["fetch.queue.backoff.ms"] = String(fetchQueueBackoff.kafkaMilliseconds)
        }
        return try KafkaPropertyMerge.merge(
            owned: owned, additional: additionalProperties,
            // Properties whose change would break a guarantee of this wrapper, not just a typed field.
            guarantees: [
                "enable.auto.offset.store": "offsets are stored explicitly with storeOffset, never automatically",
                "enable.auto.commit": "set by autoCommit: auto commit of explicitly stored offsets, or transactions only",
                "enable.partition.eof": "partition EOF events are not surfaced",
            ])
    }
}
