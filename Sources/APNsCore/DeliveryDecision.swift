/// Why a request got no APNs response.
package enum TransportFailure: Hashable, Sendable {
    /// GOAWAY named a last-stream-id below this request's stream: APNs never processed it.
    case notProcessed
    /// RST_STREAM REFUSED_STREAM: not processed, safe to resend.
    case streamRefused
    /// No response before the request's deadline. APNs may have delivered it.
    case timedOut
    /// The deadline passed before the request got a stream (the pool's concurrency limit or the peer's
    /// MAX_CONCURRENT_STREAMS was in use): it never left this process, so resending cannot duplicate it.
    case notSent
    /// TCP, TLS or HTTP/2 set-up failed, or no connection was up when the request's deadline passed (it was
    /// never sent).
    case connectFailed
    /// The connection closed with the request in flight. APNs may have delivered it.
    case connectionLost
}

/// What to do next with a notification, from APNs' answer or the lack of one.
package enum DeliveryDecision: Hashable, Sendable {
    /// APNs accepted it (200).
    case delivered
    /// The token is gone for this topic (410); producers should stop sending to it.
    /// `invalidatedAt` is APNs' timestamp in milliseconds, when it sent one.
    case unregistered(invalidatedAt: Int64?)
    /// Final refusal. `removesTarget` is set when the target itself is bad, which producers should also
    /// clean up: BadDeviceToken (usually a token from the other environment) or ChannelNotRegistered (a
    /// deleted channel; APNs never reissues a channel id).
    case rejected(removesTarget: Bool)
    /// Try again, as `RetryStrategy` says. Attempts are bounded by the caller.
    case retry(RetryStrategy)
}

/// How to try again.
package enum RetryStrategy: Hashable, Sendable {
    /// Not processed by APNs: resend at once on another connection; does not count as an APNs refusal.
    case resendNow
    /// Wait a jittered, growing delay, then resend.
    case backoff
    /// The connection is unusable for this credential (token churn, key binding, idle): resend on another.
    case replaceConnection
    /// The provider token was stale: refresh the connection's token and resend once.
    case refreshToken
}

extension TransportFailure {
    /// Whether APNs may have received the request: resending it may then push the notification twice.
    package var mayHaveReachedAPNs: Bool {
        switch self {
        case .timedOut, .connectionLost: true
        case .notProcessed, .streamRefused, .notSent, .connectFailed: false
        }
    }
}

extension DeliveryDecision {
    /// The decision table for an APNs response (apns-reference.md §6).
    package init(response: APNsResponse) {
        switch (response.status, response.reason) {
        case (200, _):
            self = .delivered
        case (410, _):
            self = .unregistered(invalidatedAt: response.timestamp)
        case (400, .badDeviceToken?), (400, .channelNotRegistered?):
            self = .rejected(removesTarget: true)
        case (400, .idleTimeout?):
            self = .retry(.replaceConnection)
        case (403, .expiredProviderToken?):
            self = .retry(.refreshToken)
        case (403, .unrelatedKeyIdInToken?):
            self = .retry(.replaceConnection)
        case (429, .tooManyProviderTokenUpdates?):
            self = .retry(.replaceConnection)
        case (429, _), (500, _), (502, _), (503, _), (504, _):
            self = .retry(.backoff)
        default:
            // Any other 4xx (and statuses APNs does not document) is final: resending would get the same.
            self = .rejected(removesTarget: false)
        }
    }

    /// The decision when no response arrived.
    package init(failure: TransportFailure) {
        switch failure {
        case .notProcessed, .streamRefused:
            self = .retry(.resendNow)
        case .notSent:
            self = .retry(.backoff)
        case .timedOut, .connectFailed, .connectionLost:
            self = .retry(.backoff)
        }
    }
}

extension DeliveryDecision {
    /// Whether the answer spoils the connection that carried it (or its provider token), so the pool
    /// replaces it: the one place answers map to a connection action.
    package var replacesConnection: Bool {
        switch self {
        case .retry(.replaceConnection), .retry(.refreshToken): true
        case .delivered, .unregistered, .rejected, .retry(.backoff), .retry(.resendNow): false
        }
    }
}
