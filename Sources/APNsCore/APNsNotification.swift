/// One device push: the request headers and the exact payload bytes.
///
/// The payload is carried as the producer's original bytes and sent untouched; it is not re-encoded.
public struct APNsNotification: Sendable, Hashable {
    public var deviceToken: DeviceToken
    /// `apns-topic`: bundle id plus the push type's suffix (see `PushType.topic(forBundleID:)`).
    public var topic: String
    public var pushType: PushType
    /// `apns-priority`; `nil` leaves APNs' default (10).
    public var priority: Priority?
    /// `apns-expiration` in UNIX seconds; `0` means one attempt, never stored; `nil` uses APNs' default.
    public var expiration: Int64?
    /// `apns-collapse-id`, at most 64 bytes.
    public var collapseID: String?
    /// `apns-id`, a canonical UUID; APNs generates one when absent.
    public var apnsID: String?
    public var environment: APNsEnvironment
    /// The JSON body, byte for byte.
    public var payload: [UInt8]

    public init(
        deviceToken: DeviceToken,
        topic: String,
        pushType: PushType,
        priority: Priority? = nil,
        expiration: Int64? = nil,
        collapseID: String? = nil,
        apnsID: String? = nil,
        environment: APNsEnvironment = .production,
        payload: [UInt8]
    ) {
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.environment = environment
        self.payload = payload
    }

    /// `:path` of the request.
    public var path: String { "/3/device/" + deviceToken.hex }
}
