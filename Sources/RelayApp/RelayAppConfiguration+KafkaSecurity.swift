import Foundation
import Kafka
import Relay

extension RelayAppConfiguration {
    /// How the relay proves who it is to Kafka and protects the connection (`kafka.sasl.*`, `kafka.tls.*`).
    ///
    /// Secrets are named by file, as a Kubernetes Secret mounted as files gives them, never written in the
    /// configuration: a password in an environment variable or a flag shows in `kubectl describe`, in
    /// `/proc/PID/environ` and in crash reports. Files are read when a Kafka client is made; the SASL
    /// password file again every `kafka.sasl.reloadIntervalMs` (`KafkaPasswordWatcher`).
    package struct KafkaSecurity: Sendable, Equatable {
        package enum Mechanism: String, Sendable, CaseIterable {
            case plain = "PLAIN"
            case scramSHA256 = "SCRAM-SHA-256"
            case scramSHA512 = "SCRAM-SHA-512"
            case oauthBearer = "OAUTHBEARER"
        }

        /// OAUTHBEARER with OIDC client credentials: librdkafka asks the token endpoint for a token with the
        /// client id and secret, and again before it expires.
        package struct OAuthBearer: Sendable, Equatable {
            package var tokenEndpointURL: String
            package var clientID: String
            package var clientSecretFile: String
            package var scope: String?
        }

        package struct SASL: Sendable, Equatable {
            package var mechanism: Mechanism
            /// PLAIN and SCRAM: the user and the file holding its password.
            package var username: String?
            package var passwordFile: String?
            package var oauthBearer: OAuthBearer?
        }

        package struct TLS: Sendable, Equatable {
            /// The CA bundle that signed the brokers' certificates; `nil`: the system's.
            package var caFile: String?
            /// The client certificate and its key (mutual TLS), PEM.
            package var certFile: String?
            package var keyFile: String?
            /// The file holding the key's passphrase, for an encrypted key.
            package var keyPasswordFile: String?
        }

        package var sasl: SASL?
        package var tls: TLS?
        /// `kafka.sasl.reloadIntervalMs`: how often the password file is read again; `nil` (0): never.
        package var passwordReloadInterval: Duration? = .seconds(10)

        package var isConfigured: Bool { sasl != nil || tls != nil }

        /// librdkafka's `security.protocol`; `nil`: librdkafka's default, `plaintext`.
        package var securityProtocol: String? {
            switch (sasl != nil, tls != nil) {
            case (true, true): "sasl_ssl"
            case (true, false): "sasl_plaintext"
            case (false, true): "ssl"
            case (false, false): nil
            }
        }

        /// Who the relay says it is, for messages: the mechanism and user, never a secret.
        package var summary: String {
            var parts: [String] = []
            if let sasl {
                switch sasl.mechanism {
                case .oauthBearer:
                    parts.append("SASL OAUTHBEARER (OIDC client '\(sasl.oauthBearer?.clientID ?? "?")' at \(sasl.oauthBearer?.tokenEndpointURL ?? "?"))")
                default:
                    parts.append("SASL \(sasl.mechanism.rawValue) as user '\(sasl.username ?? "?")'")
                }
            }
            if let tls {
                parts.append(tls.certFile != nil ? "TLS with client certificate '\(tls.certFile!)'" : "TLS")
            }
            return parts.isEmpty ? "plaintext, no authentication" : parts.joined(separator: " over ")
        }

        /// The keys to look at when a broker refuses the relay.
        package var keysToCheck: String {
            var keys: [String] = []
            if let sasl {
                keys += sasl.mechanism == .oauthBearer
                    ? ["kafka.sasl.oauthbearer.clientId", "kafka.sasl.oauthbearer.clientSecretFile", "kafka.sasl.oauthbearer.tokenEndpointUrl"]
                    : ["kafka.sasl.mechanism", "kafka.sasl.username", "kafka.sasl.passwordFile"]
            }
            if tls != nil { keys += ["kafka.tls.caFile", "kafka.tls.certFile", "kafka.tls.keyFile"] }
            return keys.isEmpty ? "kafka.properties" : keys.joined(separator: ", ")
        }

        /// librdkafka properties these settings decide: `kafka.properties` may not set them beside them.
        static func managedProperties(sasl: Bool, tls: Bool) -> Set<String> {
            var names: Set<String> = ["security.protocol"]
            if sasl {
                names.formUnion([
                    "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "sasl.oauthbearer.method",
                    "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.token.endpoint.url",
                    "sasl.oauthbearer.scope",
                ])
            }
            if tls { names.formUnion(["ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password"]) }
            return names
        }

        /// The librdkafka properties these settings stand for, with the secrets read from their files.
        /// - Throws: `RelayError` naming the key and the file (never its contents) when a file cannot be read
        ///   or is empty, or when this librdkafka cannot do what is asked (OIDC without libcurl).
        package func librdkafkaProperties() throws -> [String: String] {
            var properties: [String: String] = [:]
            if let securityProtocol { properties["security.protocol"] = securityProtocol }
            if let sasl {
                properties["sasl.mechanism"] = sasl.mechanism.rawValue
                if let oauth = sasl.oauthBearer {
                    guard KafkaLibrary.hasOIDC else {
                        throw RelayError("kafka.sasl.mechanism OAUTHBEARER with kafka.sasl.oauthbearer.tokenEndpointUrl needs a librdkafka built with OIDC support (libcurl); this one (\(KafkaLibrary.version)) lacks it: its builtin.features are \(KafkaLibrary.builtinFeatures.sorted().joined(separator: ",")). The apns-relay image's librdkafka has it")
                    }
                    properties["sasl.oauthbearer.method"] = "oidc"
                    properties["sasl.oauthbearer.token.endpoint.url"] = oauth.tokenEndpointURL
                    properties["sasl.oauthbearer.client.id"] = oauth.clientID
                    properties["sasl.oauthbearer.client.secret"] = try Self.secret(oauth.clientSecretFile, key: "kafka.sasl.oauthbearer.clientSecretFile")
                    if let scope = oauth.scope { properties["sasl.oauthbearer.scope"] = scope }
                } else if let username = sasl.username, let passwordFile = sasl.passwordFile {
                    properties["sasl.username"] = username
                    properties["sasl.password"] = try Self.secret(passwordFile, key: "kafka.sasl.passwordFile")
                }
            }
            if let tls {
                for (file, key) in [(tls.caFile, "kafka.tls.caFile"), (tls.certFile, "kafka.tls.certFile"), (tls.keyFile, "kafka.tls.keyFile")] {
                    if let file, !FileManager.default.isReadableFile(atPath: file) {
                        throw RelayError("the file '\(file)' (\(key)) does not exist or cannot be read")
                    }
                }
                if let caFile = tls.caFile { properties["ssl.ca.location"] = caFile }
                if let certFile = tls.certFile { properties["ssl.certificate.location"] = certFile }
                if let keyFile = tls.keyFile { properties["ssl.key.location"] = keyFile }
                if let keyPasswordFile = tls.keyPasswordFile {
                    properties["ssl.key.password"] = try Self.secret(keyPasswordFile, key: "kafka.tls.keyPasswordFile")
                }
            }
            return properties
        }

        /// A secret file's text without the line end an editor or `kubectl create secret --from-file` leaves.
        /// - Throws: `RelayError` naming the key and the file, never what it holds.
        package static func secret(_ path: String, key: String) throws -> String {
            guard let data = FileManager.default.contents(atPath: path) else {
                let why = FileManager.default.fileExists(atPath: path) ? "cannot be read (its permissions?)" : "does not exist"
                throw RelayError("the file '\(path)' (\(key)) \(why)")
            }
            var text = String(decoding: data, as: UTF8.self)
            while let last = text.last, last == "\n" || last == "\r" { text.removeLast() }
            if text.isEmpty { throw RelayError("the file '\(path)' (\(key)) is empty") }
            return text
        }
    }

