import APNsCore

/// A broadcast send that passed every check before authentication.
struct CheckedBroadcastRequest: AuthenticatedRequest {
    /// From `:path`, without a push-type suffix.
    var bundleID: String
    var channelID: String
    var priority: Int?
    var expiration: Int64?

    /// Broadcasts have no `apns-topic` (ignored if sent): the credential must cover the path's bundle id.
    var topic: String { bundleID }
    var authenticatedPushType: PushType? { .liveactivity }
}

/// The checks of `POST /4/broadcasts/apps/<bundleID>` (apns-reference.md §10), in this order:
///
/// 1. DuplicateHeaders — a repeated header makes every other check ambiguous (as for device pushes);
/// 2. `apns-request-id` not a canonical UUID → BadMessageId;
/// 3. method not POST → MethodNotAllowed;
/// 4. bundle id in the path empty or with `/` or `?` → BadPath;
/// 5. bundle id ending in a push-type topic suffix (`.push-type.liveactivity`, `.voip`, …: §10 says the path
///    carries none) → TopicDisallowed;
/// 6. `apns-priority` not 10, 5 or 1 → BadPriority;
/// 7. `apns-push-type` absent → MissingPushType, not `liveactivity` in any letter case (Apple writes
///    `LiveActivity` and `Liveactivity`) → InvalidPushType;
/// 8. `apns-expiration` not a non-negative integer → BadExpirationDate;
/// 9. `apns-channel-id` absent or empty → MissingChannelId, malformed → BadChannelId (`ChannelIDFormat.check`);
///
/// then, in `APNsConnectionHandler`, authentication (the path's bundle id is the topic), then
/// `checkAfterAuthentication`: FeatureNotEnabled → ChannelNotRegistered → BadExpirationDate (No-Message-Stored
/// channel) → PayloadEmpty → PayloadTooLarge. Header syntax comes before authentication as for device pushes
/// (§11); what depends on server state or the body comes after it. `apns-topic` is not read. Apple's own order
/// is unconfirmed (§12).
enum BroadcastRequestRules {
    /// §10: broadcast payloads may be 5120 bytes.
    static let maxPayloadBytes = APNsNotification.maxBroadcastPayloadBytes

    static func check(_ headers: RequestHeaders) -> Result<CheckedBroadcastRequest, RequestRejection> {
        if headers.hasDuplicate { return .failure(.init(reason: .duplicateHeaders)) }
        if let requestID = headers.requestID, !APNsNotification.isCanonicalUUID(requestID) {
            return .failure(.init(reason: .badMessageId))
        }
        guard headers.method == "POST" else { return .failure(.init(reason: .methodNotAllowed)) }
        guard let bundleID = bundleID(fromPath: headers.path) else { return .failure(.init(reason: .badPath)) }
        if PushType.suffix(in: bundleID) != nil {
            return .failure(.init(reason: .topicDisallowed))
        }
        let priority: Int?
        switch HeaderValueRules.priority(headers.priority) {
        case .success(let value): priority = value
        case .failure(let rejection): return .failure(rejection)
        }
        guard let pushType = headers.pushType else { return .failure(.init(reason: .missingPushType)) }
        guard pushType.lowercased() == PushType.liveactivity.rawValue else {
            return .failure(.init(reason: .invalidPushType))
        }
        let expiration: Int64?
        switch HeaderValueRules.expiration(headers.expiration) {
        case .success(let value): expiration = value
        case .failure(let rejection): return .failure(rejection)
        }
        if let rejection = ChannelIDFormat.check(headers.channelID) { return .failure(rejection) }
        return .success(
            CheckedBroadcastRequest(
                bundleID: bundleID,
                channelID: headers.channelID ?? "",
                priority: priority,
                expiration: expiration
            )
        )
    }

    /// The bundle id after `/4/broadcasts/apps/`; `nil` when empty or when it has `/` or `?` in it.
    private static func bundleID(fromPath path: String?) -> String? {
        guard let path else { return nil }
        let prefix = RequestRoute.broadcastPrefix.utf8Buffer
        guard path.utf8.starts(with: prefix) else { return nil }
        let bundle = path.utf8.dropFirst(prefix.count)
        guard !bundle.isEmpty, !bundle.contains(UInt8(ascii: "/")), !bundle.contains(UInt8(ascii: "?")) else {
            return nil
        }
        return String(Substring(bundle))
    }

    /// The checks after authentication: the app's broadcast feature, the channel, its storage policy, the body.
    static func checkAfterAuthentication(
        _ request: CheckedBroadcastRequest,
        payloadSize: Int,
        broadcastDisabledBundles: Set<String>,
        channels: ChannelRegistry
    ) -> RequestRejection? {
        if broadcastDisabledBundles.contains(request.bundleID) { return .init(reason: .featureNotEnabled) }
        guard let policy = channels.storagePolicy(bundleID: request.bundleID, channelID: request.channelID) else {
            return .init(reason: .channelNotRegistered)
        }
        // No Message Stored: `0` is the only expiration allowed (§10); an absent header stores nothing either.
        if policy == 0, let expiration = request.expiration, expiration != 0 { return .init(reason: .badExpirationDate) }
        if payloadSize == 0 { return .init(reason: .payloadEmpty) }
        if payloadSize > maxPayloadBytes { return .init(reason: .payloadTooLarge) }
        return nil
    }
}
