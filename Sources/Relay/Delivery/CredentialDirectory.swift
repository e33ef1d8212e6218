import APNsCore

/// The credentials the relay sends with, and which one sends a (topic, environment): triage asks once per
/// event (`lookup`), and the answer — the credential's name, how it authenticates and its sender — travels with
/// the event to its delivery and its token-removal check.
///
/// APNs binds a connection to one team (token auth) or one app (certificate), so every credential has its
/// own client and connections. A credential covers bundle ids (`com.example.app` also covers its push-type
/// topics such as `com.example.app.voip`; `com.example.*` covers every bundle id under `com.example.`); one
/// with no patterns covers every topic. It covers them in its environments only: since 2025 Apple lets a
/// team restrict a key to the sandbox or to production, and a restricted key used in the other environment
/// is refused (403 BadEnvironmentKeyInToken). The first matching credential wins.
package struct CredentialDirectory: Sendable {
    /// One credential. A class: every event to deliver carries its credential, and a reference costs one
    /// retain where the fields would cost four.
    package final class Credential: Sendable {
        /// The credential's name (in logs and the token-removal guard's metrics).
        package let name: String
        package let patterns: [String]
        package let environments: Set<APNsEnvironment>
        package let authentication: AuthenticationKind
        package let sender: any NotificationSender

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

    /// Which credential, if any, sends a (topic, environment).
    package enum Lookup: Sendable {
        /// This credential covers it.
        case covered(Credential)
        /// No credential covers the topic in this environment; these do in the other (`environments`).
        case otherEnvironmentOnly(credentials: [String])
        /// No credential covers the topic at all.
        case uncovered
    }

    package let credentials: [Credential]

    package init(_ credentials: [Credential]) {
        self.credentials = credentials
    }

    package func lookup(topic: String, in environment: APNsEnvironment) -> Lookup {
        if let credential = credentials.first(where: { $0.covers(topic, in: environment) }) { return .covered(credential) }
        let elsewhere = credentials.filter { $0.covers(topic) }.map(\.name)
        return elsewhere.isEmpty ? .uncovered : .otherEnvironmentOnly(credentials: elsewhere)
    }

    /// Every credential's name (for the per-credential series made at start).
    package var names: [String] { credentials.map(\.name) }

    /// Every sender holds its unsent requests (see `NotificationSender.holdUnsentRequests()`).
    package func holdUnsentRequests() {
        for credential in credentials { credential.sender.holdUnsentRequests() }
    }
}
