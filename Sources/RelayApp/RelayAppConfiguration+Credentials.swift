import APNsCore
import Relay

/// The APNs credentials: the unnamed one (`apns.auth`, `apns.token.*`, `apns.certificate.*`) and the named
/// ones (`apns.credentials`, `apns.credential.NAME.*`), each scoped by bundle ids (`topics`) and APNs
/// environments (`environments`).
extension RelayAppConfiguration {
    /// Reads every credential, then checks that each (topic, environment) claim can be reached: the first
    /// credential that covers an event's topic in its environment sends it, so a later claim that an earlier
    /// one already covers would never be used (two keys for one app in one environment).
    /// - Returns: the credentials in routing order, the names `apns.credentials` lists, and notices for
    ///   environments a credential's bundle ids are not covered in at all.
    static func credentials(_ settings: SettingsReader, required: Bool) -> (credentials: [APNs.Credential], named: [String], notices: [String]) {
        var credentials: [APNs.Credential] = []
        let named = settings.list("apns.credentials", default: [])
        // The unnamed credential is required unless named ones exist; it comes first.
        if let fallback = Self.credential(settings, prefix: "apns.", name: "default", required: named.isEmpty && required) {
            credentials.append(fallback)
        }
        for name in named {
            guard let credential = Self.credential(settings, prefix: "apns.credential.\(name).", name: name, required: true) else { continue }
            guard !credential.topics.isEmpty else {
                settings.problem("credential '\(name)' needs apns.credential.\(name).topics: the bundle ids it pushes to")
                continue
            }
            credentials.append(credential)
        }
        for problem in unreachableClaims(credentials) { settings.problem(problem) }
        return (credentials, named, coverageGaps(credentials))
    }

