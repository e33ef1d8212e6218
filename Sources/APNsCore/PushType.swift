/// The `apns-push-type` header: what kind of notification this is.
///
/// Each type has a required topic suffix (apns-reference.md §3) and a payload limit (§4).
package enum PushType: String, CaseIterable, Hashable, Sendable {
    case alert
    case background
    case voip
    case complication
    case fileprovider
    case mdm
    case location
    case liveactivity
    case pushtotalk
    case widgets
    case controls

    /// What APNs expects after the bundle id in `apns-topic` for this push type.
    ///
    /// `mdm` topics are the UID from the MDM push certificate, not a bundle id, so no suffix applies.
    package var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: ""
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .location: ".location-query"
        case .liveactivity: ".push-type.liveactivity"
        case .pushtotalk: ".voip-ptt"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        }
    }

    /// The largest payload APNs accepts for this push type, in bytes of the JSON body.
    package var maxPayloadBytes: Int {
        switch self {
        case .voip: 5120
        default: 4096
        }
    }

    /// The priority an omitted `apns-priority` must become for this push type, or `nil` where APNs' own
    /// default (10) is allowed. Background pushes must be 5: APNs refuses 10 (BadPriority), so sending
    /// "no header" for an event that left priority out would fail it for a header it never chose.
    package var requiredPriority: Priority? {
        self == .background ? .powerConsiderate : nil
    }

    /// Whether APNs accepts this push type on a token-authenticated connection.
    package var allowedWithToken: Bool { self != .mdm }

    /// Whether APNs accepts this push type on a certificate connection (unconfirmed cases allowed).
    package var allowedWithCertificate: Bool { self != .location }

    /// The push-type suffix `topic` ends with, if any (`.voip`, `.push-type.liveactivity`, …): a bundle id in a
    /// broadcast or channel-management path must not have one (APNs answers TopicDisallowed).
    package static func suffix(in topic: String) -> String? {
        allCases.lazy.map(\.topicSuffix).first { !$0.isEmpty && topic.hasSuffix($0) }
    }

    /// The bundle id in `topic`: the topic without this push type's suffix (broadcast paths name the bundle
    /// id alone).
    package func bundleID(fromTopic topic: String) -> String {
        let suffix = topicSuffix
        guard !suffix.isEmpty, topic.utf8.count > suffix.utf8.count, topic.hasSuffix(suffix) else { return topic }
        return String(topic.dropLast(suffix.count))
    }

    /// `apns-topic` for `bundleID` and this push type: the bundle id with the suffix appended if missing.
    package func topic(forBundleID bundleID: String) -> String {
        let suffix = topicSuffix
        if suffix.isEmpty || bundleID.hasSuffix(suffix) { return bundleID }
        return bundleID + suffix
    }
}

/// `apns-priority`: 10 sends now, 5 is power-aware, 1 never wakes the device.
package enum Priority: Int, CaseIterable, Hashable, Sendable {
    case immediate = 10
    case powerConsiderate = 5
    case low = 1
}

/// Which APNs environment a device token belongs to.
package enum APNsEnvironment: String, CaseIterable, Hashable, Sendable {
    case production
    case development

    /// The push host, for device pushes and broadcasts (port 443).
    package var host: String {
        switch self {
        case .production: "api.push.apple.com"
        case .development: "api.sandbox.push.apple.com"
        }
    }

    /// The channel-management host (apns-reference.md §10).
    package var managementHost: String {
        switch self {
        case .production: "api-manage-broadcast.push.apple.com"
        case .development: "api-manage-broadcast.sandbox.push.apple.com"
        }
    }

    /// The channel-management port: 2196 in production, 2195 in development.
    package var managementPort: Int {
        switch self {
        case .production: 2196
        case .development: 2195
        }
    }
}
