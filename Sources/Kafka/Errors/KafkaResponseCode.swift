import CRdKafka

/// librdkafka's `rd_kafka_resp_err_t`: Kafka protocol error codes (≥ 0) and librdkafka's local ones (< 0).
///
/// Wrapped so that code outside this module (tests, the relay) need not import the C module. Any raw value
/// is representable; the named constants are the ones we use.
package struct KafkaResponseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package var rawValue: Int32
    package init(rawValue: Int32) { self.rawValue = rawValue }

    package static let noError = Self(RD_KAFKA_RESP_ERR_NO_ERROR)
    package static let unknownTopicOrPartition = Self(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
    package static let leaderNotAvailable = Self(RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE)
    package static let notLeaderForPartition = Self(RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION)
    package static let requestTimedOut = Self(RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT)
    package static let messageSizeTooLarge = Self(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
    package static let notEnoughReplicas = Self(RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS)
    package static let notCoordinator = Self(RD_KAFKA_RESP_ERR_NOT_COORDINATOR)
    package static let coordinatorNotAvailable = Self(RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE)
    package static let rebalanceInProgress = Self(RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS)
    package static let topicAuthorizationFailed = Self(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
    package static let transactionalIDAuthorizationFailed = Self(RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    package static let invalidRecord = Self(RD_KAFKA_RESP_ERR_INVALID_RECORD)
    package static let brokerTransport = Self(RD_KAFKA_RESP_ERR__TRANSPORT)
    /// The client's SASL credentials were refused, or its mechanism could not run (librdkafka's own code).
    package static let authentication = Self(RD_KAFKA_RESP_ERR__AUTHENTICATION)
    /// The TLS handshake failed: a certificate the other side does not trust, or none where one is required.
    package static let ssl = Self(RD_KAFKA_RESP_ERR__SSL)
    /// The broker's answer to a SASL exchange it refused.
    package static let saslAuthenticationFailed = Self(RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED)
    package static let allBrokersDown = Self(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
    package static let messageTimedOut = Self(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
    package static let queueFull = Self(RD_KAFKA_RESP_ERR__QUEUE_FULL)
    package static let unknownPartition = Self(RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)
    package static let timedOut = Self(RD_KAFKA_RESP_ERR__TIMED_OUT)
    package static let purgedInQueue = Self(RD_KAFKA_RESP_ERR__PURGE_QUEUE)
    package static let purgedInFlight = Self(RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
    package static let fatal = Self(RD_KAFKA_RESP_ERR__FATAL)
    package static let state = Self(RD_KAFKA_RESP_ERR__STATE)
    package static let maxPollExceeded = Self(RD_KAFKA_RESP_ERR__MAX_POLL_EXCEEDED)
    package static let recordListTooLarge = Self(RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE)
    package static let invalidTimestamp = Self(RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP)
    package static let outOfOrderSequenceNumber = Self(RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER)

    /// Codes with which Kafka refuses one record for good: retrying the same record cannot succeed.
    static let rejectingRecord: Set<KafkaResponseCode> = [
        .messageSizeTooLarge, .invalidRecord, .recordListTooLarge, .invalidTimestamp,
    ]

    package init(_ raw: rd_kafka_resp_err_t) { self.rawValue = raw.rawValue }

    package var raw: rd_kafka_resp_err_t { rd_kafka_resp_err_t(rawValue: rawValue) }

    /// librdkafka's symbolic name, e.g. `NOT_LEADER_FOR_PARTITION` or `_TRANSPORT`.
    package var name: String { String(cString: rd_kafka_err2name(raw)) }
    /// librdkafka's human-readable description.
    package var explanation: String { String(cString: rd_kafka_err2str(raw)) }
    package var description: String { "\(name) (\(rawValue))" }

    /// Whether an operation that failed with this code may succeed when retried.
    ///
    /// librdkafka exposes retriability only on `rd_kafka_error_t` (used where we get one); delivery reports
    /// and callbacks carry a bare code, so this is the Kafka protocol's list of retriable errors plus
    /// librdkafka's transient local ones.
    package var isRetriable: Bool { Self.retriable.contains(rawValue) }

    private static let retriable: Set<Int32> = [
        RD_KAFKA_RESP_ERR_INVALID_MSG, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
        RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION,
        RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS, RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE,
        RD_KAFKA_RESP_ERR_NOT_COORDINATOR, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
        RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND, RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS,
        RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR, RD_KAFKA_RESP_ERR_FETCH_SESSION_ID_NOT_FOUND,
        RD_KAFKA_RESP_ERR_INVALID_FETCH_SESSION_EPOCH, RD_KAFKA_RESP_ERR_LISTENER_NOT_FOUND,
        RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH, RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH,
        RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_PREFERRED_LEADER_NOT_AVAILABLE,
        RD_KAFKA_RESP_ERR_ELIGIBLE_LEADERS_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_ELECTION_NOT_NEEDED,
        RD_KAFKA_RESP_ERR_THROTTLING_QUOTA_EXCEEDED, RD_KAFKA_RESP_ERR_UNSTABLE_OFFSET_COMMIT,
        RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__MSG_TIMED_OUT,
        RD_KAFKA_RESP_ERR__TIMED_OUT, RD_KAFKA_RESP_ERR__QUEUE_FULL, RD_KAFKA_RESP_ERR__WAIT_COORD,
        RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE, RD_KAFKA_RESP_ERR__RESOLVE,
    ].reduce(into: Set<Int32>()) { $0.insert($1.rawValue) }
}
