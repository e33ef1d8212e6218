import CRdKafka

/// An error from the Kafka layer: what failed (``Code``), librdkafka's response code when there is one,
/// librdkafka's own message, and whether retrying can help.
package struct KafkaError: Error, Sendable, CustomStringConvertible {
    /// What kind of operation failed. Extensible: new codes may be added, so `switch` with a `default`.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Backing: String, Hashable, Sendable {
            case configuration
            case clientCreation
            case subscription
            case delivery
            case enqueue
            case offsetStore
            case offsetCommit
            case partitionControl
            case rebalance
            case broker
            case fatal
            case closed
            case timedOut
            case mockCluster
            case transaction
        }

        private let backing: Backing
        private init(_ backing: Backing) { self.backing = backing }

        /// A property was rejected by librdkafka, or our typed settings contradict each other.
        package static let configuration = Code(.configuration)
        /// `rd_kafka_new` failed.
        package static let clientCreation = Code(.clientCreation)
        /// Subscribing to topics failed.
        package static let subscription = Code(.subscription)
        /// The broker (or librdkafka) reported the message as not delivered.
        package static let delivery = Code(.delivery)
        /// The message could not even be queued for sending (queue full, unknown topic, too large, …).
        package static let enqueue = Code(.enqueue)
        /// Storing a consumed offset failed (e.g. the partition is no longer assigned).
        package static let offsetStore = Code(.offsetStore)
        /// Committing offsets failed.
        package static let offsetCommit = Code(.offsetCommit)
        /// Pausing or resuming partitions failed.
        package static let partitionControl = Code(.partitionControl)
        /// Applying a rebalance (assign / unassign) failed.
        package static let rebalance = Code(.rebalance)
        /// An error librdkafka raised through its error callback (connectivity, authentication, …).
        package static let broker = Code(.broker)
        /// The client hit a fatal error (e.g. the idempotent producer lost its guarantees); recreate it.
        package static let fatal = Code(.fatal)
        /// The client is closed or closing.
        package static let closed = Code(.closed)
        /// A deadline passed.
        package static let timedOut = Code(.timedOut)
        /// A mock cluster operation failed.
        package static let mockCluster = Code(.mockCluster)
        /// A transaction step failed (init, begin, sending offsets, commit, abort); see `requiresAbort`,
        /// `isRetriable` and `isFatal` (a fenced producer's errors are fatal).
        package static let transaction = Code(.transaction)

        package var description: String { backing.rawValue }
    }

    /// What kind of operation failed.
    package var code: Code
    /// librdkafka's `rd_kafka_resp_err_t`, when the failure came with one.
    package var responseCode: KafkaResponseCode?
    /// Human-readable detail, normally librdkafka's own error string.
    package var message: String
    /// Whether the same operation may succeed if retried.
    package var isRetriable: Bool
    /// Whether the client instance is unusable from now on.
    package var isFatal: Bool
    /// Whether the broker refused who the client says it is: SASL credentials, or a TLS certificate. Retrying
    /// with the same secret cannot help.
    package var refusesCredentials: Bool {
        guard let responseCode else { return false }
        if responseCode == .ssl || responseCode == .saslAuthenticationFailed { return true }
        // librdkafka 2.x reports a connection lost during the SASL handshake as `_AUTHENTICATION` too ("SASL
        // SCRAM-SHA-256 mechanism handshake failed: Local: Broker transport failure"): the broker judged nothing.
        if responseCode == .authentication { return !Self.transportFailures.contains { message.contains($0) } }
        // With TLS 1.3 the client's handshake is over before the broker has judged its certificate: the
        // broker's refusal arrives as a TLS alert on the first read, which librdkafka reports as a transport
        // failure ("Receive failed: …: tlsv13 alert certificate required"). OpenSSL names the alert.
        return responseCode == .brokerTransport && Self.certificateAlerts.contains { message.contains($0) }
    }

    /// librdkafka's texts (`rd_kafka_err2str`) of the local failures a SASL handshake can end with before any verdict.
    private static let transportFailures = ["Local: Broker transport failure", "Local: Timed out", "Local: Broker handle destroyed"]
    /// OpenSSL's texts of the TLS alerts a server sends when it refuses a client's certificate (or its lack).
    private static let certificateAlerts = [
        "alert certificate required", "alert bad certificate", "alert unknown ca", "alert certificate expired",
        "alert certificate revoked", "alert certificate unknown", "alert unsupported certificate", "alert access denied",
    ]
    /// Whether the current transaction must be aborted before the producer can go on (an abortable
    /// transaction error).
    package var requiresAbort: Bool

    package init(
        code: Code,
        responseCode: KafkaResponseCode? = nil,
        message: String,
        isRetriable: Bool? = nil,
        isFatal: Bool = false,
        requiresAbort: Bool = false
    ) {
        self.code = code
        self.responseCode = responseCode
        self.message = message
        self.isRetriable = isRetriable ?? responseCode?.isRetriable ?? false
        self.isFatal = isFatal
        self.requiresAbort = requiresAbort
    }

    package var description: String {
        var text = "KafkaError(\(code)"
        if let responseCode { text += ", \(responseCode.name)" }
        text += ": \(message)"
        if isFatal { text += ", fatal" } else if requiresAbort { text += ", abort the transaction" } else if isRetriable { text += ", retriable" }
        return text + ")"
    }
}

extension KafkaError {
    /// What a failed send means for the record, so that callers neither retry forever what can never be
    /// accepted nor give up on what a retry would deliver.
    package enum SendFailure: Sendable, Hashable {
        /// Transport trouble, timeouts, leader changes, a full queue: the same record may go through later.
        case retriable
        /// Kafka refuses this record for good (too large, invalid — e.g. a null key on a compacted topic):
        /// send a smaller or corrected record instead, never the same one again.
        case recordRejected
        /// The client is unusable (e.g. the idempotent producer lost its guarantees): recreate it.
        case fatal
        /// The producer is closed or withdrew its records (shutting down).
        case closed
    }

    package var sendFailure: SendFailure {
        if isFatal || responseCode == .fatal { return .fatal }
        if code == .closed || responseCode == .purgedInQueue || responseCode == .purgedInFlight { return .closed }
        if let responseCode, KafkaResponseCode.rejectingRecord.contains(responseCode) { return .recordRejected }
        return .retriable
    }

    /// Builds an error from a librdkafka response code, using librdkafka's description as the message
    /// unless one is given.
    package init(code: Code, rawResponse: rd_kafka_resp_err_t, message: String? = nil) {
        let response = KafkaResponseCode(rawValue: rawResponse.rawValue)
        self.init(code: code, responseCode: response, message: message ?? response.explanation,
                  isFatal: rawResponse == RD_KAFKA_RESP_ERR__FATAL)
    }

    /// Builds an error from an `rd_kafka_error_t`, taking its retriable/fatal flags, and destroys it.
    /// Ownership: the caller hands `error` over; it must not be used afterwards.
    init(code: Code, consuming error: OpaquePointer) {
        defer { rd_kafka_error_destroy(error) }
        let response = KafkaResponseCode(rawValue: rd_kafka_error_code(error).rawValue)
        let message = rd_kafka_error_string(error).map { String(cString: $0) } ?? response.explanation
        self.init(code: code, responseCode: response, message: message,
                  isRetriable: rd_kafka_error_is_retriable(error) != 0,
                  isFatal: rd_kafka_error_is_fatal(error) != 0,
                  requiresAbort: rd_kafka_error_txn_requires_abort(error) != 0)
    }

    static func closed(_ what: String) -> KafkaError {
        KafkaError(code: .closed, message: what, isRetriable: false)
    }
}
