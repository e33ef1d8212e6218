/// Which of the relay's two lanes a push travels in. Urgent pushes (a login code, "your driver is here") go
/// before bulk ones (a campaign) wherever requests wait, and bulk may not use the share of capacity
/// reserved for urgent ones. A plain client sends everything as `.bulk`: with no urgent traffic nothing is
/// reserved (the pool's `urgentShare` is 0 unless configured).
package enum DeliveryLane: String, Sendable, Hashable, CaseIterable, Comparable {
    case urgent
    case bulk

    /// Urgent before bulk.
    package static func < (lhs: Self, rhs: Self) -> Bool {
        lhs == .urgent && rhs == .bulk
    }
}
