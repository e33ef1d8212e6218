import APNsCore
import CoreMetrics
import RelayContract
import ServiceSupport
import Synchronization

/// The relay's metrics, named for Prometheus (`apns_relay_*`, seconds for time, `_total` for counters).
/// Backed by whatever `MetricsSystem` the process bootstrapped (swift-prometheus in `apns-relay run`).
struct RelayMetrics: Sendable {
    let consumed = Counter(label: "apns_relay_events_consumed_total")
    let retries = Counter(label: "apns_relay_delivery_retries_total")
    /// Resends after an attempt APNs may have received (timed out or connection lost after sending).
    let possibleDuplicatePushes = Counter(label: "apns_relay_possible_duplicate_pushes_total")
    let publishFailures = Counter(label: "apns_relay_producer_delivery_failures_total")
    let removedTokens = Counter(label: "apns_relay_removed_tokens_total")
    let removedChannels = Counter(label: "apns_relay_removed_channels_total")
    let deadLetters = Counter(label: "apns_relay_dead_letters_total")
    let inFlight = Gauge(label: "apns_relay_events_in_flight")
    let inFlightBytes = Gauge(label: "apns_relay_events_in_flight_bytes")
    let pausedPartitions = Gauge(label: "apns_relay_paused_partitions")
    let assignedPartitions = Gauge(label: "apns_relay_assigned_partitions")
    /// Records Kafka refused for good and that were published in their smaller form instead.
    let recordsReplaced = Counter(label: "apns_relay_records_replaced_total")
    /// Deliveries in a row that could not open an APNs connection (0 after any APNs answer).
    let connectFailureStreak = Gauge(label: "apns_relay_apns_connect_failure_streak")
    /// From consume to result durable in Kafka.
    let latency = Timer(label: "apns_relay_event_latency_seconds", preferredDisplayUnit: .seconds)

    /// Each lane's series (`lane` dimension: `urgent`, `bulk`).
    let lanes = LaneMetrics()

    /// Counters per (outcome, reason), made once: asking the metrics factory per event costs a lock and a
    /// lookup by name and labels.
    private let resultCounters = ResultCounters { Counter(label: "apns_relay_results_total", dimensions: $0) }
    /// Broadcast events' results again, on their own: a few broadcasts reach millions of devices, so their
    /// failures must not drown in the device pushes' counts.
    private let broadcastCounters = ResultCounters { Counter(label: "apns_relay_broadcast_results_total", dimensions: $0) }

    func result(_ outcome: DeliveryOutcome, reason: String?, broadcast: Bool) {
        resultCounters.counter(outcome, reason ?? "").increment()
        if broadcast { broadcastCounters.counter(outcome, reason ?? "").increment() }
    }
}

/// Exactly-once mode's transactions (`kafka.exactlyOnce`).
struct TransactionMetrics: Sendable {
    let committed = Counter(label: "apns_relay_transactions_total", dimensions: [("outcome", "committed")])
    /// Aborted and redone (their records went into the next transaction).
    let aborted = Counter(label: "apns_relay_transactions_total", dimensions: [("outcome", "aborted")])
    /// The producer was fenced (another instance with the same transactional id): the relay stops.
    let fenced = Counter(label: "apns_relay_transactions_total", dimensions: [("outcome", "fenced")])
    /// From begin to commit, for committed transactions.
    let duration = Timer(label: "apns_relay_transaction_duration_seconds", preferredDisplayUnit: .seconds)
    /// Records in committed transactions (per transaction: divide by the committed count).
    let records = Counter(label: "apns_relay_transaction_records_total")
    let recordsReplaced = Counter(label: "apns_relay_records_replaced_total")
}

/// `TokenRemovalGuard`'s series per (credential, environment), made once each (see `ResultCounters`): in a
/// misconfiguration storm every event's removal is withheld.
final class TokenRemovalGuardMetrics: Sendable {
    private struct Series {
        let withheld: Counter
        let tripped: Gauge
    }

    private let all = BlockingMutex<[TokenRemovalGuard.Key: Series]>([:])

    /// A BadDeviceToken removal the guard withheld.
    func removalWithheld(_ key: TokenRemovalGuard.Key) {
        series(key).withheld.increment()
    }

    /// 1 while the guard of `key` is tripped, else 0.
    func guardTripped(_ key: TokenRemovalGuard.Key, _ tripped: Bool) {
        series(key).tripped.record(tripped ? 1 : 0)
    }

    private func series(_ key: TokenRemovalGuard.Key) -> Series {
        all.withLock { series in
            if let existing = series[key] { return existing }
            let dimensions = [("credential", key.credential), ("environment", key.environment.rawValue)]
            let made = switch key.targets {
            case .deviceTokens:
                Series(
                    withheld: Counter(label: "apns_relay_removed_tokens_suppressed_total", dimensions: dimensions),
                    tripped: Gauge(label: "apns_relay_token_removal_guard_tripped", dimensions: dimensions)
                )
            case .channels:
                Series(
                    withheld: Counter(label: "apns_relay_removed_channels_suppressed_total", dimensions: dimensions),
                    tripped: Gauge(label: "apns_relay_channel_removal_guard_tripped", dimensions: dimensions)
                )
            }
            series[key] = made
            return made
        }
    }
}

private final class ResultCounters: Sendable {
    private struct Key: Hashable {
        let outcome: DeliveryOutcome
        let reason: String
    }

    private let make: @Sendable ([(String, String)]) -> Counter
    private let counters = BlockingMutex<[Key: Counter]>([:])

    init(make: @escaping @Sendable ([(String, String)]) -> Counter) {
        self.make = make
    }

    func counter(_ outcome: DeliveryOutcome, _ reason: String) -> Counter {
        counters.withLock { counters in
            let key = Key(outcome: outcome, reason: reason)
            if let counter = counters[key] { return counter }
            let counter = make([("outcome", outcome.rawValue), ("reason", reason)])
            counters[key] = counter
            return counter
        }
    }
}

/// The series of each lane, made once.
struct LaneMetrics: Sendable {
    struct Lane: Sendable {
        /// Events admitted and not finished.
        let inFlight: Gauge
        /// Events received from Kafka and waiting in the consumer's buffer (sampled per batch taken).
        let waiting: Gauge
        /// 1 while the in-flight gate holds the lane's intake.
        let held: Gauge
        /// From consume to result durable in Kafka.
        let latency: Timer

        init(_ lane: DeliveryLane) {
            let dimensions = [("lane", lane.rawValue)]
            inFlight = Gauge(label: "apns_relay_lane_events_in_flight", dimensions: dimensions)
            waiting = Gauge(label: "apns_relay_lane_events_waiting", dimensions: dimensions)
            held = Gauge(label: "apns_relay_lane_intake_held", dimensions: dimensions)
            latency = Timer(label: "apns_relay_lane_event_latency_seconds", dimensions: dimensions, preferredDisplayUnit: .seconds)
        }
    }

    let urgent = Lane(.urgent)
    let bulk = Lane(.bulk)

    subscript(lane: DeliveryLane) -> Lane { lane == .urgent ? urgent : bulk }
}
