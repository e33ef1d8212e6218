import APNsCore
import Foundation
import Relay
import Testing

@Suite struct ConfigurationTests {
    private func withFile<T>(_ text: String, suffix: String, _ body: (String) async throws -> T) async throws -> T {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("relay-\(UUID().uuidString)\(suffix)").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try await body(path)
    }

    private let yaml = """
        kafka:
          bootstrapServers: file-broker:9092
          groupId: from-file
          topics:
            input: [orders, promos]
          properties: ["security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512"]
        apns:
          token:
            keyId: ABC123DEFG
            teamId: DEF123GHIJ
            privateKeyFile: /secrets/key.p8
        relay:
          maxInFlightEvents: 500
        """

    @Test func flagsBeatEnvironmentBeatFile() async throws {
        try await withFile(yaml, suffix: ".yaml") { path in
            let reader = try await RelayAppConfiguration.reader(
                file: path,
                environment: ["APNS_RELAY_KAFKA_GROUP_ID": "from-env", "APNS_RELAY_RELAY_MAX_IN_FLIGHT_EVENTS": "700", "UNRELATED": "x"],
                overrides: ["relay.maxInFlightEvents": "900"]
            )
            let configuration = try RelayAppConfiguration(reader: reader)
            #expect(configuration.kafka.bootstrapServers == ["file-broker:9092"])
            #expect(configuration.kafka.groupID == "from-env")
            #expect(configuration.relay.inFlight.maxEvents == 900)
            #expect(configuration.relay.topics.input == ["orders", "promos"])
            #expect(configuration.kafka.properties == ["security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"])
            #expect(configuration.relay.drainTimeout == .seconds(20), "defaults fill the rest")
            #expect(configuration.admin.port == 9090)
        }
    }

    @Test func jsonFilesWorkToo() async throws {
        let json = #"{"kafka":{"bootstrapServers":"a:1,b:2"},"apns":{"auth":"certificate","certificate":{"pkcs12File":"/c.p12"}}}"#
        try await withFile(json, suffix: ".json") { path in
            let configuration = try RelayAppConfiguration(reader: try await RelayAppConfiguration.reader(file: path, environment: [:], overrides: [:]))
            #expect(configuration.kafka.bootstrapServers == ["a:1", "b:2"])
            guard case .certificate(.pkcs12(let file, nil))? = configuration.apns.credentials.first?.auth else {
                Issue.record("expected one PKCS#12 certificate credential, got \(configuration.apns.credentials)")
                return
            }
            #expect(file == "/c.p12")
        }
    }

