/// What APNs answered to one request.
package struct APNsResponse: Sendable, Hashable {
    /// HTTP `:status`.
    package var status: Int
    /// The request's id as APNs answered it (echoed or generated): `apns-id` for device pushes,
    /// `apns-request-id` for broadcasts and channel management. APNs has answered upper-case ids; compare
    /// case-insensitively.
    package var id: APNsID?
    /// `apns-unique-id`: sent for device pushes by the development environment only, for broadcasts always.
    package var uniqueID: APNsID?
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
        self.init(status: status, id: apnsID.map(APNsID.init), uniqueID: apnsUniqueID.map(APNsID.init), reason: reason, timestamp: timestamp)
    }

    package init(status: Int, id: APNsID?, uniqueID: APNsID?, reason: APNsReason? = nil, timestamp: Int64? = nil) {
        self.status = status
        self.id = id
        self.uniqueID = uniqueID
        self.reason = reason
        self.timestamp = timestamp
    }

    /// `id` as text.
    package var apnsID: String? {
        get { id?.description }
        set { id = newValue.map(APNsID.init) }
    }

    /// `uniqueID` as text.
    package var apnsUniqueID: String? {
        get { uniqueID?.description }
        set { uniqueID = newValue.map(APNsID.init) }
    }
}