    /// Why `value` is not one of Apple's 10-character ids (Key ID, Team ID: A–Z and 0–9), or `nil` when it is.
    package static func appleIDProblem(_ value: String, what: String) -> String? {
        let allowed = value.unicodeScalars.allSatisfy { ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
        if value.count == 10 && allowed { return nil }
        var found: [String] = []
        if value.count != 10 { found.append("\(value.count) character\(value.count == 1 ? "" : "s")") }
        if value.unicodeScalars.contains(where: { ("a"..."z").contains($0) }) { found.append("lowercase letters") }
        let others = Set(value.unicodeScalars.filter { !("A"..."Z").contains($0) && !("a"..."z").contains($0) && !("0"..."9").contains($0) })
        if !others.isEmpty {
            let shown = others.map { $0 == " " ? "space" : $0.properties.isWhitespace ? "whitespace" : "'\($0)'" }.sorted()
            found.append("other characters (\(shown.joined(separator: ", ")))")
        }
        return "'\(value)' is not an Apple \(what): those are 10 characters, A–Z and 0–9 (this has \(found.joined(separator: ", ")))"
    }

    /// `apns.environments` / `apns.credential.NAME.environments`: empty (the default) means both.
    static func environments(_ settings: SettingsReader, _ key: String) -> Set<APNsEnvironment> {
        var environments: Set<APNsEnvironment> = []
        for name in settings.list(key, default: []) {
            switch name.lowercased() {
            case "production": environments.insert(.production)
            case "development", "sandbox": environments.insert(.development)
            default: settings.invalid(key, "'\(name)' is not an APNs environment: production or development (sandbox)")
            }
        }
        return environments.isEmpty ? Set(APNsEnvironment.allCases) : environments
    }

    /// A claim (bundle id pattern, environment) of a credential that an earlier credential already covers.
    static func unreachableClaims(_ credentials: [APNs.Credential]) -> [String] {
        var problems: [String] = []
        for (index, later) in credentials.enumerated() {
            for pattern in later.claimedPatterns {
                for environment in APNsEnvironment.allCases where later.environments.contains(environment) {
                    guard let earlier = credentials[..<index].first(where: { $0.covers(pattern: pattern, in: environment) }) else { continue }
                    let claim = pattern ?? "every topic"
                    problems.append(
                        "credentials '\(earlier.name)' and '\(later.name)' both claim \(claim) in \(environment.rawValue): "
                            + "'\(earlier.name)' is listed first and would send all of it, so '\(later.name)' never would. "
                            + "Give each the environment its key is for (\(earlier.keyPrefix)environments, \(later.keyPrefix)environments) "
                            + "or bundle ids of its own (\(earlier.keyPrefix)topics, \(later.keyPrefix)topics)")
                }
            }
        }
        return problems
    }

    /// Whether every topic `pattern` matches is matched by `covering` too (`CredentialDirectory.Credential.matches`).
    package static func covers(_ covering: String, _ pattern: String) -> Bool {
        let base = pattern.hasSuffix(".*") ? String(pattern.dropLast()) : pattern
        if covering.hasSuffix(".*") { return base.hasPrefix(covering.dropLast()) }
        return base == covering || base.hasPrefix(covering + ".")
    }

    /// Bundle ids a credential pushes to in one environment only, that no credential covers in the other:
    /// the other environment's events to them are answered `invalid` (NoCredentialForEnvironment).
    static func coverageGaps(_ credentials: [APNs.Credential]) -> [String] {
        var notices: [String] = []
        for credential in credentials where credential.environments.count < APNsEnvironment.allCases.count {
            for environment in APNsEnvironment.allCases where !credential.environments.contains(environment) {
                let uncovered = credential.claimedPatterns.filter { pattern in
                    !credentials.contains { $0.covers(pattern: pattern, in: environment) }
                }
                guard !uncovered.isEmpty else { continue }
                let topics = uncovered.map { $0 ?? "any topic" }.joined(separator: ", ")
                let only = credential.environments.map(\.rawValue).sorted().joined(separator: ", ")
                notices.append(
                    "credential '\(credential.name)' pushes \(topics) in \(only) only (\(credential.keyPrefix)environments) and no credential "
                        + "covers \(uncovered.count == 1 ? "it" : "them") in \(environment.rawValue): such events are answered invalid "
                        + "(NoCredentialForEnvironment)")
            }
        }
        return notices
    }

    /// Reads one credential under `prefix` (`apns.` or `apns.credential.NAME.`).
    /// - Returns: `nil` when nothing is configured there and `required` is false.
    /// Problems are recorded in `settings`.
    static func credential(_ settings: SettingsReader, prefix: String, name: String, required: Bool) -> APNs.Credential? {
        // Known whichever kind is chosen: a key of the other kind is unused, not misspelt.
        settings.declare(credentialKeys.map { prefix + $0 })
        let kind = settings.oneOf(prefix + "auth", default: AuthenticationKind.token, ["token": .token, "certificate": .certificate])
        let topics = settings.list(prefix + "topics", default: [])
        let environments = Self.environments(settings, prefix + "environments")
        switch kind {
        case .token:
            let keyIDValue = settings.string(prefix + "token.keyId")
            let keyIDFile = settings.string(prefix + "token.keyIdFile")
            let teamID = settings.string(prefix + "token.teamId")
            let keyFile = settings.string(prefix + "token.privateKeyFile")
            if keyIDValue == nil, keyIDFile == nil, teamID == nil, keyFile == nil, !required { return nil }
            if keyIDValue != nil, keyIDFile != nil {
                settings.problem("set \(prefix)token.keyId or \(prefix)token.keyIdFile, not both")
                return nil
            }
            guard let keyID = keyIDValue.map(APNs.KeyID.value) ?? keyIDFile.map(APNs.KeyID.file), let teamID, let keyFile else {
                let variable = "APNS_RELAY_" + environmentName(forKey: prefix + "token")
                settings.problem("token auth needs \(prefix)token.keyId, \(prefix)token.teamId and \(prefix)token.privateKeyFile (\(variable)_KEY_ID, …_TEAM_ID, …_PRIVATE_KEY_FILE); \(prefix)token.keyIdFile can stand for the key id")
                return nil
            }
            var malformed = false
            for (key, value, what) in [("token.keyId", keyIDValue, "Key ID"), ("token.teamId", teamID, "Team ID")] {
                guard let value, let problem = Self.appleIDProblem(value, what: what) else { continue }
                settings.invalid(prefix + key, problem)
                malformed = true
            }
            if malformed { return nil }
            let minutes = settings.int(prefix + "token.rotationMinutes", default: APNs.tokenRotationMinutes, range: 20...34)
            return APNs.Credential(
                name: name, keyPrefix: prefix,
                auth: .token(keyID: keyID, teamID: teamID, privateKeyFile: keyFile, rotationEpoch: .seconds(minutes * 60)),
                topics: topics, environments: environments
            )
        case .certificate:
            if let p12 = settings.string(prefix + "certificate.pkcs12File") {
                return APNs.Credential(
                    name: name, keyPrefix: prefix, auth: .certificate(.pkcs12(file: p12, passphraseFile: settings.string(prefix + "certificate.passphraseFile"))),
                    topics: topics, environments: environments
                )
            }
            if let cert = settings.string(prefix + "certificate.certificateFile"), let key = settings.string(prefix + "certificate.privateKeyFile") {
                return APNs.Credential(name: name, keyPrefix: prefix, auth: .certificate(.pem(certificateFile: cert, privateKeyFile: key)),
                                       topics: topics, environments: environments)
            }
            settings.problem("certificate auth needs \(prefix)certificate.pkcs12File, or \(prefix)certificate.certificateFile and \(prefix)certificate.privateKeyFile")
            return nil
        }
    }

    static let credentialKeys = [
        "auth", "topics", "environments", "token.keyId", "token.keyIdFile", "token.teamId", "token.privateKeyFile", "token.rotationMinutes",
        "certificate.pkcs12File", "certificate.passphraseFile", "certificate.certificateFile", "certificate.privateKeyFile",
    ]
}

extension RelayAppConfiguration.APNs.Credential {
    /// Its bundle id patterns; `nil` alone for a credential without topics, which claims every topic.
    var claimedPatterns: [String?] { topics.isEmpty ? [nil] : topics.map(Optional.some) }

    /// Whether it sends every topic `pattern` matches (`nil`: every topic) in `environment`.
    func covers(pattern: String?, in environment: APNsEnvironment) -> Bool {
        guard environments.contains(environment) else { return false }
        if topics.isEmpty { return true }
        guard let pattern else { return false }
        return topics.contains { RelayAppConfiguration.covers($0, pattern) }
    }

    /// Whether this credential sends pushes to `topic` in `environment` (as `CredentialDirectory` finds them).
    package func covers(_ topic: String, in environment: APNsEnvironment) -> Bool {
        environments.contains(environment) && (topics.isEmpty || topics.contains { CredentialDirectory.Credential.matches(topic, $0) })
    }
}
