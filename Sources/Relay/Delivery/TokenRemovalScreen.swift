import APNsCore
import Logging
import ServiceSupport
import Synchronization

/// `TokenRemovalGuard` behind a lock, with its effects (logs, metrics) run outside it: every delivered
/// event's answer goes through here before its removed-token record is published.
final class TokenRemovalScreen: Sendable {
    private let machine: Mutex<TokenRemovalGuard>
    private let metrics: TokenRemovalGuardMetrics
    private let logger: Logger
    private let window: Duration

    /// - Parameter origin: where the guard's time slices start (the answers' times are counted from it).
    init(
        configuration: TokenRemovalGuard.Configuration, logger: Logger, metrics: TokenRemovalGuardMetrics = TokenRemovalGuardMetrics(),
        origin: MonotonicInstant = .now
    ) {
        machine = Mutex(TokenRemovalGuard(configuration: configuration, origin: origin))
        self.metrics = metrics
        self.logger = logger
        window = configuration.window
    }

    /// Makes the guard's series of `credentials` (0: not tripped) before any answer, so that alerts on them
    /// find them from the start.
    func register(credentials: [String]) {
        for credential in credentials {
            for environment in APNsEnvironment.allCases {
                for targets in [TokenRemovalGuard.Targets.deviceTokens, .channels] {
                    metrics.guardTripped(TokenRemovalGuard.Key(credential: credential, environment: environment, targets: targets), false)
                }
            }
        }
    }

    /// Counts the answer of one delivered event and says whether its removed-token record may be published.
    ///
    /// - Parameter now: the time the answer counts at: the relay passes its attempt's start, read once for the
    ///   attempt (`DeliveryProgress.lastAttemptAt`). Against the guard's window (`relay.tokenRemoval.windowMs`,
    ///   60 s by default, counted in twentieths) the answer's own moment, a request's latency later, would
    ///   change next to nothing, and cost a reading of the clock per event.
    /// - Returns: `false` only for a BadDeviceToken removal the guard withholds; 410 removals (and events
    ///   without a removal) always get `true`.
    func allowsRemoval(
        after report: DeliveryReport, to target: PushTarget, credential: String, environment: APNsEnvironment, at now: MonotonicInstant
    ) -> Bool {
        // No answer from APNs: nothing to count, and no removal to decide on.
        guard report.response != nil else { return true }
        let answer: TokenRemovalGuard.Answer = report.decision == .rejected(removesTarget: true) ? .badDeviceToken : .other
        let targets: TokenRemovalGuard.Targets
        if case .channel = target { targets = .channels } else { targets = .deviceTokens }
        let key = TokenRemovalGuard.Key(credential: credential, environment: environment, targets: targets)
        let verdict = machine.withLock { $0.record(answer, of: target, for: key, at: now) }

        switch verdict.change {
        case .tripped(let sample)?:
            metrics.guardTripped(key, true)
            let reason = targets.reason.rawValue
            logger.critical(
                "APNs answered \(reason) for an implausible share of \(targets.requests); withholding \(reason) \(targets.record) records until it falls (results still say \(reason)). Check the events' environment and the credential's topics",
                metadata: Self.metadata(key, sample, window: window)
            )
        case .ended(let sample, let withheld)?:
            metrics.guardTripped(key, false)
            let reason = targets.reason.rawValue
            logger.warning(
                "the \(reason) share fell; publishing \(reason) \(targets.record) records again",
                metadata: Self.metadata(key, sample, window: window).merging(["withheldRemovals": "\(withheld)"]) { $1 }
            )
        case nil:
            break
        }
        if verdict.withholdsRemoval {
            metrics.removalWithheld(key)
            logger.debug("\(targets.reason.rawValue) removal withheld", metadata: Self.metadata(key, verdict.sample, window: window))
        }
        return answer == .other || verdict.publishesRemoval
    }

    private static func metadata(_ key: TokenRemovalGuard.Key, _ sample: TokenRemovalGuard.Sample, window: Duration) -> Logger.Metadata {
        [
            "credential": "\(key.credential)", "environment": "\(key.environment.rawValue)",
            "\(key.targets == .channels ? "channels" : "deviceTokens")": "\(sample.answers)", "\(key.targets.reason.rawValue)": "\(sample.badDeviceTokens)",
            "percent": "\(Int(sample.percent.rounded()))", "window": "\(window)",
        ]
    }
}