    @Test(arguments: [
        (["relay.maxInFlightEvents": "lots"], "relay.maxInFlightEvents"),
        (["admin.port": "70000"], "admin.port"),
        (["apns.auth": "password"], "apns.auth"),
        (["kafka.bootstrapServers": ""], "kafka.bootstrapServers"),
        (["apns.token.keyId": ""], "apns.token"),
        (["apns.token.rotationMinutes": "60"], "apns.token.rotationMinutes"),
        (["kafka.topics.results": "apns-notifications"], "both an input and an output"),
        (["kafka.properties": "no-equals-sign"], "kafka.properties"),
        (["log.format": "xml"], "log.format"),
    ])
    func wrongValuesAreRefusedWithTheKeyNamed(override: [String: String], mentions: String) async throws {
        var settings = [
            "kafka.bootstrapServers": "b:9092", "apns.token.keyId": "K", "apns.token.teamId": "T",
            "apns.token.privateKeyFile": "/k.p8",
        ]
        settings.merge(override) { $1 }
        if settings["apns.token.keyId"] == "" { settings.removeValue(forKey: "apns.token.keyId") }
        let reader = try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: settings)
        do {
            _ = try RelayAppConfiguration(reader: reader)
            Issue.record("\(override) was accepted")
        } catch {
            #expect("\(error)".contains(mentions), "\(error)")
        }
    }

    @Test func everyProblemIsReportedAtOnceWithItsKeyAndVariable() async throws {
        let reader = try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: [
            "apns.token.keyId": "K",  // teamId and privateKeyFile missing
            "relay.maxInFlightEvents": "lots", "admin.port": "70000", "log.format": "xml",
            "apns.pool.minConnections": "9", "apns.pool.maxConnections": "4",
        ])
        let error = try #require(throws: ConfigurationError.self) { try RelayAppConfiguration(reader: reader) }
        #expect(error.problems.count == 6, "\(error)")
        let text = "\(error)"
        #expect(text.hasPrefix("6 configuration problems:\n  - "), "\(text)")
        for mention in [
            "'kafka.bootstrapServers' (APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS) is required",
            "'relay.maxInFlightEvents' (APNS_RELAY_RELAY_MAX_IN_FLIGHT_EVENTS): 'lots' is not an integer",
            "'admin.port' (APNS_RELAY_ADMIN_PORT): 70000 is outside 0...65535",
            "'log.format' (APNS_RELAY_LOG_FORMAT): 'xml' is not one of json, text",
            "token auth needs apns.token.keyId, apns.token.teamId and apns.token.privateKeyFile",
            "apns.pool.minConnections (9) is above apns.pool.maxConnections (4)",
        ] {
            #expect(text.contains(mention), "missing \(mention) in \(text)")
        }
    }

    @Test func namedCredentialsEachCoverTheirTopics() async throws {
        let yaml = """
            kafka: { bootstrapServers: "b:9092" }
            apns:
              credentials: [acme, beta]
              credential:
                acme:
                  token: { keyId: AAAAAAAAAA, teamId: TEAMACME01, privateKeyFile: /acme.p8 }
                  topics: [com.acme.*]
                beta:
                  auth: certificate
                  certificate: { pkcs12File: /beta.p12 }
                  topics: [com.beta.app]
            """
        try await withFile(yaml, suffix: ".yaml") { path in
            let configuration = try RelayAppConfiguration(reader: try await RelayAppConfiguration.reader(file: path, environment: [:], overrides: [:]))
            #expect(configuration.apns.credentials.map(\.name) == ["acme", "beta"], "no default credential when named ones exist")
            #expect(configuration.apns.credentials.map(\.topics) == [["com.acme.*"], ["com.beta.app"]])
        }
        let missingTopics = try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: [
            "kafka.bootstrapServers": "b:9092", "apns.credentials": "x",
            "apns.credential.x.token.keyId": "K", "apns.credential.x.token.teamId": "T", "apns.credential.x.token.privateKeyFile": "/x.p8",
        ])
        #expect(throws: ConfigurationError.self) { _ = try RelayAppConfiguration(reader: missingTopics) }
    }

    @Test func routerPicksTheCredentialByBundleID() {
        struct Never: NotificationSender {
            func send(_ notification: APNsNotification, deadline: ContinuousClock.Instant) async throws -> APNsResponse { APNsResponse(status: 500) }
            func authentication(forTopic topic: String) -> AuthenticationKind? { nil }
        }
        let router = CredentialRouter(routes: [
            .init(patterns: ["com.acme.*"], authentication: .token, sender: Never()),
            .init(patterns: ["com.beta.app"], authentication: .certificate, sender: Never()),
        ])
        #expect(router.authentication(forTopic: "com.acme.shop") == .token)
        #expect(router.authentication(forTopic: "com.acme.shop.voip") == .token)
        #expect(router.authentication(forTopic: "com.beta.app.voip") == .certificate)
        #expect(router.authentication(forTopic: "com.beta.application") == nil)
        #expect(router.authentication(forTopic: "com.acmeshop") == nil)
        let catchAll = CredentialRouter(routes: [.init(patterns: [], authentication: .token, sender: Never())])
        #expect(catchAll.authentication(forTopic: "anything") == .token)
    }

    @Test func environmentNamesFollowTheKeys() {
        #expect(RelayAppConfiguration.environmentName(forKey: "kafka.bootstrapServers") == "KAFKA_BOOTSTRAP_SERVERS")
        #expect(RelayAppConfiguration.environmentName(forKey: "relay.retry.maxAttempts") == "RELAY_RETRY_MAX_ATTEMPTS")
        #expect(RelayAppConfiguration.environmentName(forKey: "apns.token.privateKeyFile") == "APNS_TOKEN_PRIVATE_KEY_FILE")
    }

    @Test func missingFileIsAClearError() async {
        await #expect(throws: RelayError.self) {
            _ = try await RelayAppConfiguration.reader(file: "/nonexistent/relay.yaml", environment: [:], overrides: [:])
        }
    }
}
