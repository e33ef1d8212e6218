/// Which API a listener serves: the push port (device pushes and broadcast sends, like `api.push.apple.com`)
/// or the channel-management port (like `api-manage-broadcast.push.apple.com`), apns-reference.md §1.
enum ListenerRole: Sendable {
    case push
    case management
}

/// Which API a request is counted under and answered for.
enum RequestKind: UInt8, Sendable {
    case device
    case broadcast
    case management

    /// Device pushes are answered with `apns-id`; broadcast sends and channel management with
    /// `apns-request-id` (§6, §10).
    var answerIDHeader: AnswerIDHeader { self == .device ? .apnsID : .requestID }
}

/// What a request's `:path` asks for, decided by prefix before any header is checked, so that each API's checks
/// run only on its own requests.
///
/// A path that matches no route of its listener is 404 BadPath at once. On the push port such a request is
/// counted and answered as a device push (with `apns-id`), as before broadcasts existed.
enum RequestRoute {
    case device
    case broadcast
    case management(ChannelManagementRoute)
    case unknown(RequestKind)

    static let broadcastPrefix: StaticString = "/4/broadcasts/apps/"
    static let managementPrefix: StaticString = "/1/apps/"

    init(path: String?, role: ListenerRole) {
        switch role {
        case .push:
            // Device pushes first: one prefix comparison on the benchmarked path.
            guard let path else { self = .unknown(.device); return }
            if path.utf8.starts(with: DeviceRequestRules.pathPrefix.utf8Buffer) {
                self = .device
            } else if path.utf8.starts(with: Self.broadcastPrefix.utf8Buffer) {
                self = .broadcast
            } else {
                self = .unknown(.device)
            }
        case .management:
            if let path, let route = ChannelManagementRoute(path: path) {
                self = .management(route)
            } else {
                self = .unknown(.management)
            }
        }
    }

    var kind: RequestKind {
        switch self {
        case .device: .device
        case .broadcast: .broadcast
        case .management: .management
        case .unknown(let kind): kind
        }
    }
}

/// A channel-management path: `/1/apps/<bundleID>/channels` or `/1/apps/<bundleID>/all-channels` (§10).
struct ChannelManagementRoute {
    enum Resource {
        /// One channel (named by `apns-channel-id`), or a new one.
        case channels
        /// The list of the app's channels.
        case allChannels
    }

    var bundleID: String
    var resource: Resource

    /// `nil` for any other path, an empty bundle id, or one with `/` or `?` in it.
    init?(path: String) {
        let prefix = RequestRoute.managementPrefix.utf8Buffer
        guard path.utf8.starts(with: prefix) else { return nil }
        let rest = path.utf8.dropFirst(prefix.count)
        guard let slash = rest.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        switch Substring(rest[rest.index(after: slash)...]) {
        case "channels": resource = .channels
        case "all-channels": resource = .allChannels
        default: return nil
        }
        let bundle = rest[..<slash]
        guard !bundle.isEmpty, !bundle.contains(UInt8(ascii: "/")), !bundle.contains(UInt8(ascii: "?")) else {
            return nil
        }
        bundleID = String(Substring(bundle))
    }

    /// What `method` does on this resource; `nil`: not allowed here (405 MethodNotAllowed).
    func operation(method: String?) -> ChannelOperation? {
        switch (resource, method) {
        case (.channels, "POST"): .create
        case (.channels, "GET"): .read
        case (.channels, "DELETE"): .delete
        case (.allChannels, "GET"): .list
        default: nil
        }
    }
}

/// The four channel-management operations.
enum ChannelOperation {
    case create
    case read
    case delete
    case list
}
