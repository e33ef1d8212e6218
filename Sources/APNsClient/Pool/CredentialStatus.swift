import APNsCore
import Logging
import Metrics
import ServiceSupport
import Synchronization

/// Whether APNs refuses one credential in one environment (a pool's): the gauge
/// `apns_client_credential_refused{credential,environment}` (1 from a refusal of the credential itself,
/// 0 again from the next accepted push) and an error log line at most once a minute, naming both.
///
/// A refused credential is a configuration problem, not an outage: the relay stays up and ready (its
/// events get results with the reason), and this says which credential to fix.
final class CredentialStatus: Sendable {
    private let credential: String
    private let environment: APNsEnvironment
    private let logger: Logger
    private let gauge: Gauge
    private let refusedNow = Atomic<Bool>(false)
    private let throttle = LogThrottle(interval: .seconds(60))

    init(credential: String, environment: APNsEnvironment, logger: Logger) {
        self.credential = credential
        self.environment = environment
        self.logger = logger
        gauge = Gauge(label: "apns_client_credential_refused", dimensions: [("credential", credential), ("environment", environment.rawValue)])
        gauge.record(0)
    }

    /// Reads an answer: a refusal of the credential sets the gauge (and logs); a 200 clears it. `now` (the
    /// log's throttle) is read only for a refusal: an accepted push costs no clock read.
    func answered(_ response: APNsResponse, now: MonotonicInstant? = nil) {
        if response.status == 200 {
            // One relaxed load per accepted push; the exchange only when it was refused.
            if refusedNow.load(ordering: .relaxed), refusedNow.exchange(false, ordering: .relaxed) { gauge.record(0) }
            return
        }
        guard response.status == 403, let reason = response.reason, reason.refusesCredential else { return }
        if !refusedNow.exchange(true, ordering: .relaxed) { gauge.record(1) }
        // One line a minute for the pool, whatever the reason: the reason is in the line.
        guard let suppressed = throttle.admit("refused", now: now ?? .now) else { return }
        var metadata: Logger.Metadata = ["credential": "\(credential)", "apns.environment": "\(environment.rawValue)", "reason": "\(reason)"]
        if suppressed > 0 { metadata["suppressed"] = "\(suppressed)" }
        logger.error("APNs refuses credential '\(credential)' in the \(environment.rawValue) environment: 403 \(reason) — \(Self.hint(reason))", metadata: metadata)
    }

    private static func hint(_ reason: APNsReason) -> String {
        switch reason {
        case .badEnvironmentKeyInToken, .badEnvironmentKeyIdInToken:
            "its signing key is restricted to the other environment in Apple's developer account; scope the credential to the environment its key is for (its environments key) and give this environment a credential with a key of its own"
        case .invalidProviderToken:
            "the key id, team id or signing key does not match a key of the team in Apple's developer account, or the key does not cover this bundle id"
        case .missingProviderToken:
            "no provider token was sent: the credential needs token authentication (or a client certificate)"
        case .badCertificate, .badCertificateEnvironment:
            "the client certificate is not valid for this environment or has been revoked"
        default:
            "check the credential"
        }
    }
}
