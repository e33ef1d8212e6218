import APNsCore

/// Sends each notification with the credential that covers its topic.
///
/// APNs binds a connection to one team (token auth) or one app (certificate), so every credential has its
/// own client and connections. A route covers bundle ids (`com.example.app` also covers its push-type topics
/// such as `com.example.app.voip`; `com.example.*` covers every bundle id under `com.example.`); a route
/// with no patterns covers every topic. The first matching route wins.
package struct CredentialRouter: NotificationSender {
    package struct Route: Sendable {
        /// The credential's name (in logs and the token-removal guard's metrics).
        package var name: String
        package var patterns: [String]
        package var authentication: AuthenticationKind
        package var sender: any NotificationSender

        package init(name: String = "default", patterns: [String], authentication: AuthenticationKind, sender: any NotificationSender) {
            self.name = name
            self.patterns = patterns
            self.authentication = authentication
            self.sender = sender
        }

        package func covers(_ topic: String) -> Bool {
            patterns.isEmpty || patterns.contains { Self.matches(topic, $0) }
        }

        package static func matches(_ topic: String, _ pattern: String) -> Bool {
            if pattern.hasSuffix(".*") {
                return topic.hasPrefix(pattern.dropLast())
            }
            return topic == pattern || topic.hasPrefix(pattern + ".")
        }
    }

    /// Why a notification could not be sent at all; triage refuses such events before they get here.
    package struct NoRoute: Error, CustomStringConvertible {
        package let topic: String
        package var description: String { "no APNs credential covers topic \(topic)" }
    }

    package let routes: [Route]

    package init(routes: [Route]) {
        self.routes = routes
    }

    package func authentication(forTopic topic: String) -> AuthenticationKind? {
        routes.first { $0.covers(topic) }?.authentication
    }

    package func credentialName(forTopic topic: String) -> String {
        routes.first { $0.covers(topic) }?.name ?? "default"
    }

    package func send(
        _ notification: APNsNotification, deadline: ContinuousClock.Instant,
        completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    ) {
        guard let route = routes.first(where: { $0.covers(notification.topic) }) else {
            return completion(.failure(NoRoute(topic: notification.topic)))
        }
        route.sender.send(notification, deadline: deadline, completion: completion)
    }

    package func holdUnsentRequests() {
        for route in routes { route.sender.holdUnsentRequests() }
    }
}
