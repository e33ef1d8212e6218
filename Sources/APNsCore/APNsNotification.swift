/// One push: where it goes, the request headers and the exact payload bytes.
///
/// The payload is carried as the producer's original bytes and sent untouched; it is not re-encoded.
/// A device push and a broadcast (apns-reference.md §10) differ only in `target`, which decides the path,
/// the id headers and a few rules (see `validate`).
package struct APNsNotification: Sendable, Hashable {
    package var target: PushTarget
    /// Device pushes: `apns-topic`, the bundle id plus the push type's suffix (see
    /// `PushType.topic(forBundleID:)`). Broadcasts: the bundle id without any suffix, sent in the path.
    package var topic: String
    package var pushType: PushType
    /// `apns-priority`; `nil` leaves APNs' default (10).
    package var priority: Priority?
    /// `apns-expiration` in UNIX seconds; `0` means one attempt, never stored; `nil` uses APNs' default.
    package var expiration: Int64?
    /// `apns-collapse-id`, at most 64 bytes. Device pushes only: broadcasts have no collapse id.
    package var collapseID: String?
    /// The request's id, a canonical UUID: `apns-id` for device pushes, `apns-request-id` for broadcasts.
    /// APNs generates one when absent.
    package var apnsID: String?
    package var environment: APNsEnvironment
    /// The JSON body, byte for byte: often a slice of the Kafka record it came in (not copied out).
    package var payload: ArraySlice<UInt8>
    /// Where the push waits its turn on this side (never sent to APNs): urgent before bulk.
    package var lane: DeliveryLane = .bulk

    package init(
        target: PushTarget,
        topic: String,
        pushType: PushType,
        priority: Priority? = nil,
        expiration: Int64? = nil,
        collapseID: String? = nil,
        apnsID: String? = nil,
        environment: APNsEnvironment = .production,
        payload: ArraySlice<UInt8>
    ) {
        self.target = target
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.environment = environment
        self.payload = payload
    }

    /// A device push.
    package init(
        deviceToken: DeviceToken,
        topic: String,
        pushType: PushType,
        priority: Priority? = nil,
        expiration: Int64? = nil,
        collapseID: String? = nil,
        apnsID: String? = nil,
        environment: APNsEnvironment = .production,
        payload: ArraySlice<UInt8>
    ) {
        self.init(
            target: .device(deviceToken), topic: topic, pushType: pushType, priority: priority, expiration: expiration,
            collapseID: collapseID, apnsID: apnsID, environment: environment, payload: payload
        )
    }

    /// A broadcast to a channel of `bundleID` (push type `liveactivity`, the only one broadcasts have).
    package init(
        channelID: ChannelID,
        bundleID: String,
        priority: Priority? = nil,
        expiration: Int64? = nil,
        requestID: String? = nil,
        environment: APNsEnvironment = .production,
        payload: ArraySlice<UInt8>
    ) {
        self.init(
            target: .channel(channelID), topic: bundleID, pushType: .liveactivity, priority: priority,
            expiration: expiration, apnsID: requestID, environment: environment, payload: payload
        )
    }

    /// The device token, for a device push.
    package var deviceToken: DeviceToken? {
        if case .device(let token) = target { token } else { nil }
    }

    /// The channel, for a broadcast.
    package var channelID: ChannelID? {
        if case .channel(let channel) = target { channel } else { nil }
    }

    /// Whether this is a broadcast (checked on the hot path: no payload is copied out).
    package var isBroadcast: Bool {
        if case .channel = target { true } else { false }
    }

    /// `:path` of the request.
    package var path: String {
        switch target {
        case .device(let token): "/3/device/" + token.hex
        case .channel: "/4/broadcasts/apps/" + topic
        }
    }

    /// The largest payload APNs accepts for this push, in bytes of the JSON body.
    package var maxPayloadBytes: Int {
        isBroadcast ? Self.maxBroadcastPayloadBytes : pushType.maxPayloadBytes
    }

    /// Broadcasts allow 5120 bytes whatever the push type (apns-reference.md §10).
    package static let maxBroadcastPayloadBytes = 5120
}
