import Metrics

/// swift-metrics instruments of one client; labels start with `apns_client_`.
struct ClientMetrics: Sendable {
    let requests = Counter(label: "apns_client_requests_total")
    let latency = Metrics.Timer(label: "apns_client_request_duration_seconds")
    let transportFailures = Counter(label: "apns_client_transport_failures_total")
    let transparentResends = Counter(label: "apns_client_transparent_resends_total")
    let connectionsOpening = Counter(label: "apns_client_connections_opening_total")
    let connectionsOpened = Counter(label: "apns_client_connections_opened_total")
    let connectionsClosed = Counter(label: "apns_client_connections_closed_total")
    let connectFailures = Counter(label: "apns_client_connect_failures_total")
    let goaways = Counter(label: "apns_client_goaway_total")
    let tokenRotations = Counter(label: "apns_client_token_rotations_total")
    let connectionsConnecting = Gauge(label: "apns_client_connections", dimensions: [("state", "connecting")])
    let connectionsReady = Gauge(label: "apns_client_connections", dimensions: [("state", "ready")])
    let connectionsDraining = Gauge(label: "apns_client_connections", dimensions: [("state", "draining")])
    let streamsInUse = Gauge(label: "apns_client_streams_in_use")
    /// The adaptive limit on requests in flight (per pool; the last pool to change it reports).
    let concurrencyLimit = Gauge(label: "apns_client_concurrency_limit")
    /// Requests that waited for the limit or a stream.
    let queuedForLimit = Counter(label: "apns_client_requests_queued_total")

    func response(_ response: APNsResponseSummary) {
        Counter(label: "apns_client_responses_total", dimensions: [("status", response.status), ("reason", response.reason)]).increment()
    }
}

struct APNsResponseSummary {
    let status: String
    let reason: String
}
