import APNsCore
import Foundation
import NIOCore

/// A channel-management request that passed every check before authentication.
struct CheckedChannelRequest: AuthenticatedRequest {
    var bundleID: String
    var operation: ChannelOperation
    /// `apns-channel-id`, for reads and deletes.
    var channelID: String?

    /// The credential must cover the path's bundle id, as for broadcast sends.
    var topic: String { bundleID }
    /// Channel management carries no `apns-push-type` header (the create body names the type).
    var authenticatedPushType: PushType? { nil }
}

/// What a successful channel-management request is answered with.
struct ChannelManagementAnswer {
    var status: Int
    var extraHeaders: [(String, String)] = []
    var jsonBody: ByteBuffer?
}

/// The channel-management API of apns-reference.md §10, on the management listener.
///
/// Order of checks: the path must be a channel route (`RequestRoute`; else 404 BadPath, before anything else)
/// → DuplicateHeaders → `apns-request-id` not a canonical UUID → BadMessageId → method not allowed on the
/// route → MethodNotAllowed → bundle id with a push-type suffix → TopicDisallowed → for reads and deletes `apns-channel-id` absent → MissingChannelId, malformed →
/// BadChannelId; then, in `APNsConnectionHandler`, authentication (the path's bundle id is the topic); then
/// `perform`: for creates the body (not a JSON object → BadRequestPayload, no `message-storage-policy` →
/// MissingChannelQueueSize, policy not 0 or 1 → BadRequestParams, no `push-type` → MissingPushType, not
/// LiveActivity in any letter case → InvalidPushType), then FeatureNotEnabled for every operation, then the
/// registry (CannotCreateChannelConfig at the limit; ChannelNotRegistered for unknown channels).
///
/// BadRequestPayload, MissingChannelQueueSize and BadRequestParams come from a single source (unconfirmed,
/// §10) and are answered as `APNsReason.unknown` with status 400.
enum ChannelManagementRules {
    static let badRequestPayload = APNsReason.unknown("BadRequestPayload")
    static let missingChannelQueueSize = APNsReason.unknown("MissingChannelQueueSize")
    static let badRequestParams = APNsReason.unknown("BadRequestParams")

    static func check(_ headers: RequestHeaders, route: ChannelManagementRoute) -> Result<CheckedChannelRequest, RequestRejection> {
        if headers.hasDuplicate { return .failure(.init(reason: .duplicateHeaders)) }
        if let requestID = headers.requestID, !APNsNotification.isCanonicalUUID(requestID) {
            return .failure(.init(reason: .badMessageId))
        }
        guard let operation = route.operation(method: headers.method) else {
            return .failure(.init(reason: .methodNotAllowed))
        }
        // As for broadcast sends: the path names the bundle id alone.
        if PushType.suffix(in: route.bundleID) != nil { return .failure(.init(reason: .topicDisallowed)) }
        switch operation {
        case .read, .delete:
            if let rejection = ChannelIDFormat.check(headers.channelID) { return .failure(rejection) }
            return .success(CheckedChannelRequest(bundleID: route.bundleID, operation: operation, channelID: headers.channelID))
        case .create, .list:
            return .success(CheckedChannelRequest(bundleID: route.bundleID, operation: operation))
        }
    }

    /// Carries out an authenticated request against `channels`.
    static func perform(
        _ request: CheckedChannelRequest,
        body: ByteBuffer?,
        broadcastDisabledBundles: Set<String>,
        channels: ChannelRegistry,
        allocator: ByteBufferAllocator
    ) -> Result<ChannelManagementAnswer, RequestRejection> {
        var storagePolicy = 0
        if request.operation == .create {
            switch createStoragePolicy(body) {
            case .success(let policy): storagePolicy = policy
            case .failure(let rejection): return .failure(rejection)
            }
        }
        if broadcastDisabledBundles.contains(request.bundleID) { return .failure(.init(reason: .featureNotEnabled)) }
        let bundleID = request.bundleID
        switch request.operation {
        case .create:
            do {
                let id = try channels.create(bundleID: bundleID, storagePolicy: storagePolicy)
                return .success(ChannelManagementAnswer(status: 201, extraHeaders: [("apns-channel-id", id)]))
            } catch {
                return .failure(.init(reason: error.code == .limitReached ? .cannotCreateChannelConfig : badRequestParams))
            }
        case .read:
            guard let policy = channels.storagePolicy(bundleID: bundleID, channelID: request.channelID ?? "") else {
                return .failure(.init(reason: .channelNotRegistered))
            }
            let body = #"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"#
            return .success(ChannelManagementAnswer(status: 200, jsonBody: allocator.buffer(string: body)))
        case .delete:
            guard channels.delete(bundleID: bundleID, channelID: request.channelID ?? "") else {
                return .failure(.init(reason: .channelNotRegistered))
            }
            return .success(ChannelManagementAnswer(status: 204))
        case .list:
            let ids = channels.channels(bundleID: bundleID)
            // Ids are base64 (no character JSON must escape), so they are written as they are.
            var body = allocator.buffer(capacity: 16 + ids.count * 27)
            body.writeStaticString(#"{"channels":["#)
            for (index, id) in ids.enumerated() {
                if index > 0 { body.writeStaticString(",") }
                body.writeStaticString("\"")
                body.writeString(id)
                body.writeStaticString("\"")
            }
            body.writeStaticString("]}")
            return .success(ChannelManagementAnswer(status: 200, jsonBody: body))
        }
    }

    /// The storage policy from a create body `{"message-storage-policy":0|1,"push-type":"LiveActivity"}`.
    static func createStoragePolicy(_ body: ByteBuffer?) -> Result<Int, RequestRejection> {
        guard let body, let fields = try? JSONDecoder().decode([String: BodyValue].self, from: Data(body.readableBytesView)) else {
            return .failure(.init(reason: badRequestPayload))
        }
        let policy: Int
        switch fields["message-storage-policy"] {
        case nil: return .failure(.init(reason: missingChannelQueueSize))
        case .integer(let value) where value == 0 || value == 1: policy = value
        default: return .failure(.init(reason: badRequestParams))
        }
        switch fields["push-type"] {
        case nil: return .failure(.init(reason: .missingPushType))
        case .text(let pushType) where pushType.lowercased() == PushType.liveactivity.rawValue: return .success(policy)
        default: return .failure(.init(reason: .invalidPushType))
        }
    }

    /// A top-level value of the create body, as far as the checks care.
    private enum BodyValue: Decodable {
        case integer(Int)
        case text(String)
        case other

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let integer = try? container.decode(Int.self) {
                self = .integer(integer)
            } else if let text = try? container.decode(String.self) {
                self = .text(text)
            } else {
                self = .other
            }
        }
    }
}
