import APNsCore
import Foundation
import Logging

/// Creates, reads, deletes and lists the broadcast channels of an app (apns-reference.md §10), on the
/// channel-management hosts (`api-manage-broadcast[.sandbox].push.apple.com`, ports 2196 and 2195), with
/// the same credential, pool, TLS and proxy rules as pushes.
///
/// Requests are not retried here: a create whose answer was lost may have made a channel, and only the
/// caller can tell whether a second one is wanted. APNs' refusals throw `ChannelManagementError`;
/// transport failures throw `APNsClientError` (`.transport`), and a bundle id that cannot be one (with a
/// push-type suffix, which would make a channel no broadcast reaches) `APNsClientError` (`.invalidConfiguration`).
package final class ChannelManager: Sendable {
    /// `message-storage-policy`, fixed when the channel is created.
    package enum StoragePolicy: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// No message stored: a higher publishing budget; every broadcast must have `apns-expiration` 0.
        case noMessageStored = 0
        /// The most recent message is stored (up to 8 hours, or less per `apns-expiration`).
        case mostRecentMessageStored = 1

        package var description: String {
            switch self {
            case .noMessageStored: "no-message-stored"
            case .mostRecentMessageStored: "most-recent-message-stored"
            }
        }
    }

    /// A channel as APNs describes it.
    package struct Channel: Sendable, Hashable {
        package var id: ChannelID
        package var storagePolicy: StoragePolicy
        /// `push-type` as APNs spells it (`LiveActivity`).
        package var pushType: String
    }

    /// A list answer can hold 10,000 ids of about 25 bytes each.
    static let maxListBody = 1 << 20
    static let maxBody = 16_384

    private let client: APNsClient
    private let timeout: Duration

    /// - Parameters:
    ///   - configuration: the credential and transport settings; its `managementEndpoints` are used (not
    ///     its push `endpoints`).
    ///   - eventLoops: where its connections run (see `APNsClient`).
    ///   - timeout: how long one request may take, from the call to the answer.
    /// - Throws: `APNsClientError` when the TLS context or credential cannot be set up.
    package init(
        configuration: APNsClientConfiguration, eventLoops: APNsEventLoopGroup, timeout: Duration = .seconds(10),
        logger: Logger = Logger(label: "apns.channels")
    ) throws(APNsClientError) {
        var configuration = configuration
        configuration.endpoints = configuration.managementEndpoints
        // Management is occasional: no connection is kept open for it.
        configuration.pool.minConnections = 0
        client = try APNsClient(configuration: configuration, eventLoops: eventLoops, logger: logger)
        self.timeout = timeout
    }

    /// Creates a channel for `bundleID` and returns its id (chosen by APNs).
    package func create(bundleID: String, storagePolicy: StoragePolicy, environment: APNsEnvironment, requestID: String? = nil) async throws -> ChannelID {
        let body = #"{"message-storage-policy":\#(storagePolicy.rawValue),"push-type":"LiveActivity"}"#
        let response = try await request(
            "POST", bundleID: bundleID, resource: "channels", channel: nil, requestID: requestID,
            body: Array(body.utf8), environment: environment, maxBody: Self.maxBody
        )
        guard let id = response.channelID else {
            throw ChannelManagementError(response, "APNs answered \(response.status) to create but sent no apns-channel-id header")
        }
        do {
            return try ChannelID(base64: id)
        } catch {
            throw ChannelManagementError(response, "APNs answered with a channel id that is not base64: \(id)")
        }
    }

    /// Reads a channel's storage policy and push type.
    package func channel(_ id: ChannelID, bundleID: String, environment: APNsEnvironment, requestID: String? = nil) async throws -> Channel {
        let response = try await request(
            "GET", bundleID: bundleID, resource: "channels", channel: id, requestID: requestID, environment: environment, maxBody: Self.maxBody
        )
        guard let object = Self.jsonObject(response.body),
            let policy = (object["message-storage-policy"] as? NSNumber).flatMap({ StoragePolicy(rawValue: $0.intValue) })
        else {
            throw ChannelManagementError(response, "APNs answered with a body that is not a channel: \(Self.excerpt(response.body))")
        }
        return Channel(id: id, storagePolicy: policy, pushType: object["push-type"] as? String ?? "")
    }

    /// Deletes a channel. Its id is never issued again.
    package func delete(_ id: ChannelID, bundleID: String, environment: APNsEnvironment, requestID: String? = nil) async throws {
        _ = try await request(
            "DELETE", bundleID: bundleID, resource: "channels", channel: id, requestID: requestID, environment: environment, maxBody: Self.maxBody
        )
    }

    /// The ids of every channel of `bundleID` in `environment`.
    package func list(bundleID: String, environment: APNsEnvironment, requestID: String? = nil) async throws -> [ChannelID] {
        let response = try await request(
            "GET", bundleID: bundleID, resource: "all-channels", channel: nil, requestID: requestID, environment: environment,
            maxBody: Self.maxListBody
        )
        guard let ids = Self.jsonObject(response.body)?["channels"] as? [String] else {
            throw ChannelManagementError(response, "APNs answered with a body that is not a channel list: \(Self.excerpt(response.body))")
        }
        return try ids.map { id in
            do { return try ChannelID(base64: id) } catch {
                throw ChannelManagementError(response, "APNs listed a channel id that is not base64: \(id)")
            }
        }
    }

    /// Closes the connections.
    package func shutdown() async {
        await client.shutdown()
    }

    /// Sends one request; any 2xx is success (Apple advises accepting any 2xx on create).
    private func request(
        _ method: String, bundleID: String, resource: String, channel: ChannelID?, requestID: String?,
        body: [UInt8] = [], environment: APNsEnvironment, maxBody: Int
    ) async throws -> APNsResponse {
        if let suffix = PushType.suffix(in: bundleID) {
            throw APNsClientError(
                .invalidConfiguration,
                "\(bundleID) is not a bundle id: it ends with the push-type suffix \(suffix); channels belong to the bundle id alone")
        }
        guard !bundleID.isEmpty, !bundleID.contains("/"), !bundleID.contains("?") else {
            throw APNsClientError(.invalidConfiguration, "'\(bundleID)' is not a bundle id")
        }
        var headers: [(name: String, value: String)] = []
        if let channel { headers.append(("apns-channel-id", channel.base64)) }
        if let requestID { headers.append(("apns-request-id", requestID)) }
        if !body.isEmpty { headers.append(("content-type", "application/json")) }
        let response = try await client.request(
            method, "/1/apps/\(bundleID)/\(resource)", headers: headers, body: body, environment: environment,
            deadline: .now.advanced(by: timeout), maxResponseBody: maxBody
        )
        guard (200..<300).contains(response.status) else { throw ChannelManagementError(response, nil) }
        return response
    }

    private static func jsonObject(_ body: [UInt8]) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
    }

    private static func excerpt(_ body: [UInt8]) -> String {
        body.isEmpty ? "(empty)" : String(decoding: body.prefix(200), as: UTF8.self)
    }
}

/// APNs refused a channel-management request, or answered in a way that cannot be used.
package struct ChannelManagementError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status APNs answered.
    package var status: Int
    /// APNs' reason (e.g. ChannelNotRegistered, CannotCreateChannelConfig), when it sent one.
    package var reason: APNsReason?
    /// `apns-request-id` of the answer, for Apple's support.
    package var requestID: String?
    package var message: String

    init(_ response: APNsResponse, _ message: String?) {
        status = response.status
        reason = response.reason
        requestID = response.apnsID
        self.message = message ?? "APNs refused it: \(response.status) \(response.reason?.rawValue ?? "(no reason)")"
    }

    package var description: String {
        message + (requestID.map { " (apns-request-id \($0))" } ?? "")
    }
}
