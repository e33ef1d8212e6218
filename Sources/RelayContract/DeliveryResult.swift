import APNsCore

/// Where an event came from: echoed in its result and dead-letter records.
package struct SourcePosition: Hashable, Sendable {
    package var topic: String
    package var partition: Int32
    package var offset: Int64

    package init(topic: String, partition: Int32, offset: Int64) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
    }
}

/// The one result record published per consumed event (`Schemas/delivery-result.schema.json`).
package struct DeliveryResult: Sendable, Hashable {
    /// The event's `id`, or `nil` when the event was too broken to read one.
    package var eventID: String?
    /// The event's `metadata`, verbatim JSON.
    package var metadata: [UInt8]?
    package var outcome: DeliveryOutcome
    /// APNs' HTTP status of the last attempt, if APNs answered.
    package var status: Int?
    /// APNs' reason, or the validation error code for `invalid`.
    package var reason: String?
    /// Human-readable detail (validation message, transport error).
    package var message: String?
    /// `apns-id` of a device push (`apnsID` as text).
    package var pushID: APNsID?
    /// `apns-request-id` of a broadcast (`apnsRequestID` as text).
    package var requestID: APNsID?
    /// `apns-unique-id` (`apnsUniqueID` as text).
    package var uniqueID: APNsID?
    package var attempts: Int
    /// Attempts that may have reached APNs without an answer (time-out, connection lost in flight): the
    /// device may have shown the notification that many extra times.
    package var possibleDuplicates: Int
    package var source: SourcePosition
    /// When the relay read the event, milliseconds since the epoch.
    package var receivedAt: Int64
    /// When the outcome was known, milliseconds since the epoch.
    package var completedAt: Int64

    package init(
        eventID: String?, metadata: [UInt8]?, outcome: DeliveryOutcome, status: Int? = nil, reason: String? = nil,
        message: String? = nil, apnsID: String? = nil, apnsRequestID: String? = nil, apnsUniqueID: String? = nil, attempts: Int,
        possibleDuplicates: Int = 0, source: SourcePosition, receivedAt: Int64, completedAt: Int64
    ) {
        self.eventID = eventID
        self.metadata = metadata
        self.outcome = outcome
        self.status = status
        self.reason = reason
        self.message = message
        self.pushID = apnsID.map(APNsID.init)
        self.requestID = apnsRequestID.map(APNsID.init)
        self.uniqueID = apnsUniqueID.map(APNsID.init)
        self.attempts = attempts
        self.possibleDuplicates = possibleDuplicates
        self.source = source
        self.receivedAt = receivedAt
        self.completedAt = completedAt
    }

    package var apnsID: String? {
        get { pushID?.description }
        set { pushID = newValue.map(APNsID.init) }
    }

    package var apnsRequestID: String? {
        get { requestID?.description }
        set { requestID = newValue.map(APNsID.init) }
    }

    package var apnsUniqueID: String? {
        get { uniqueID?.description }
        set { uniqueID = newValue.map(APNsID.init) }
    }

    /// The record's JSON value.
    package func jsonBytes() -> [UInt8] {
        var bytes: [UInt8] = []
        writeJSON(into: &bytes)
        return bytes
    }

    /// Writes the record's JSON value into `buffer` (emptied first, its capacity kept: a reused buffer costs
    /// no allocation).
    package func writeJSON(into buffer: inout [UInt8]) {
        // Room for the whole record at once (about 350 bytes besides the metadata): no regrowth.
        var writer = JSONWriter(reusing: &buffer, capacity: 448 + (metadata?.count ?? 0) + (message?.utf8.count ?? 0))
        // The contract: an empty string when the event was too broken to read an id.
        writer.field("id", eventID ?? "")
        writer.rawField("metadata", metadata)
        writer.field("outcome", outcome.rawValue)
        writer.field("status", status)
        writer.field("reason", reason)
        if let message { writer.field("message", message) }
        writer.field("apnsId", pushID)
        if let requestID { writer.field("apnsRequestId", requestID) }
        writer.field("apnsUniqueId", uniqueID)
        writer.field("attempts", attempts)
        if possibleDuplicates > 0 { writer.field("possibleDuplicates", possibleDuplicates) }
        writer.field("receivedAt", receivedAt)
        writer.field("completedAt", completedAt)
        writer.field("latencyMs", max(0, completedAt - receivedAt))
        writer.object("source") { source in
            source.field("topic", self.source.topic)
            source.field("partition", Int(self.source.partition))
            source.field("offset", self.source.offset)
        }
        buffer = writer.finish()
    }
}

