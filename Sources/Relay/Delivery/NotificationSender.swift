import APNsCore
import ServiceSupport

/// The one call the relay makes to APNs (a completion, not an `async` call: the relay keeps thousands of
/// deliveries in flight without a task each). `APNsClient` conforms; the seam lets the delivery loop be read
/// (and reasoned about) without the transport.
package protocol NotificationSender: Sendable {
    /// Sends one notification; `completion` runs once with APNs' answer, or with an error whose
    /// `transportFailure` says why no answer came (see `TransportFailureError`).
    ///
    /// `completion` may run on any thread, including the caller's: it must not block.
    func send(
        _ notification: APNsNotification, deadline: MonotonicInstant,
        completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    )

    /// As `send(_:deadline:completion:)`, telling `handler` (the event's own object: no closure per request).
    /// The default wraps it in a closure; a sender that can take the object as it is (the APNs client) does.
    /// `now`: the caller's reading of the clock, which `deadline` was computed from (the request's start: the
    /// sender need not read the clock again).
    func send(_ notification: APNsNotification, deadline: MonotonicInstant, now: MonotonicInstant, answeringTo handler: any APNsAnswerHandler)

    /// Sends nothing more that has not gone out yet: waiting requests, and later ones, end without being
    /// sent (`.notSent`); those already sent finish. Irrevocable. (No default: a sender that forgot it would
    /// silently lose "no new pushes while Kafka is unreachable".)
    func holdUnsentRequests()
}

extension NotificationSender {
    package func send(_ notification: APNsNotification, deadline: MonotonicInstant, now: MonotonicInstant, answeringTo handler: any APNsAnswerHandler) {
        send(notification, deadline: deadline) { handler.answered($0) }
    }
}

/// An error that may carry why a request got no APNs response. Errors that do not conform, or carry no
/// failure, are treated as `.connectionLost` (retriable; whether APNs delivered is unknown).
package protocol TransportFailureError: Error {
    var transportFailure: TransportFailure? { get }
    /// What happened, for the operator (e.g. "cannot resolve api.push.apple.com: …", "TLS handshake with … failed").
    var message: String { get }
}
