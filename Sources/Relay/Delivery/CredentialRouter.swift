import APNsCore

/// Sends each notification with the credential that covers its topic in its environment.
///
/// APNs binds a connection to one team (token auth) or one app (certificate), so every credential has its
/// own client and connections. A route covers bundle ids (`com.example.app` also covers its push-type topics
/// such as `com.example.app.voip`; `com.example.*` covers every bundle id under `com.example.`); a route
/// with no patterns covers every topic. It covers them in its environments only: since 2025 Apple lets a
/// team restrict a key to the sandbox or to production, and a restricted key used in the other environment
/// is refused (403 BadEnvironmentKeyInToken). The first matching route wins.
package struct CredentialRouter: NotificationSender {
    package struct Route: Sendable {
        /// The credential's name (in logs and the token-removal guard's metrics).
        package var name: String
        package var patterns: [String]
        package var environments: Set<APNsEnvironment>
        package var authentication: AuthenticationKind
        package var sender: any NotificationSender

        package init(
            name: String = "default", patterns: [String], environments: Set<APNsEnvironment> = Set(APNsEnvironment.allCases),
            authentication: AuthenticationKind, sender: any NotificationSender
        ) {
            self.name = name
            self.patterns = patterns
            self.environments = environments
            self.authentication = authentication
            self.sender = sender
        }

        package func covers(_ topic: String) -> Bool {
            patterns.isEmpty || patterns.contains { Self.matches(topic, $0) }
        }

        package func covers(_ topic: String, in environment: APNsEnvironment) -> Bool {
            environments.contains(environment) && covers(topic)
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
        package let environment: APNsEnvironment
        package var description: String { "no APNs credential covers topic \(topic) in \(environment.rawValue)" }
    }

    package let routes: [Route]

    package init(routes: [Route]) {
        self.routes = routes
    }

    package func route(forTopic topic: String, in environment: APNsEnvironment) -> Route? {
        routes.first { $0.covers(topic, in: environment) }
    }

    package func coverage(ofTopic topic: String, in environment: APNsEnvironment) -> CredentialCoverage {
        if let route = route(forTopic: topic, in: environment) { return .covered(route.authentication) }
        let elsewhere = routes.filter { $0.covers(topic) }.map(\.name)
        return elsewhere.isEmpty ? .uncovered : .otherEnvironmentOnly(credentials: elsewhere)
    }

    package var credentialNames: [String] { routes.map(\.name) }

    package func credentialName(forTopic topic: String, in environment: APNsEnvironment) -> String {
        route(forTopic: topic, in: environment)?.name ?? "default"
    }

    package func send(
        _ notification: APNsNotification, deadline: ContinuousClock.Instant,
        completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
    ) {
        guard let route = route(forTopic: notification.topic, in: notification.environment) else {
            return completion(.failure(NoRoute(topic: notification.topic, environment: notification.environment)))
        }
        route.sender.send(notification, deadline: deadline, completion: completion)
    }

    package func holdUnsentRequests() {
        for route in routes { route.sender.holdUnsentRequests() }
    }
}