/// Published when APNs says a device token is gone, so producers can delete it
/// (`Schemas/token-removed.schema.json`). Keyed by device token so a compacted topic keeps the latest.
package struct TokenRemoved: Sendable, Hashable {
    package var deviceToken: DeviceToken
    /// The `apns-topic` the token is gone for.
    package var topic: String
    package var environment: APNsEnvironment
    package var reason: String
    /// APNs' 410 timestamp (milliseconds since the epoch): the token is invalid unless re-registered after.
    package var invalidatedAt: Int64?
    /// The `id` of the event whose delivery found the token gone.
    package var eventID: String
    /// The event's `metadata`, verbatim JSON, so producers can find the token's owner.
    package var metadata: [UInt8]?

    package init(
        deviceToken: DeviceToken, topic: String, environment: APNsEnvironment, reason: String,
        invalidatedAt: Int64?, eventID: String, metadata: [UInt8]? = nil
    ) {
        self.deviceToken = deviceToken
        self.topic = topic
        self.environment = environment
        self.reason = reason
        self.invalidatedAt = invalidatedAt
        self.eventID = eventID
        self.metadata = metadata
    }

    package var key: [UInt8] {
        var key: [UInt8] = []
        deviceToken.appendHex(to: &key)
        return key
    }

    package func jsonBytes() -> [UInt8] {
        var writer = JSONWriter(capacity: 192)
        writer.field("deviceToken", deviceToken.hex)
        writer.field("topic", topic)
        writer.field("environment", environment.rawValue)
        writer.field("reason", reason)
        writer.field("invalidatedAt", invalidatedAt)
        writer.field("id", eventID)
        if let metadata { writer.rawField("metadata", metadata) }
        return writer.finish()
    }
}

/// Published when APNs says a broadcast channel does not exist (ChannelNotRegistered: deleted, or never
/// made in that environment), so producers stop broadcasting to it and tell their apps
/// (`Schemas/channel-removed.schema.json`). Keyed by channel id; APNs never reissues one, so the removal is
/// final.
package struct ChannelRemoved: Sendable, Hashable {
    package var channelID: ChannelID
    /// The app whose channel it was.
    package var bundleID: String
    package var environment: APNsEnvironment
    package var reason: String
    /// The `id` of the event whose delivery found the channel gone.
    package var eventID: String
    /// The event's `metadata`, verbatim JSON.
    package var metadata: [UInt8]?

    package init(
        channelID: ChannelID, bundleID: String, environment: APNsEnvironment, reason: String, eventID: String, metadata: [UInt8]? = nil
    ) {
        self.channelID = channelID
        self.bundleID = bundleID
        self.environment = environment
        self.reason = reason
        self.eventID = eventID
        self.metadata = metadata
    }

    package var key: [UInt8] { Array(channelID.base64.utf8) }

    package func jsonBytes() -> [UInt8] {
        var writer = JSONWriter(capacity: 192)
        writer.field("channelId", channelID.base64)
        writer.field("bundleId", bundleID)
        writer.field("environment", environment.rawValue)
        writer.field("reason", reason)
        writer.field("id", eventID)
        if let metadata { writer.rawField("metadata", metadata) }
        return writer.finish()
    }
}
