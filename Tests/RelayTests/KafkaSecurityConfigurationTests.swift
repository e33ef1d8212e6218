import Foundation
import Kafka
import Logging
import Relay
import RelayApp
import Synchronization
import Testing

/// `kafka.sasl.*` and `kafka.tls.*`: what each mechanism needs, what librdkafka is given, secrets read from
/// files (never from the configuration, never in a message), and `kafka.properties` kept from contradicting them.
@Suite struct KafkaSecurityConfigurationTests {
    private let minimal = [
        "kafka.bootstrapServers": "b:9092", "apns.token.keyId": "ABC123DEFG", "apns.token.teamId": "DEF123GHIJ", "apns.token.privateKeyFile": "/k.p8",
    ]

    private func configuration(_ overrides: [String: String], environment: [String: String] = [:]) async throws -> RelayAppConfiguration {
        let reader = try await RelayAppConfiguration.reader(file: nil, environment: environment, overrides: minimal.merging(overrides) { $1 })
        return try RelayAppConfiguration(reader: reader)
    }

    private func problems(_ overrides: [String: String]) async throws -> [String] {
        do {
            _ = try await configuration(overrides)
            return []
        } catch let error as ConfigurationError {
            return error.problems
        }
    }

    /// A file holding `text`, removed after `body`.
    private func withSecret<T>(_ text: String, _ body: (String) async throws -> T) async throws -> T {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try await body(path)
    }

    @Test func noSecurityKeysLeaveLibrdkafkasDefaults() async throws {
        let security = try await configuration([:]).kafka.security
        #expect(!security.isConfigured)
        #expect(try security.librdkafkaProperties().isEmpty)
        #expect(security.summary == "plaintext, no authentication")
    }

