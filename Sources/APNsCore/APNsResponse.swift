/// What APNs answered to one request.
package struct APNsResponse: Sendable, Hashable {
    /// HTTP `:status`.
    package var status: Int
    /// The request's id as APNs answered it (echoed or generated): `apns-id` for device pushes,
    /// `apns-request-id` for broadcasts and channel management. APNs has answered upper-case ids; compare
    /// case-insensitively.
    package var apnsID: String?
    /// `apns-unique-id`: sent for device pushes by the development environment only, for broadcasts always.
    package var apnsUniqueID: String?
    /// `reason` from the JSON body of a failure.
    package var reason: APNsReason?
    /// With 410: when APNs last confirmed the token invalid, in milliseconds since the epoch.
    package var timestamp: Int64?
    /// `apns-channel-id`: the new channel's id, answering a channel-management create.
    package var channelID: String?
    /// The response body, kept for channel-management requests only (a push's body is just its reason).
    package var body: [UInt8] = []
    /// The client's number for the connection that carried the request (`apns.connection` in its log lines),
    /// when a pooled connection answered.
    package var connectionID: Int?

    package init(status: Int, apnsID: String? = nil, apnsUniqueID: String? = nil, reason: APNsReason? = nil, timestamp: Int64? = nil) {
        self.status = status
        self.apnsID = apnsID
        self.apnsUniqueID = apnsUniqueID
        self.reason = reason
        self.timestamp = timestamp
    }
}
