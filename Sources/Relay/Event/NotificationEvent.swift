import APNsCore

/// One input event that passed `Schemas/notification-event.schema.json`.
///
/// `payload` and `metadata` are the producer's bytes, untouched (whitespace and escapes included).
public struct NotificationEvent: Sendable, Hashable {
    /// The producer's id, echoed in results.
    public var id: String
    public var deviceToken: DeviceToken
    /// The topic as the producer wrote it; the push type's suffix may be missing (see `apnsTopic`).
    public var topic: String
    public var pushType: PushType
    public var priority: Priority?
    /// UNIX seconds; `0` means one attempt, never stored.
    public var expiration: Int64?
    public var collapseID: String?
    public var apnsID: String?
    /// `production` when the event did not say.
    public var environment: APNsEnvironment
    /// The raw JSON text of `payload`.
    public var payload: [UInt8]
    /// The raw JSON text of `metadata`, or `nil` when the event had none.
    public var metadata: [UInt8]?

    public init(
        id: String,
        deviceToken: DeviceToken,
        topic: String,
        pushType: PushType,
        priority: Priority? = nil,
        expiration: Int64? = nil,
        collapseID: String? = nil,
        apnsID: String? = nil,
        environment: APNsEnvironment = .production,
        payload: [UInt8],
        metadata: [UInt8]? = nil
    ) {
        self.id = id
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.environment = environment
        self.payload = payload
        self.metadata = metadata
    }

    /// `apns-topic`: the topic with the push type's suffix appended when the producer left it off.
    public var apnsTopic: String { pushType.topic(forBundleID: topic) }

    /// The APNs request for this event, not yet checked against APNs' rules.
    public var notification: APNsNotification {
        APNsNotification(
            deviceToken: deviceToken,
            topic: apnsTopic,
            pushType: pushType,
            priority: priority,
            expiration: expiration,
            collapseID: collapseID,
            apnsID: apnsID,
            environment: environment,
            payload: payload
        )
    }

    /// The APNs request, checked against the rules APNs enforces (collapse id bytes, background priority,
    /// payload size per push type, expiration, credential kind).
    /// - Throws: the first `NotificationRuleViolation`, carrying the reason APNs would have answered.
    public func validatedNotification(
        authentication: AuthenticationKind? = nil,
        now: Int64? = nil
    ) throws(NotificationRuleViolation) -> APNsNotification {
        let notification = self.notification
        try notification.validate(authentication: authentication, now: now)
        return notification
    }
}
