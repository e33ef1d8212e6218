import CoreMetrics
import Synchronization

/// The relay's metrics, named for Prometheus (`apns_relay_*`, seconds for time, `_total` for counters).
/// Backed by whatever `MetricsSystem` the process bootstrapped (swift-prometheus in `apns-relay run`).
struct RelayMetrics: Sendable {
    let consumed = Counter(label: "apns_relay_events_consumed_total")
    let retries = Counter(label: "apns_relay_delivery_retries_total")
    let publishFailures = Counter(label: "apns_relay_producer_delivery_failures_total")
    let removedTokens = Counter(label: "apns_relay_removed_tokens_total")
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

    /// Counters per (outcome, reason), made once: asking the metrics factory per event costs a lock and a
    /// lookup by name and labels.
    private let resultCounters = ResultCounters()

    func result(_ outcome: DeliveryOutcome, reason: String?) {
        resultCounters.counter(outcome, reason ?? "").increment()
    }
}

private final class ResultCounters: Sendable {
    private struct Key: Hashable {
        let outcome: DeliveryOutcome
        let reason: String
    }

    private let counters = Mutex<[Key: Counter]>([:])

    func counter(_ outcome: DeliveryOutcome, _ reason: String) -> Counter {
        counters.withLock { counters in
            let key = Key(outcome: outcome, reason: reason)
            if let counter = counters[key] { return counter }
            let counter = Counter(label: "apns_relay_results_total", dimensions: [("outcome", outcome.rawValue), ("reason", reason)])
            counters[key] = counter
            return counter
        }
    }
}
