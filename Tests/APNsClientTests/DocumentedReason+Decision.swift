import APNsCore
import TestSupport

extension DocumentedReason.Handling {
    /// The `DeliveryDecision` the handling names; `invalidatedAt` is the 410 answer's timestamp.
    /// (APNsCoreTests has the same translation: TestSupport does not depend on APNsCore.)
    func decision(invalidatedAt: Int64?) -> DeliveryDecision {
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
