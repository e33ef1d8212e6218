import APNsCore

extension DocumentedReason.Handling {
    /// The `DeliveryDecision` the handling names, written out by hand (never `DeliveryDecision(response:)`,
    /// the function under test); `invalidatedAt` is the 410 answer's timestamp.
    package func decision(invalidatedAt: Int64?) -> DeliveryDecision {
        switch self {
        case .reject: .rejected(removesTarget: false)
        case .rejectAndRemoveTarget: .rejected(removesTarget: true)
        case .unregister: .unregistered(invalidatedAt: invalidatedAt)
        case .retryWithBackoff: .retry(.backoff)
        case .retryOnAnotherConnection: .retry(.replaceConnection)
        case .retryWithFreshToken: .retry(.refreshToken)
        }
    }
}
