import APNsCore

/// The one call the relay makes to APNs (a completion, not an `async` call: the relay keeps thousands of
/// deliveries in flight without a task each). `APNsClient` conforms; the seam lets the delivery loop be read
/// (and reasoned about) without the transport.
package protocol NotificationSender: Sendable {
    /// Sends one notification; `completion` runs once with APNs' answer, or with an error whose
    /// `transportFailure` says why no answer came (see `TransportFailureError`).
    ///
    /// `completion` may run on any thread, including the caller's: it must not block.
    func send(
        _ notification: APNsNotification, deadline: ContinuousClock.Instant,
        completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    )

    /// How pushes to `topic` (an `apns-topic`) would authenticate, or `nil` when no credential covers it.
    /// Decides the pre-send rules (some push types need a certificate, some a token).
    func authentication(forTopic topic: String) -> AuthenticationKind?

    /// The name of the credential that sends pushes to `topic`. `TokenRemovalGuard` counts answers per
    /// (credential, environment): one misconfigured credential must not hide behind another's traffic.
    func credentialName(forTopic topic: String) -> String

    /// Sends nothing more that has not gone out yet: waiting requests, and later ones, end without being
    /// sent (`.notSent`); those already sent finish. Irrevocable.
    func holdUnsentRequests()
}

extension NotificationSender {
    /// A sender with one credential.
    package func credentialName(forTopic topic: String) -> String { "default" }
    /// A sender that queues nothing has nothing to hold.
    package func holdUnsentRequests() {}
}

/// An error that may carry why a request got no APNs response. Errors that do not conform, or carry no
/// failure, are treated as `.connectionLost` (retriable; whether APNs delivered is unknown).
package protocol TransportFailureError: Error {
    var transportFailure: TransportFailure? { get }
    /// What happened, for the operator (e.g. "cannot resolve api.push.apple.com: …", "TLS handshake with … failed").
    var message: String { get }
}
