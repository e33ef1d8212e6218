import APNsCore
import Kafka

/// What the relay pipeline needs to know; the CLI builds it from file, environment and flags.
package struct RelayConfiguration: Sendable {
    /// Kafka topics the relay reads and writes.
    package struct Topics: Sendable, Hashable {
        /// Input topics carrying notification events: the bulk lane.
        package var input: [String]
        /// Input topics whose events form the urgent lane (`kafka.topics.urgent`): they go before bulk events
        /// wherever events wait, and have a share of the in-flight budget bulk cannot take.
        package var urgent: [String] = []
        /// One result record per event.
        package var results: String
        /// Removed-token records (410, BadDeviceToken), keyed by device token.
        package var removedTokens: String
        /// Removed-channel records (ChannelNotRegistered answers to broadcasts), keyed by channel id.
        package var removedChannels: String
        /// Dead letters: the original bytes of events that could not be read or sent.
        package var deadLetters: String

        package init(input: [String], results: String, removedTokens: String, removedChannels: String = Topics.defaults.removedChannels, deadLetters: String) {
            self.input = input
            self.results = results
            self.removedTokens = removedTokens
            self.removedChannels = removedChannels
            self.deadLetters = deadLetters
        }

        /// The topics a relay uses unless configured otherwise.
        package static let defaults = Topics(
            input: ["apns-notifications"], results: "apns-results", removedTokens: "apns-removed-tokens",
            removedChannels: "apns-removed-channels", deadLetters: "apns-dead-letters"
        )

        /// The topics the relay writes.
        package var outputs: [String] { [results, removedTokens, removedChannels, deadLetters] }

        /// Every topic the relay reads: bulk, then urgent.
        package var inputs: [String] { input + urgent }
    }

    package var topics: Topics
    /// Events larger than this are refused unparsed, as `invalid` (capped at `EventDecoder.maxEventBytes`).
    package var maxEventBytes: Int = 64 * 1024
    /// Events whose Kafka timestamp is older than this when consumed are answered `expired` unsent
    /// (`relay.maxEventAgeMs`); `nil`: any age. A new consumer group starts at the oldest retained event, which
    /// may be days old.
    package var maxEventAge: Duration?
    /// The largest dead-letter value sent; a larger original is cut and the cut said in a header.
    package var maxDeadLetterBytes: Int = 900 * 1024
    package var retry = RetryPolicy()
    /// How long one APNs request may wait for its response.
    package var requestTimeout: Duration = .seconds(10)
    /// Bounds on events in flight (and the urgent lane's share of them); intake is held above them and
    /// resumes below half.
    package var inFlight = InFlightGate.Limits()

    /// How much of an event's headers the consumer copies: at most 128 headers, and no more of their bytes
    /// than an event may have in all (`maxEventBytes`). An event with more is refused as too large, from what
    /// was counted, and its headers stay out of its dead letter: thousands of tiny headers would otherwise
    /// cost far more memory than their bytes, each an object or two.
    package var headerLimits: KafkaConsumerConfiguration.HeaderLimits {
        var limits = KafkaConsumerConfiguration.HeaderLimits()
        limits.count = 128
        limits.bytes = min(maxEventBytes, EventDecoder.maxEventBytes)
        return limits
    }

    /// The gate's limits as applied: without urgent topics nothing is reserved for them.
    package var effectiveInFlight: InFlightGate.Limits {
        var limits = inFlight
        if topics.urgent.isEmpty { limits.urgentShare = 0 }
        return limits
    }
    /// On SIGTERM: how long in-flight events may take to finish before the rest is abandoned (and redone
    /// by the next owner). Keep it below Kubernetes' termination grace period.
    package var drainTimeout: Duration = .seconds(20)
    /// On a rebalance: how long revoked partitions' in-flight events may take before they are abandoned.
    /// Keep it below the consumer's `revocationDrainTimeout`.
    package var revocationDrainTimeout: Duration = .seconds(10)
    /// Pause between attempts to publish a record Kafka refused (publishing is retried until it works or
    /// the relay shuts down: a result is never dropped).
    package var publishRetryBackoff: Duration = .seconds(1)
    /// Records waiting this long with none acknowledged make the relay unready (`/readyz`): results are stuck.
    package var publishStallTimeout: Duration = .seconds(30)
    /// When BadDeviceToken answers are too many to be believed, and their removed-token records are withheld
    /// (see `TokenRemovalGuard`). 410 removals are always published.
    package var tokenRemoval = TokenRemovalGuard.Configuration()
    /// Exactly-once results (`kafka.exactlyOnce`): records and offsets in one Kafka transaction per
    /// interval; `nil`: at least once (records published at once, offsets stored and auto-committed).
    package var exactlyOnce: ExactlyOnce?
    /// Who the relay is to Kafka (mechanism and user, never a secret) and the keys that say so: what the
    /// relay names when a broker refuses its credentials.
    package var kafkaIdentity = KafkaIdentity()

    package struct KafkaIdentity: Sendable, Hashable {
        package var summary = "plaintext, no authentication"
        package var keys = "kafka.properties"
        package init() {}
        package init(summary: String, keys: String) {
            self.summary = summary
            self.keys = keys
        }
    }

    package struct ExactlyOnce: Sendable {
        /// `transactional.id`: one per replica, the same across its restarts.
        package var transactionalID: String
        /// How often the finished events' records and offsets are committed (`kafka.transactionIntervalMs`):
        /// what a `read_committed` reader waits for a result, at most, beyond the event's own time.
        package var interval: Duration = .milliseconds(100)
        /// How long the broker keeps a transaction open (`kafka.transactionTimeoutMs`): after a crash, what
        /// holds `read_committed` readers of the output partitions back at most, until the restarted relay
        /// (same transactional id) aborts it at once.
        package var transactionTimeout: Duration = .seconds(60)

        package init(transactionalID: String) {
            self.transactionalID = transactionalID
        }
    }

    package init(topics: Topics) {
        self.topics = topics
    }
}
