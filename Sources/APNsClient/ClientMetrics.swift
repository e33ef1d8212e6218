import APNsCore
import Metrics

/// swift-metrics instruments of one connection pool (one credential in one environment); labels start
/// with `apns_client_` and carry the dimensions `credential` and `environment` — bounded: credential names
/// come from the configuration, environments are two, lanes two; never topics or tokens.
struct ClientMetrics: Sendable {
    let requests: Counter
    let latency: Metrics.Timer
    let transportFailures: Counter
    let transparentResends: Counter
    let connectionsOpening: Counter
    let connectionsOpened: Counter
    let connectionsClosed: Counter
    let connectFailures: Counter
    let goaways: Counter
    let tokenRotations: Counter
    let connectionsConnecting: Gauge
    let connectionsReady: Gauge
    let connectionsDraining: Gauge
    let streamsInUse: Gauge
    /// The adaptive limit on requests in flight.
    let concurrencyLimit: Gauge
    /// Requests that waited for the limit or a stream.
    let queuedForLimit: Counter
    /// `apns_client_requests_waiting{lane}` and `apns_client_requests_in_flight{lane}`: requests waiting for
    /// a connection, the limit or bulk's cap, and requests on a stream, by `DeliveryLane` (two values).
    let urgentWaiting: Gauge
    let bulkWaiting: Gauge
    let urgentInFlight: Gauge
    let bulkInFlight: Gauge
    /// `apns_client_responses_total` for 200 (the answer to nearly every request): made once, not per answer.
    private let accepted: Counter
    private let dimensions: [(String, String)]

    init(credential: String, environment: String) {
        let d = [("credential", credential), ("environment", environment)]
        dimensions = d
        requests = Counter(label: "apns_client_requests_total", dimensions: d)
        latency = Metrics.Timer(label: "apns_client_request_duration_seconds", dimensions: d)
        transportFailures = Counter(label: "apns_client_transport_failures_total", dimensions: d)
        transparentResends = Counter(label: "apns_client_transparent_resends_total", dimensions: d)
        connectionsOpening = Counter(label: "apns_client_connections_opening_total", dimensions: d)
        connectionsOpened = Counter(label: "apns_client_connections_opened_total", dimensions: d)
        connectionsClosed = Counter(label: "apns_client_connections_closed_total", dimensions: d)
        connectFailures = Counter(label: "apns_client_connect_failures_total", dimensions: d)
        goaways = Counter(label: "apns_client_goaway_total", dimensions: d)
        tokenRotations = Counter(label: "apns_client_token_rotations_total", dimensions: d)
        connectionsConnecting = Gauge(label: "apns_client_connections", dimensions: d + [("state", "connecting")])
        connectionsReady = Gauge(label: "apns_client_connections", dimensions: d + [("state", "ready")])
        connectionsDraining = Gauge(label: "apns_client_connections", dimensions: d + [("state", "draining")])
        streamsInUse = Gauge(label: "apns_client_streams_in_use", dimensions: d)
        concurrencyLimit = Gauge(label: "apns_client_concurrency_limit", dimensions: d)
        queuedForLimit = Counter(label: "apns_client_requests_queued_total", dimensions: d)
        urgentWaiting = Gauge(label: "apns_client_requests_waiting", dimensions: d + [("lane", DeliveryLane.urgent.rawValue)])
        bulkWaiting = Gauge(label: "apns_client_requests_waiting", dimensions: d + [("lane", DeliveryLane.bulk.rawValue)])
        urgentInFlight = Gauge(label: "apns_client_requests_in_flight", dimensions: d + [("lane", DeliveryLane.urgent.rawValue)])
        bulkInFlight = Gauge(label: "apns_client_requests_in_flight", dimensions: d + [("lane", DeliveryLane.bulk.rawValue)])
        accepted = Counter(label: "apns_client_responses_total", dimensions: d + [("status", "200"), ("reason", "")])
    }

    /// Publishes the pool's requests by lane.
    func record(_ lanes: ConnectionPool.Machine.LaneCounts) {
        urgentWaiting.record(lanes.urgentWaiting)
        bulkWaiting.record(lanes.bulkWaiting)
        urgentInFlight.record(lanes.urgentInFlight)
        bulkInFlight.record(lanes.bulkInFlight)
    }

    func response(_ response: APNsResponseSummary) {
        if response.status == "200" && response.reason.isEmpty { return accepted.increment() }
        Counter(label: "apns_client_responses_total", dimensions: dimensions + [("status", response.status), ("reason", response.reason)]).increment()
    }
}

struct APNsResponseSummary {
    let status: String
    let reason: String
}
