import APNsCore

/// One input event that passed `Schemas/notification-event.schema.json`: the APNs request it asks for, plus
/// what the relay echoes (`id`, `metadata`) and the topic as the producer wrote it.
///
/// The request's fields read straight through (`event.target`, `event.payload`, …). `payload` and
/// `metadata` are the producer's bytes, untouched (whitespace and escapes included).
@dynamicMemberLookup
package struct NotificationEvent: Sendable, Hashable {
    /// The producer's id, echoed in results.
    package var id: String
    /// The topic as the producer wrote it; the push type's suffix may be missing (`notification.topic` has it).
    package var topic: String
    /// The raw JSON text of `metadata`, or `nil` when the event had none.
    package var metadata: [UInt8]?
    /// The APNs request for this event (topic with its push-type suffix), not yet checked against APNs' rules.
    package var notification: APNsNotification

    /// - Parameter environment: `production` when the event did not say.
    package init(
        id: String,
        deviceToken: DeviceToken,
        topic: String,
        pushType: PushType,
        priority: Priority? = nil,
        expiration: Int64? = nil,
        collapseID: String? = nil,
        apnsID: String? = nil,
        environment: APNsEnvironment = .production,
        payload: ArraySlice<UInt8>,
        metadata: [UInt8]? = nil
    ) {
        self.id = id
        self.topic = topic
        self.metadata = metadata
        notification = APNsNotification(
            deviceToken: deviceToken, topic: pushType.topic(forBundleID: topic), pushType: pushType,
            priority: priority, expiration: expiration, collapseID: collapseID, apnsID: apnsID,
            environment: environment, payload: payload
        )
    }

    /// A broadcast event: the bundle id goes in the path, so a push-type suffix the producer wrote is
    /// dropped (APNs would answer TopicDisallowed).
    package init(
        id: String,
        channelID: ChannelID,
        topic: String,
        priority: Priority? = nil,
        expiration: Int64? = nil,
        requestID: String? = nil,
        environment: APNsEnvironment = .production,
        payload: ArraySlice<UInt8>,
        metadata: [UInt8]? = nil
    ) {
        self.id = id
        self.topic = topic
        self.metadata = metadata
        notification = APNsNotification(
            channelID: channelID, bundleID: PushType.liveactivity.bundleID(fromTopic: topic), priority: priority,
            expiration: expiration, requestID: requestID, environment: environment, payload: payload
        )
    }

    package subscript<Value>(dynamicMember keyPath: KeyPath<APNsNotification, Value>) -> Value {
        notification[keyPath: keyPath]
    }

    /// The APNs request, checked against the rules APNs enforces (collapse id bytes, background priority,
    /// payload size per push type, expiration, credential kind).
    /// - Throws: the first `NotificationRuleViolation`, carrying the reason APNs would have answered.
    package func validatedNotification(
        authentication: AuthenticationKind? = nil,
        now: Int64? = nil
    ) throws(NotificationRuleViolation) -> APNsNotification {
        try notification.validate(authentication: authentication, now: now)
        return notification
    }
}
