/// The terminal outcome of one event; the `outcome` field of a result record.
package enum DeliveryOutcome: String, CaseIterable, Hashable, Sendable {
    /// APNs accepted the notification.
    case delivered
    /// APNs refused it for good (a 4xx other than 410).
    case rejected
    /// The device token is gone (410); a removed-token record was published too.
    case unregistered
    /// The event broke the schema or an APNs rule; never sent; a dead-letter record was published.
    case invalid
    /// Its `expiration` passed before it could be delivered; stale backlog is not pushed.
    case expired
    /// Retries ran out; the result carries the last reason.
    case failed
}