    @Test(arguments: ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "scram-sha-512"])
    func aPasswordMechanismReadsThePasswordFromItsFile(mechanism: String) async throws {
        let properties = try await withSecret("s3cr,et=\n") { file in
            try await configuration(["kafka.sasl.mechanism": mechanism, "kafka.sasl.username": "relay", "kafka.sasl.passwordFile": file])
                .kafka.security.librdkafkaProperties()
        }
        #expect(properties == [
            "security.protocol": "sasl_plaintext", "sasl.mechanism": mechanism.uppercased(),
            "sasl.username": "relay", "sasl.password": "s3cr,et=",
        ], "the file's line end is not part of the password; a comma or = in it is")
    }

    @Test func tlsAndSASLTogetherAreSASLSSL() async throws {
        try await withSecret("pw") { file in
            let security = try await configuration([
                "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.username": "relay", "kafka.sasl.passwordFile": file,
                "kafka.tls.enabled": "true",
            ]).kafka.security
            #expect(security.securityProtocol == "sasl_ssl")
            #expect(security.summary == "SASL SCRAM-SHA-512 as user 'relay' over TLS")
            #expect(try security.librdkafkaProperties()["ssl.ca.location"] == nil, "no CA file: the system's store")
        }
    }

    @Test func mutualTLSNamesTheFilesAndReadsTheKeyPassphrase() async throws {
        let files = ["ca.pem", "client.pem", "client.key"].map { FileManager.default.temporaryDirectory.appendingPathComponent("tls-\(UUID().uuidString)-\($0)").path }
        for file in files { try "PEM".write(toFile: file, atomically: true, encoding: .utf8) }
        defer { for file in files { try? FileManager.default.removeItem(atPath: file) } }
        let properties = try await withSecret("passphrase\n") { passphrase in
            try await configuration([
                "kafka.tls.caFile": files[0], "kafka.tls.certFile": files[1], "kafka.tls.keyFile": files[2], "kafka.tls.keyPasswordFile": passphrase,
            ]).kafka.security.librdkafkaProperties()
        }
        #expect(properties == [
            "security.protocol": "ssl", "ssl.ca.location": files[0], "ssl.certificate.location": files[1],
            "ssl.key.location": files[2], "ssl.key.password": "passphrase",
        ], "a TLS file alone turns TLS on")
    }

    @Test func oauthBearerUsesOIDCClientCredentials() async throws {
        try await withSecret("client-secret") { file in
            let security = try await configuration([
                "kafka.sasl.mechanism": "OAUTHBEARER", "kafka.sasl.oauthbearer.tokenEndpointUrl": "https://idp.example.com/oauth2/token",
                "kafka.sasl.oauthbearer.clientId": "apns-relay", "kafka.sasl.oauthbearer.clientSecretFile": file,
                "kafka.sasl.oauthbearer.scope": "kafka",
            ]).kafka.security
            #expect(security.summary == "SASL OAUTHBEARER (OIDC client 'apns-relay' at https://idp.example.com/oauth2/token)")
            if KafkaLibrary.hasOIDC {
                #expect(try security.librdkafkaProperties() == [
                    "security.protocol": "sasl_plaintext", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
                    "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/oauth2/token", "sasl.oauthbearer.client.id": "apns-relay",
                    "sasl.oauthbearer.client.secret": "client-secret", "sasl.oauthbearer.scope": "kafka",
                ])
            } else {
                // A librdkafka without libcurl (Debian 12's) cannot fetch tokens: said at start, naming the build.
                let error = #expect(throws: RelayError.self) { try security.librdkafkaProperties() }
                #expect(error?.description.contains("needs a librdkafka built with OIDC support") == true)
                #expect(error?.description.contains(KafkaLibrary.version) == true)
            }
        }
    }

    @Test func eachMechanismSaysWhatItLacks() async throws {
        #expect(try await problems(["kafka.sasl.mechanism": "SCRAM-SHA-256"]) == [
            "kafka.sasl.mechanism SCRAM-SHA-256 needs kafka.sasl.username and kafka.sasl.passwordFile (the password in a file of its own, e.g. a mounted Secret)",
        ])
        #expect(try await problems(["kafka.sasl.mechanism": "OAUTHBEARER", "kafka.sasl.oauthbearer.clientId": "x"]) == [
            "kafka.sasl.mechanism OAUTHBEARER needs kafka.sasl.oauthbearer.tokenEndpointUrl, kafka.sasl.oauthbearer.clientSecretFile (OIDC client credentials: librdkafka fetches and renews the token)",
        ])
        #expect(try await problems(["kafka.sasl.mechanism": "GSSAPI"]) == [
            "configuration key 'kafka.sasl.mechanism' (APNS_RELAY_KAFKA_SASL_MECHANISM): 'GSSAPI' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER",
        ])
        #expect(try await problems(["kafka.sasl.username": "relay"]) == [
            "kafka.sasl.username is set but kafka.sasl.mechanism is not (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)",
        ])
        #expect(try await problems(["kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "u", "kafka.sasl.passwordFile": "/p", "kafka.sasl.oauthbearer.clientId": "x"]) == [
            "kafka.sasl.oauthbearer.clientId is for kafka.sasl.mechanism OAUTHBEARER, not PLAIN",
        ])
        #expect(try await problems(["kafka.tls.certFile": "/c.pem"]) == [
            "a client certificate needs both kafka.tls.certFile and kafka.tls.keyFile (kafka.tls.certFile alone is set)",
        ])
        #expect(try await problems(["kafka.tls.enabled": "false", "kafka.tls.caFile": "/ca.pem"]) == [
            "kafka.tls.enabled is false but kafka.tls.caFile set: remove them, or enable TLS",
        ])
    }

    @Test func propertiesMayNotSetWhatTheKeysDecide() async throws {
        #expect(try await problems([
            "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "u", "kafka.sasl.passwordFile": "/p",
            "kafka.properties": "security.protocol=SASL_SSL,client.rack=a", "kafka.producerProperties": "sasl.password=hunter2",
        ]) == [
            "kafka.properties sets 'security.protocol', which kafka.sasl.* and kafka.tls.* decide: remove it from kafka.properties",
            "kafka.producerProperties sets 'sasl.password', which kafka.sasl.* and kafka.tls.* decide: remove it from kafka.producerProperties",
        ])
        // Without the keys, properties still work as before, with a word about a password written inline.
        let legacy = try await configuration(["kafka.properties": "security.protocol=SASL_SSL,sasl.mechanism=PLAIN,sasl.username=u,sasl.password=hunter2"])
        #expect(legacy.notices.contains { $0.hasPrefix("kafka.properties holds sasl.password") && !$0.contains("hunter2") })
    }

    @Test func aSecretFileThatCannotBeReadIsNamedNotShown() async throws {
        let security = try await configuration(["kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "u", "kafka.sasl.passwordFile": "/nonexistent/password"]).kafka.security
        let missing = #expect(throws: RelayError.self) { try security.librdkafkaProperties() }
        #expect(missing?.description == "the file '/nonexistent/password' (kafka.sasl.passwordFile) does not exist")
        try await withSecret("\n") { file in
            let empty = try await configuration(["kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "u", "kafka.sasl.passwordFile": file]).kafka.security
            let error = #expect(throws: RelayError.self) { try empty.librdkafkaProperties() }
            #expect(error?.description == "the file '\(file)' (kafka.sasl.passwordFile) is empty")
        }
    }

    @Test func theKeysComeFromTheEnvironmentToo() async throws {
        let configuration = try await configuration([:], environment: [
            "APNS_RELAY_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "APNS_RELAY_KAFKA_SASL_USERNAME": "relay",
            "APNS_RELAY_KAFKA_SASL_PASSWORD_FILE": "/etc/apns-relay/kafka/password", "APNS_RELAY_KAFKA_TLS_CA_FILE": "/etc/apns-relay/kafka/ca.crt",
        ])
        #expect(configuration.kafka.security.sasl?.passwordFile == "/etc/apns-relay/kafka/password")
        #expect(configuration.kafka.security.tls?.caFile == "/etc/apns-relay/kafka/ca.crt")
        #expect(configuration.relay.kafkaIdentity.summary == "SASL SCRAM-SHA-512 as user 'relay' over TLS")
    }

    @Test func aRotatedPasswordReachesEveryClientOnce() async throws {
        try await withSecret("first") { file in
            let seen = Mutex<[String]>([])
            let watcher = KafkaPasswordWatcher(
                username: "relay", passwordFile: file, password: "first",
                clients: [{ _, password in seen.withLock { $0.append("consumer:\(password)") } }, { _, password in seen.withLock { $0.append("producer:\(password)") } }],
                interval: .seconds(1), logger: Logger(label: "test"))
            var state = KafkaPasswordWatcher.State(password: "first")
            #expect(watcher.check(&state) == .unchanged)
            try "second\n".write(toFile: file, atomically: true, encoding: .utf8)
            #expect(watcher.check(&state) == .rotated)
            #expect(watcher.check(&state) == .unchanged)
            #expect(seen.withLock { $0 } == ["consumer:second", "producer:second"])
            try FileManager.default.removeItem(atPath: file)
            guard case .refused(let message) = watcher.check(&state) else { Issue.record("a missing file is refused"); return }
            #expect(!message.contains("second") && message.contains("kafka.sasl.passwordFile"))
            #expect(watcher.check(&state) == .unchanged, "said once")
        }
    }
}
