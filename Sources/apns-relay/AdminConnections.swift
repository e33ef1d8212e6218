import Metrics
import NIOCore
import Synchronization

/// The admin endpoint's series (README.md, "Metrics"), created when the endpoint is bound so that they are
/// exported at 0 from the start.
struct AdminMetrics: Sendable {
    /// Closed, before it sent a complete request, to make room at the connection cap.
    let evicted = Counter(label: "apns_relay_admin_connections_refused_total", dimensions: [("reason", "evicted")])
    /// No complete request and answer within the request timeout.
    let timedOut = Counter(label: "apns_relay_admin_connections_refused_total", dimensions: [("reason", "timeout")])
    /// Request line and headers over the limit, or a request with a body.
    let tooLarge = Counter(label: "apns_relay_admin_connections_refused_total", dimensions: [("reason", "too_large")])
    /// Not an HTTP/1 request.
    let malformed = Counter(label: "apns_relay_admin_connections_refused_total", dimensions: [("reason", "malformed")])
    let open = Gauge(label: "apns_relay_admin_connections")
}

/// The admin endpoint's open connections: the ``AdminConnectionGate`` behind a lock, and its one effect (closing
/// the connection it evicts) run outside the lock.
final class AdminConnections: Sendable {
    private let gate: Mutex<AdminConnectionGate<any Channel>>
    let metrics: AdminMetrics

    init(capacity: Int, metrics: AdminMetrics) {
        gate = Mutex(AdminConnectionGate(capacity: capacity))
        self.metrics = metrics
    }

    /// Counts `channel` as open, closing the connection that makes room for it if the cap is reached.
    /// - Returns: the id to report the connection's answer and close with.
    func admit(_ channel: any Channel) -> Int {
        let (admission, open) = gate.withLock { gate in (gate.opened(channel), gate.openCount) }
        metrics.open.record(open)
        if let evicted = admission.evicted {
            // One evicted after its answer was served (or refused, and counted so) is not counted again.
            if admission.evictedPhase == .awaitingRequest { metrics.evicted.increment() }
            // On the admin loop this closes at once, and the evicted handler's `closed` finds it gone.
            evicted.close(promise: nil)
        }
        return admission.id
    }

    func answered(_ id: Int) { gate.withLock { _ = $0.answered(id) } }

    func closed(_ id: Int) {
        let open = gate.withLock { gate in
            gate.closed(id)
            return gate.openCount
        }
        metrics.open.record(open)
    }
}
