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

    /// Whether a credential covers pushes to `topic` (an `apns-topic`) in `environment`, and how they would
    /// authenticate (the pre-send rules depend on it: some push types need a certificate, some a token).
    func coverage(ofTopic topic: String, in environment: APNsEnvironment) -> CredentialCoverage

    /// The name of the credential that sends pushes to `topic` in `environment`. `TokenRemovalGuard` counts
    /// answers per (credential, environment): one misconfigured credential must not hide behind another's.
    func credentialName(forTopic topic: String, in environment: APNsEnvironment) -> String

    /// Every credential's name (for the per-credential series made at start).
    var credentialNames: [String] { get }

    /// Sends nothing more that has not gone out yet: waiting requests, and later ones, end without being
    /// sent (`.notSent`); those already sent finish. Irrevocable.
    func holdUnsentRequests()
}

extension NotificationSender {
    /// A sender with one credential.
    package func credentialName(forTopic topic: String, in environment: APNsEnvironment) -> String { "default" }
    package var credentialNames: [String] { ["default"] }
    /// A sender that queues nothing has nothing to hold.
    package func holdUnsentRequests() {}
}

/// Which credential, if any, sends a (topic, environment).
package enum CredentialCoverage: Sendable, Equatable {
    /// A credential covers it, authenticating so.
    case covered(AuthenticationKind)
    /// No credential covers the topic in this environment; these do in the other (`environments`).
    case otherEnvironmentOnly(credentials: [String])
    /// No credential covers the topic at all.
    case uncovered
}

/// An error that may carry why a request got no APNs response. Errors that do not conform, or carry no
/// failure, are treated as `.connectionLost` (retriable; whether APNs delivered is unknown).
package protocol TransportFailureError: Error {
    var transportFailure: TransportFailure? { get }
    /// What happened, for the operator (e.g. "cannot resolve api.push.apple.com: …", "TLS handshake with … failed").
    var message: String { get }
}