    /// Reads `kafka.sasl.*` and `kafka.tls.*`, recording every problem: a mechanism without what it needs,
    /// keys of another mechanism, and `kafka.properties` that set what these keys decide.
    static func kafkaSecurity(_ settings: SettingsReader, properties: [[String: String]], notices: inout [String]) -> KafkaSecurity {
        var security = KafkaSecurity()
        let mechanismText = settings.string("kafka.sasl.mechanism", default: "")
        let username = settings.string("kafka.sasl.username")
        let passwordFile = settings.string("kafka.sasl.passwordFile")
        let endpoint = settings.string("kafka.sasl.oauthbearer.tokenEndpointUrl")
        let clientID = settings.string("kafka.sasl.oauthbearer.clientId")
        let clientSecretFile = settings.string("kafka.sasl.oauthbearer.clientSecretFile")
        let scope = settings.string("kafka.sasl.oauthbearer.scope")
        let reload = settings.milliseconds("kafka.sasl.reloadIntervalMs", default: security.passwordReloadInterval ?? .zero, range: 0...3_600_000)
        security.passwordReloadInterval = reload > .zero ? reload : nil
        let passwordKeys = [("kafka.sasl.username", username), ("kafka.sasl.passwordFile", passwordFile)]
        let oauthKeys = [
            ("kafka.sasl.oauthbearer.tokenEndpointUrl", endpoint), ("kafka.sasl.oauthbearer.clientId", clientID),
            ("kafka.sasl.oauthbearer.clientSecretFile", clientSecretFile), ("kafka.sasl.oauthbearer.scope", scope),
        ]
        func given(_ keys: [(String, String?)]) -> [String] { keys.filter { !($0.1 ?? "").isEmpty }.map(\.0) }

        if !mechanismText.isEmpty {
            if let mechanism = KafkaSecurity.Mechanism(rawValue: mechanismText.uppercased()) {
                var sasl = KafkaSecurity.SASL(mechanism: mechanism)
                if mechanism == .oauthBearer {
                    let missing = oauthKeys.dropLast().filter { ($0.1 ?? "").isEmpty }.map(\.0)
                    if !missing.isEmpty {
                        settings.problem("kafka.sasl.mechanism OAUTHBEARER needs \(missing.joined(separator: ", ")) (OIDC client credentials: librdkafka fetches and renews the token)")
                    } else {
                        sasl.oauthBearer = .init(tokenEndpointURL: endpoint!, clientID: clientID!, clientSecretFile: clientSecretFile!, scope: scope.flatMap { $0.isEmpty ? nil : $0 })
                        if !endpoint!.hasPrefix("https://") && !endpoint!.hasPrefix("http://") {
                            settings.invalid("kafka.sasl.oauthbearer.tokenEndpointUrl", "'\(endpoint!)' is not an https:// URL")
                        }
                    }
                    for key in given(passwordKeys) {
                        settings.problem("\(key) is for PLAIN and SCRAM; kafka.sasl.mechanism OAUTHBEARER authenticates with kafka.sasl.oauthbearer.*")
                    }
                } else {
                    let missing = passwordKeys.filter { ($0.1 ?? "").isEmpty }.map(\.0)
                    if !missing.isEmpty {
                        settings.problem("kafka.sasl.mechanism \(mechanism.rawValue) needs \(missing.joined(separator: " and ")) (the password in a file of its own, e.g. a mounted Secret)")
                    }
                    sasl.username = username
                    sasl.passwordFile = passwordFile
                    for key in given(oauthKeys) {
                        settings.problem("\(key) is for kafka.sasl.mechanism OAUTHBEARER, not \(mechanism.rawValue)")
                    }
                }
                security.sasl = sasl
            } else {
                settings.invalid("kafka.sasl.mechanism", "'\(mechanismText)' is not one of \(KafkaSecurity.Mechanism.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        } else if let first = given(passwordKeys + oauthKeys).first {
            settings.problem("\(first) is set but kafka.sasl.mechanism is not (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)")
        }

        let tlsEnabled = settings.bool("kafka.tls.enabled", default: false)
        let tls = KafkaSecurity.TLS(
            caFile: settings.string("kafka.tls.caFile").flatMap { $0.isEmpty ? nil : $0 },
            certFile: settings.string("kafka.tls.certFile").flatMap { $0.isEmpty ? nil : $0 },
            keyFile: settings.string("kafka.tls.keyFile").flatMap { $0.isEmpty ? nil : $0 },
            keyPasswordFile: settings.string("kafka.tls.keyPasswordFile").flatMap { $0.isEmpty ? nil : $0 })
        let tlsFiles = [("kafka.tls.caFile", tls.caFile), ("kafka.tls.certFile", tls.certFile), ("kafka.tls.keyFile", tls.keyFile), ("kafka.tls.keyPasswordFile", tls.keyPasswordFile)]
        if tlsEnabled || !given(tlsFiles).isEmpty {
            if settings.isSet("kafka.tls.enabled"), !tlsEnabled {
                settings.problem("kafka.tls.enabled is false but \(given(tlsFiles).joined(separator: ", ")) set: remove them, or enable TLS")
            }
            if (tls.certFile == nil) != (tls.keyFile == nil) {
                settings.problem("a client certificate needs both kafka.tls.certFile and kafka.tls.keyFile (\(tls.certFile == nil ? "kafka.tls.keyFile" : "kafka.tls.certFile") alone is set)")
            }
            if tls.keyPasswordFile != nil, tls.keyFile == nil {
                settings.problem("kafka.tls.keyPasswordFile is set but kafka.tls.keyFile is not")
            }
            security.tls = tls
        }

        let managed = KafkaSecurity.managedProperties(sasl: security.sasl != nil, tls: security.tls != nil)
        let sources = ["kafka.properties", "kafka.consumerProperties", "kafka.producerProperties"]
        for (source, given) in zip(sources, properties) {
            if security.isConfigured {
                for name in given.keys.sorted() where managed.contains(name) {
                    settings.problem("\(source) sets '\(name)', which kafka.sasl.* and kafka.tls.* decide: remove it from \(source)")
                }
            } else if given["sasl.password"] != nil {
                notices.append("\(source) holds sasl.password: a password in the configuration shows wherever the configuration does (a pod spec, the environment); set kafka.sasl.mechanism, kafka.sasl.username and kafka.sasl.passwordFile instead")
            }
        }
        return security
    }
}
