import APNsClient
import APNsCore
import Configuration
import Foundation
import Kafka
import Relay

/// Everything `apns-relay run` needs, read from a file (YAML or JSON), the environment (`APNS_RELAY_*`)
/// and flags, in increasing precedence. Every key, its default and its variable are listed in README.md.
///
/// Secrets (the `.p8` key, certificate keys, passphrases) are read from files named here, never from the
/// configuration itself, and are never printed.
package struct RelayAppConfiguration: Sendable {
    package struct Kafka: Sendable {
        package var bootstrapServers: [String]
        package var groupID: String
        package var clientID: String
        package var sessionTimeout: Duration
        package var maxPollInterval: Duration
        package var assignmentStrategy: KafkaPartitionAssignmentStrategy
        package var statisticsInterval: Duration
        /// How often stored offsets are committed; bounds the duplicates a crash can cause.
        package var autoCommitInterval: Duration
        /// librdkafka properties for both clients (SASL/SSL and anything else), then per client.
        package var properties: [String: String]
        package var consumerProperties: [String: String]
        package var producerProperties: [String: String]
    }

    package struct APNs: Sendable {
        package enum Auth: Sendable {
            case token(keyID: String, teamID: String, privateKeyFile: String, rotationEpoch: Duration)
            case certificate(ClientCertificateSource)
        }

        package struct Credential: Sendable {
            package var name: String
            /// Where its keys are: `apns.` for the unnamed one, `apns.credential.NAME.` for named ones.
            package var keyPrefix: String = "apns."
            package var auth: Auth
            /// Bundle ids (`com.example.app`, or `com.example.*`) this credential pushes to; empty: any.
            package var topics: [String]
        }

        package enum ClientCertificateSource: Sendable {
            case pem(certificateFile: String, privateKeyFile: String)
            case pkcs12(file: String, passphraseFile: String?)
        }

        /// One credential per team or certificate, each with its own connections (APNs binds a connection
        /// to one team). The first whose `topics` match an event's topic sends it; empty `topics` match any.
        package var credentials: [Credential]
        package var endpoints: [APNsEnvironment: APNsClientConfiguration.Endpoint]
        /// A CA bundle to trust instead of the system store (the mock's CA in tests and the demo).
        package var caFile: String?
        package var insecureSkipVerify: Bool
        package var minConnections: Int
        package var maxConnections: Int
        package var connectTimeout: Duration
    }

    package struct Admin: Sendable {
        package var host: String
        /// 0 disables the admin endpoint.
        package var port: Int
    }

    package enum LogFormat: String, Sendable { case json, text }

    package var kafka: Kafka
    package var apns: APNs
    package var relay: RelayConfiguration
    package var admin: Admin
    package var logLevel: String
    package var logFormat: LogFormat

    /// Reads and checks the configuration.
    /// - Throws: `ConfigurationError` listing every problem found, each naming its key: values of the wrong
    ///   type or range, missing or contradictory settings, and keys no part of the relay reads.
    package init(reader sources: ConfigurationSources) throws {
        let settings = SettingsReader(sources: sources)

        let servers = settings.list("kafka.bootstrapServers", default: [])
        if servers.isEmpty, !settings.wasRefused("kafka.bootstrapServers") {
            settings.problem("configuration key 'kafka.bootstrapServers' (APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS) is required, e.g. broker-1:9092,broker-2:9092")
        }
        kafka = Kafka(
            bootstrapServers: servers,
            groupID: settings.string("kafka.groupId", default: "apns-relay"),
            clientID: settings.string("kafka.clientId", default: "apns-relay"),
            sessionTimeout: settings.milliseconds("kafka.sessionTimeoutMs", default: .seconds(45), range: 1000...3_600_000),
            maxPollInterval: settings.milliseconds("kafka.maxPollIntervalMs", default: .seconds(300), range: 1000...86_400_000),
            // Not cooperative-sticky by default: librdkafka before 2.3 aborts in rd_kafka_destroy when that
            // assignor's state was never set (librdkafka #4312), which Debian 12's 2.0.2 hits on shutdown.
            assignmentStrategy: settings.oneOf("kafka.assignmentStrategy", default: KafkaPartitionAssignmentStrategy(assignors: ["range"]), [
                "cooperative-sticky": .cooperativeSticky, "range": KafkaPartitionAssignmentStrategy(assignors: ["range"]),
                "roundrobin": KafkaPartitionAssignmentStrategy(assignors: ["roundrobin"]),
            ]),
            statisticsInterval: settings.milliseconds("kafka.statisticsIntervalMs", default: .seconds(15)),
            autoCommitInterval: settings.milliseconds("kafka.autoCommitIntervalMs", default: .seconds(1), range: 10...60_000),
            properties: settings.properties("kafka.properties"),
            consumerProperties: settings.properties("kafka.consumerProperties"),
            producerProperties: settings.properties("kafka.producerProperties")
        )

        let topics = RelayConfiguration.Topics(
            input: settings.list("kafka.topics.input", default: ["apns-notifications"]),
            results: settings.string("kafka.topics.results", default: "apns-results"),
            removedTokens: settings.string("kafka.topics.removedTokens", default: "apns-removed-tokens"),
            deadLetters: settings.string("kafka.topics.deadLetters", default: "apns-dead-letters")
        )
        if topics.input.isEmpty { settings.problem("configuration key 'kafka.topics.input' lists no topic") }
        let outputs = [topics.results, topics.removedTokens, topics.deadLetters]
        if let loop = outputs.first(where: topics.input.contains) {
            settings.problem("topic '\(loop)' is both an input and an output topic; the relay would consume its own records")
        }

        var credentials: [APNs.Credential] = []
        let named = settings.list("apns.credentials", default: [])
        // The unnamed credential (apns.auth, apns.token.*, apns.certificate.*) is required unless named ones exist.
        if let fallback = Self.credential(settings, prefix: "apns.", name: "default", required: named.isEmpty) {
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
        var endpoints: [APNsEnvironment: APNsClientConfiguration.Endpoint] = [:]
        for environment in APNsEnvironment.allCases {
            endpoints[environment] = APNsClientConfiguration.Endpoint(
                host: settings.string("apns.\(environment.rawValue).host", default: environment.host),
                port: settings.int("apns.\(environment.rawValue).port", default: 443, range: 1...65535)
            )
        }
        let minConnections = settings.int("apns.pool.minConnections", default: 1, range: 0...1000)
        let maxConnections = settings.int("apns.pool.maxConnections", default: 8, range: 1...1000)
        if minConnections > maxConnections {
            settings.problem("apns.pool.minConnections (\(minConnections)) is above apns.pool.maxConnections (\(maxConnections))")
        }
        apns = APNs(
            credentials: credentials, endpoints: endpoints, caFile: settings.string("apns.caFile"),
            insecureSkipVerify: settings.bool("apns.insecureSkipVerify", default: false),
            minConnections: minConnections, maxConnections: maxConnections,
            connectTimeout: settings.milliseconds("apns.connectTimeoutMs", default: .seconds(10), range: 100...120_000)
        )

        var relay = RelayConfiguration(topics: topics)
        relay.maxEventBytes = settings.int("relay.maxEventBytes", default: 64 * 1024, range: 1...(64 * 1024))
        relay.maxDeadLetterBytes = settings.int("relay.maxDeadLetterBytes", default: 900 * 1024, range: 1024...(64 << 20))
        relay.requestTimeout = settings.milliseconds("relay.requestTimeoutMs", default: .seconds(10), range: 100...300_000)
        relay.inFlight = InFlightGate.Limits(
            maxEvents: settings.int("relay.maxInFlightEvents", default: 10_000, range: 1...1_000_000),
            maxBytes: settings.int("relay.maxInFlightBytes", default: 64 << 20, range: 1024...(8 << 30))
        )
        relay.drainTimeout = settings.milliseconds("relay.drainTimeoutMs", default: .seconds(20), range: 0...600_000)
        relay.revocationDrainTimeout = settings.milliseconds("relay.revocationDrainTimeoutMs", default: .seconds(10), range: 0...600_000)
        relay.retry = RetryPolicy(
            maxAttempts: settings.int("relay.retry.maxAttempts", default: 8, range: 1...100),
            initialBackoff: settings.milliseconds("relay.retry.initialBackoffMs", default: .milliseconds(100), range: 1...600_000),
            maxBackoff: settings.milliseconds("relay.retry.maxBackoffMs", default: .seconds(30), range: 1...3_600_000)
        )
        relay.tokenRemoval.badDeviceTokenPercent = settings.int("relay.tokenRemoval.badDeviceTokenPercent", default: 50, range: 1...100)
        relay.tokenRemoval.minimumSample = settings.int("relay.tokenRemoval.minimumSample", default: 200, range: 1...1_000_000)
        relay.tokenRemoval.window = settings.milliseconds("relay.tokenRemoval.windowMs", default: .seconds(60), range: 1000...3_600_000)
        self.relay = relay

        admin = Admin(
            host: settings.string("admin.host", default: "0.0.0.0"),
            port: settings.int("admin.port", default: 9090, range: 0...65535)
        )
        logLevel = settings.oneOf("log.level", default: "info", Dictionary(uniqueKeysWithValues: ["trace", "debug", "info", "notice", "warning", "error", "critical"].map { ($0, $0) }))
        logFormat = settings.oneOf("log.format", default: .json, ["json": .json, "text": .text])
        settings.checkUnknownKeys(credentials: named)
        try settings.checkNoProblems()
    }

    /// The layered sources: `overrides` (flags, `key=value`), then `APNS_RELAY_*` variables, then the file.
    ///
    /// - Parameters:
    ///   - file: a `.yaml`/`.yml` or `.json` file, or `nil`.
    ///   - environment: the process environment; only `APNS_RELAY_`-prefixed variables are read.
    /// - Throws: `RelayError` naming the file when it cannot be read or parsed.
    package static func reader(file: String?, environment: [String: String], overrides: [String: String]) async throws -> ConfigurationSources {
        try await ConfigurationSources(file: file, environment: environment, overrides: overrides)
    }

    /// Reads one credential under `prefix` (`apns.` or `apns.credential.NAME.`).
    /// - Returns: `nil` when nothing is configured there and `required` is false.
    /// Problems are recorded in `settings`.
    static func credential(_ settings: SettingsReader, prefix: String, name: String, required: Bool) -> APNs.Credential? {
        // Known whichever kind is chosen: a key of the other kind is unused, not misspelt.
        settings.declare(credentialKeys.map { prefix + $0 })
        let kind = settings.oneOf(prefix + "auth", default: AuthenticationKind.token, ["token": .token, "certificate": .certificate])
        let topics = settings.list(prefix + "topics", default: [])
        switch kind {
        case .token:
            let keyID = settings.string(prefix + "token.keyId")
            let teamID = settings.string(prefix + "token.teamId")
            let keyFile = settings.string(prefix + "token.privateKeyFile")
            if keyID == nil, teamID == nil, keyFile == nil, !required { return nil }
            guard let keyID, let teamID, let keyFile else {
                let variable = "APNS_RELAY_" + environmentName(forKey: prefix + "token")
                settings.problem("token auth needs \(prefix)token.keyId, \(prefix)token.teamId and \(prefix)token.privateKeyFile (\(variable)_KEY_ID, …_TEAM_ID, …_PRIVATE_KEY_FILE)")
                return nil
            }
            let minutes = settings.int(prefix + "token.rotationMinutes", default: 30, range: 20...35)
            return APNs.Credential(
                name: name, keyPrefix: prefix,
                auth: .token(keyID: keyID, teamID: teamID, privateKeyFile: keyFile, rotationEpoch: .seconds(minutes * 60)),
                topics: topics
            )
        case .certificate:
            if let p12 = settings.string(prefix + "certificate.pkcs12File") {
                return APNs.Credential(
                    name: name, keyPrefix: prefix, auth: .certificate(.pkcs12(file: p12, passphraseFile: settings.string(prefix + "certificate.passphraseFile"))),
                    topics: topics
                )
            }
            if let cert = settings.string(prefix + "certificate.certificateFile"), let key = settings.string(prefix + "certificate.privateKeyFile") {
                return APNs.Credential(name: name, keyPrefix: prefix, auth: .certificate(.pem(certificateFile: cert, privateKeyFile: key)), topics: topics)
            }
            settings.problem("certificate auth needs \(prefix)certificate.pkcs12File, or \(prefix)certificate.certificateFile and \(prefix)certificate.privateKeyFile")
            return nil
        }
    }

    static let credentialKeys = [
        "auth", "topics", "token.keyId", "token.teamId", "token.privateKeyFile", "token.rotationMinutes",
        "certificate.pkcs12File", "certificate.passphraseFile", "certificate.certificateFile", "certificate.privateKeyFile",
    ]

    /// `kafka.bootstrapServers` → `KAFKA_BOOTSTRAP_SERVERS` (the variable name, without `APNS_RELAY_`).
    package static func environmentName(forKey key: String) -> String {
        var name = ""
        var previousWasLower = false
        for character in key {
            if character == "." || character == "-" {
                name.append("_")
                previousWasLower = false
            } else if character.isUppercase {
                if previousWasLower { name.append("_") }
                name.append(character)
                previousWasLower = false
            } else {
                name.append(contentsOf: character.uppercased())
                previousWasLower = character.isLowercase || character.isNumber
            }
        }
        return name
    }
}
