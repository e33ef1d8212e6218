import APNsCore

/// What the relay pipeline needs to know; the CLI builds it from file, environment and flags.
public struct RelayConfiguration: Sendable {
    /// Kafka topics the relay reads and writes.
    public struct Topics: Sendable, Hashable {
        /// Input topics carrying notification events.
        public var input: [String]
        /// One result record per event.
        public var results: String
        /// Removed-token records (410, BadDeviceToken), keyed by device token.
        public var removedTokens: String
        /// Dead letters: the original bytes of events that could not be read or sent.
        public var deadLetters: String

        public init(input: [String], results: String, removedTokens: String, deadLetters: String) {
            self.input = input
            self.results = results
            self.removedTokens = removedTokens
            self.deadLetters = deadLetters
        }
    }

    public var topics: Topics
    /// Events larger than this are refused unparsed, as `invalid` (capped at `EventDecoder.maxEventBytes`).
    public var maxEventBytes: Int = 64 * 1024
    /// The largest dead-letter value sent; a larger original is cut and the cut said in a header.
    public var maxDeadLetterBytes: Int = 900 * 1024
    public var retry = RetryPolicy()
    /// How long one APNs request may wait for its response.
    public var requestTimeout: Duration = .seconds(10)
    /// Bounds on events in flight; partitions pause above them and resume below half.
    public var inFlight = InFlightGate.Limits()
    /// On SIGTERM: how long in-flight events may take to finish before the rest is abandoned (and redone
    /// by the next owner). Keep it below Kubernetes' termination grace period.
    public var drainTimeout: Duration = .seconds(20)
    /// On a rebalance: how long revoked partitions' in-flight events may take before they are abandoned.
    /// Keep it below the consumer's `revocationDrainTimeout`.
    public var revocationDrainTimeout: Duration = .seconds(10)
    /// Pause between attempts to publish a record Kafka refused (publishing is retried until it works or
    /// the relay shuts down: a result is never dropped).
    public var publishRetryBackoff: Duration = .seconds(1)
    /// Records waiting this long with none acknowledged make the relay unready (`/readyz`): results are stuck.
    public var publishStallTimeout: Duration = .seconds(30)
    /// When BadDeviceToken answers are too many to be believed, and their removed-token records are withheld
    /// (see `TokenRemovalGuard`). 410 removals are always published.
    public var tokenRemoval = TokenRemovalGuard.Configuration()

    public init(topics: Topics) {
        self.topics = topics
    }
}
