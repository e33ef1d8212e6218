import APNsCore

/// Sends each notification with the credential that covers its topic.
///
/// APNs binds a connection to one team (token auth) or one app (certificate), so every credential has its
/// own client and connections. A route covers bundle ids (`com.example.app` also covers its push-type topics
/// such as `com.example.app.voip`; `com.example.*` covers every bundle id under `com.example.`); a route
/// with no patterns covers every topic. The first matching route wins.
public struct CredentialRouter: NotificationSender {
    public struct Route: Sendable {
        /// The credential's name (in logs and the token-removal guard's metrics).
        public var name: String
        public var patterns: [String]
        public var authentication: AuthenticationKind
        public var sender: any NotificationSender

        public init(name: String = "default", patterns: [String], authentication: AuthenticationKind, sender: any NotificationSender) {
            self.name = name
            self.patterns = patterns
            self.authentication = authentication
            self.sender = sender
        }

        func covers(_ topic: String) -> Bool {
            patterns.isEmpty || patterns.contains { Self.matches(topic, $0) }
        }

        static func matches(_ topic: String, _ pattern: String) -> Bool {
            if pattern.hasSuffix(".*") {
                return topic.hasPrefix(pattern.dropLast())
            }
            return topic == pattern || topic.hasPrefix(pattern + ".")
        }
    }

    /// Why a notification could not be sent at all; triage refuses such events before they get here.
    public struct NoRoute: Error, CustomStringConvertible {
        public let topic: String
        public var description: String { "no APNs credential covers topic \(topic)" }
    }

    public let routes: [Route]

    public init(routes: [Route]) {
        self.routes = routes
    }

    public func authentication(forTopic topic: String) -> AuthenticationKind? {
        routes.first { $0.covers(topic) }?.authentication
    }

    public func credentialName(forTopic topic: String) -> String {
        routes.first { $0.covers(topic) }?.name ?? "default"
    }

    public func send(_ notification: APNsNotification, deadline: ContinuousClock.Instant) async throws -> APNsResponse {
        guard let route = routes.first(where: { $0.covers(notification.topic) }) else {
            throw NoRoute(topic: notification.topic)
        }
        return try await route.sender.send(notification, deadline: deadline)
    }
}
