import APNsCore
import Foundation
import Relay
import RelayApp
import ServiceSupport
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
        // 35 leaves no room for the 21-minute hold before a token is 55 minutes old (TokenRotationPolicy).
        (["apns.token.rotationMinutes": "35"], "apns.token.rotationMinutes"),
        (["kafka.topics.results": "apns-notifications"], "both an input (kafka.topics.input) and an output"),
        (["kafka.topics.urgent": "apns-notifications"], "in both kafka.topics.input (the bulk lane; by default apns-notifications) and kafka.topics.urgent"),
        (["kafka.topics.urgent": "urgent,apns-results"], "both an input (kafka.topics.urgent) and an output"),
        (["relay.lanes.urgentShare": "95"], "relay.lanes.urgentShare"),
        (["relay.lanes.urgentShare": "-1"], "relay.lanes.urgentShare"),
        (["relay.lanes.urgentShare": "0.2"], "relay.lanes.urgentShare"),
        (["kafka.properties": "no-equals-sign"], "kafka.properties"),
        (["log.format": "xml"], "log.format"),
    ])
    func wrongValuesAreRefusedWithTheKeyNamed(override: [String: String], mentions: String) async throws {
        var settings = [
            "kafka.bootstrapServers": "b:9092", "apns.token.keyId": "ABC123DEFG", "apns.token.teamId": "DEF123GHIJ",
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

    /// A share for an urgent lane that does not exist is not an error (a chart may set it for every
    /// release), but it is said at start: it takes no effect.
    /// `kafka.groupInstanceId` (the chart gives each pod its name through this variable) reaches the consumer
    /// as librdkafka's `group.instance.id`; unset or empty, there is no static membership.
    @Test func aGroupInstanceIDFromTheEnvironmentMakesTheConsumerAStaticMember() async throws {
        let base = [
            "kafka.bootstrapServers": "b:9092", "apns.token.keyId": "ABC123DEFG", "apns.token.teamId": "DEF123GHIJ", "apns.token.privateKeyFile": "/k.p8",
        ]
        func instanceID(_ environment: [String: String]) async throws -> String? {
            let reader = try await RelayAppConfiguration.reader(file: nil, environment: environment, overrides: base)
            return RelayApp.consumerConfiguration(try RelayAppConfiguration(reader: reader)).groupInstanceID
        }
        #expect(try await instanceID(["APNS_RELAY_KAFKA_GROUP_INSTANCE_ID": "apns-relay-7d9f-x2"]) == "apns-relay-7d9f-x2")
        #expect(try await instanceID([:]) == nil)
        #expect(try await instanceID(["APNS_RELAY_KAFKA_GROUP_INSTANCE_ID": ""]) == nil)
    }

    /// `kafka.exactlyOnce`: off by default (no transactions, the consumer auto-commits stored offsets); on, a
    /// transactional id per replica (by default the group id and the host name), no auto commit, and a
    /// transaction timeout that leaves a transaction time to commit.
    @Test func exactlyOnceMakesATransactionalRelayAndTurnsAutoCommitOff() async throws {
        let base = [
            "kafka.bootstrapServers": "b:9092", "apns.token.keyId": "ABC123DEFG", "apns.token.teamId": "DEF123GHIJ", "apns.token.privateKeyFile": "/k.p8",
        ]
        func configuration(_ extra: [String: String]) async throws -> RelayAppConfiguration {
            let reader = try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: base.merging(extra) { $1 })
            return try RelayAppConfiguration(reader: reader)
        }
        let off = try await configuration([:])
        #expect(off.relay.exactlyOnce == nil && RelayApp.consumerConfiguration(off).autoCommit)
        let on = try await configuration(["kafka.exactlyOnce": "true"])
        let exactlyOnce = try #require(on.relay.exactlyOnce)
        #expect(exactlyOnce.transactionalID == RelayAppConfiguration.defaultTransactionalID(groupID: "apns-relay"))
        #expect(exactlyOnce.transactionalID.hasPrefix("apns-relay-") && exactlyOnce.transactionalID.count > "apns-relay-".count)
        #expect(exactlyOnce.interval == .milliseconds(100) && exactlyOnce.transactionTimeout == .seconds(60))
        #expect(!RelayApp.consumerConfiguration(on).autoCommit, "offsets go only through transactions")
        let named = try await configuration(["kafka.exactlyOnce": "true", "kafka.transactionalId": "relay-0", "kafka.transactionIntervalMs": "250"])
        #expect(named.relay.exactlyOnce?.transactionalID == "relay-0" && named.relay.exactlyOnce?.interval == .milliseconds(250))
        await #expect(throws: (any Error).self, "a timeout shorter than an interval plus a request") {
            _ = try await configuration(["kafka.exactlyOnce": "true", "kafka.transactionTimeoutMs": "5000"])
        }
        let unused = try await configuration(["kafka.transactionalId": "relay-0"])
        #expect(unused.notices.contains { $0.contains("kafka.transactionalId") && $0.contains("kafka.exactlyOnce") }, "\(unused.notices)")
    }

    @Test func anUrgentShareWithoutUrgentTopicsIsNoticed() async throws {
        let base = [
            "kafka.bootstrapServers": "b:9092", "apns.token.keyId": "ABC123DEFG", "apns.token.teamId": "DEF123GHIJ", "apns.token.privateKeyFile": "/k.p8",
        ]
        func notices(_ extra: [String: String]) async throws -> [String] {
            let reader = try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: base.merging(extra) { $1 })
            return try RelayAppConfiguration(reader: reader).notices
        }
        let unused = try await notices(["relay.lanes.urgentShare": "30"])
        #expect(unused.count == 1 && unused[0].contains("relay.lanes.urgentShare") && unused[0].contains("kafka.topics.urgent"), "\(unused)")
        #expect(try await notices(["relay.lanes.urgentShare": "30", "kafka.topics.urgent": "codes"]).isEmpty)
        #expect(try await notices([:]).isEmpty, "the default share alone is not a notice")
    }

    @Test func everyProblemIsReportedAtOnceWithItsKeyAndVariable() async throws {
        let reader = try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: [
            "apns.token.keyId": "ABC123DEFG",  // teamId and privateKeyFile missing
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
            "apns.credential.x.token.keyId": "ABC123DEFG", "apns.credential.x.token.teamId": "DEF123GHIJ", "apns.credential.x.token.privateKeyFile": "/x.p8",
        ])
        #expect(throws: ConfigurationError.self) { _ = try RelayAppConfiguration(reader: missingTopics) }
    }

    @Test func theDirectoryFindsTheCredentialByBundleIDAndEnvironment() {
        struct Never: NotificationSender {
            func send(
                _ notification: APNsNotification, deadline: MonotonicInstant,
                completion: @escaping @Sendable (Result<APNsResponse, any Error>) -> Void
            ) { completion(.success(APNsResponse(status: 500))) }
            func holdUnsentRequests() {}
        }
        /// What the directory answers, as a line: the credential's name and authentication, or why none.
        func lookup(_ directory: CredentialDirectory, _ topic: String, _ environment: APNsEnvironment) -> String {
            switch directory.lookup(topic: topic, in: environment) {
            case .covered(let credential): "\(credential.name) \(credential.authentication)"
            case .otherEnvironmentOnly(let names): "other environment only: \(names.joined(separator: ","))"
            case .uncovered: "uncovered"
            }
        }
        let directory = CredentialDirectory([
            .init(name: "acme", patterns: ["com.acme.*"], authentication: .token, sender: Never()),
            .init(name: "beta", patterns: ["com.beta.app"], authentication: .certificate, sender: Never()),
        ])
        #expect(lookup(directory, "com.acme.shop", .production) == "acme token")
        #expect(lookup(directory, "com.acme.shop.voip", .development) == "acme token")
        #expect(lookup(directory, "com.beta.app.voip", .production) == "beta certificate")
        #expect(lookup(directory, "com.beta.application", .production) == "uncovered")
        #expect(lookup(directory, "com.acmeshop", .production) == "uncovered")
        let catchAll = CredentialDirectory([.init(patterns: [], authentication: .token, sender: Never())])
        #expect(lookup(catchAll, "anything", .development) == "default token")

        // Two keys for one app, one per environment (Apple's environment-restricted keys, 2025).
        let scoped = CredentialDirectory([
            .init(name: "acme-prod", patterns: ["com.acme.app"], environments: [.production], authentication: .token, sender: Never()),
            .init(name: "acme-dev", patterns: ["com.acme.app"], environments: [.development], authentication: .token, sender: Never()),
            .init(name: "beta-prod", patterns: ["com.beta.app"], environments: [.production], authentication: .token, sender: Never()),
        ])
        #expect(lookup(scoped, "com.acme.app", .production) == "acme-prod token")
        #expect(lookup(scoped, "com.acme.app.voip", .development) == "acme-dev token")
        #expect(lookup(scoped, "com.beta.app", .development) == "other environment only: beta-prod")
        #expect(lookup(scoped, "com.gamma.app", .development) == "uncovered")
        #expect(scoped.names == ["acme-prod", "acme-dev", "beta-prod"])
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

    // MARK: Unknown keys and wrong types

    private let minimal = [
        "kafka.bootstrapServers": "b:9092", "apns.token.keyId": "ABC123DEFG", "apns.token.teamId": "DEF123GHIJ", "apns.token.privateKeyFile": "/k.p8",
    ]

    private func problems(file: String? = nil, environment: [String: String] = [:], overrides: [String: String] = [:]) async throws -> ConfigurationError {
        let reader = try await RelayAppConfiguration.reader(file: file, environment: environment, overrides: overrides)
        return try #require(throws: ConfigurationError.self) { try RelayAppConfiguration(reader: reader) }
    }

    @Test func unknownKeyInAYAMLFileIsRefusedWithASuggestion() async throws {
        let yaml = self.yaml + "\n  retry:\n    maxAttnempts: 3\n"
        try await withFile(yaml, suffix: ".yaml") { path in
            let error = try await problems(file: path)
            #expect(error.problems == ["unknown configuration key 'relay.retry.maxAttnempts' in \(path); did you mean 'relay.retry.maxAttempts'?"])
        }
    }

    @Test func unknownKeyInAJSONFileIsRefusedWithASuggestion() async throws {
        let json = #"{"kafka":{"bootstrapServer":"a:1"},"apns":{"token":{"keyId":"ABC123DEFG","teamId":"DEF123GHIJ","privateKeyFile":"/k.p8"}}}"#
        try await withFile(json, suffix: ".json") { path in
            let text = "\(try await problems(file: path))"
            #expect(text.contains("unknown configuration key 'kafka.bootstrapServer' in \(path); did you mean 'kafka.bootstrapServers'?"), "\(text)")
            #expect(text.contains("'kafka.bootstrapServers' (APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS) is required"), "both problems at once: \(text)")
        }
    }

    @Test func unknownEnvironmentVariableIsRefusedWithASuggestion() async throws {
        let environment = Dictionary(uniqueKeysWithValues: minimal.map { ("APNS_RELAY_" + RelayAppConfiguration.environmentName(forKey: $0.key), $0.value) })
            .merging(["APNS_RELAY_KAFKA_BOOTSTRAP_SERVER": "x:1", "UNRELATED_VARIABLE": "x"]) { $1 }
        let error = try await problems(environment: environment)
        #expect(error.problems == [
            "unknown environment variable APNS_RELAY_KAFKA_BOOTSTRAP_SERVER; did you mean APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS (kafka.bootstrapServers)?",
        ])
    }

    @Test func theProjectsToolingVariablesAreNotConfiguration() async throws {
        // The test and benchmark harnesses set these; a relay they start inherits them.
        let reader = try await RelayAppConfiguration.reader(
            file: nil, environment: ["APNS_RELAY_BINARY": "/x/apns-relay", "APNS_RELAY_FAULTS": "full", "APNS_RELAY_FAULTS_SEED": "7"],
            overrides: minimal
        )
        _ = try RelayAppConfiguration(reader: reader)
    }

    @Test func unknownSetKeyIsRefusedWithASuggestion() async throws {
        var overrides = minimal
        overrides["kafka.bootstrapServer"] = "x:1"
        overrides["kafka.maxInFlightEvents"] = "5"  // right name, wrong section
        overrides["tracing.exporter"] = "otlp"  // nothing near: no guess
        let error = try await problems(overrides: overrides)
        #expect(error.problems == [
            "unknown configuration key 'kafka.bootstrapServer' (from --set); did you mean 'kafka.bootstrapServers'?",
            "unknown configuration key 'kafka.maxInFlightEvents' (from --set); did you mean 'relay.maxInFlightEvents'?",
            "unknown configuration key 'tracing.exporter' (from --set)",
        ])
    }

    @Test func keysUnderACredentialThatIsNotListedAreRefused() async throws {
        let yaml = """
            kafka: { bootstrapServers: "b:9092" }
            apns:
              credentials: [acme]
              credential:
                acme: { token: { keyId: ABC123DEFG, teamId: DEF123GHIJ, privateKeyFile: /acme.p8 }, topics: [com.acme.*] }
                beta: { token: { keyId: ABC123DEFH, teamId: DEF123GHIK, privateKeyFile: /beta.p8 }, topics: [com.beta.app] }
            """
        try await withFile(yaml, suffix: ".yaml") { path in
            let error = try await problems(file: path)
            #expect(error.problems.count == 4, "\(error)")
            #expect(error.problems.allSatisfy { $0.contains("credential 'beta' is not listed in apns.credentials (apns.credentials lists acme)") }, "\(error)")
            #expect(error.problems.contains { $0.contains("'apns.credential.beta.token.keyId' in \(path)") }, "\(error)")
        }
        let viaSet = try await problems(overrides: minimal.merging(["apns.credential.gamma.topics": "com.gamma.app"]) { $1 })
        #expect(viaSet.problems == [
            "unknown configuration key 'apns.credential.gamma.topics' (from --set): credential 'gamma' is not listed in apns.credentials (apns.credentials lists no credential)",
        ])
        // Listed: every key of both kinds is known, the unused kind's too.
        let listed = try await RelayAppConfiguration.reader(file: nil, environment: [
            "APNS_RELAY_APNS_CREDENTIALS": "gamma", "APNS_RELAY_APNS_CREDENTIAL_GAMMA_TOKEN_KEY_ID": "ABC123DEFG",
            "APNS_RELAY_APNS_CREDENTIAL_GAMMA_TOKEN_TEAM_ID": "DEF123GHIJ", "APNS_RELAY_APNS_CREDENTIAL_GAMMA_TOKEN_PRIVATE_KEY_FILE": "/g.p8",
            "APNS_RELAY_APNS_CREDENTIAL_GAMMA_TOPICS": "com.gamma.app", "APNS_RELAY_APNS_CREDENTIAL_GAMMA_CERTIFICATE_PKCS12_FILE": "/unused.p12",
        ], overrides: ["kafka.bootstrapServers": "b:9092"])
        #expect(try RelayAppConfiguration(reader: listed).apns.credentials.map(\.name) == ["gamma"])
    }

    @Test func aValueOfTheWrongTypeSaysWhatItGot() async throws {
        let yaml = """
            kafka:
              bootstrapServers: 1
              groupId: 42
              properties: 5
            apns: { token: { keyId: ABC123DEFG, teamId: DEF123GHIJ, privateKeyFile: /k.p8 }, insecureSkipVerify: "yes" }
            admin: { port: "9090" }
            """
        try await withFile(yaml, suffix: ".yaml") { path in
            let error = try await problems(file: path)
            #expect(error.problems.sorted() == [
                "configuration key 'admin.port' (APNS_RELAY_ADMIN_PORT): expected an integer, got the string '9090' (in \(path))",
                "configuration key 'apns.insecureSkipVerify' (APNS_RELAY_APNS_INSECURE_SKIP_VERIFY): expected true or false, got the string 'yes' (in \(path))",
                "configuration key 'kafka.bootstrapServers' (APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS): expected a string or a list of strings, got the number 1 (in \(path))",
                "configuration key 'kafka.groupId' (APNS_RELAY_KAFKA_GROUP_ID): expected a string, got the number 42 (in \(path))",
                "configuration key 'kafka.properties' (APNS_RELAY_KAFKA_PROPERTIES): expected a mapping of librdkafka properties, or a list of name=value, got the number 5 (in \(path))",
            ], "no 'is required' for a key that is there with the wrong type")
        }
        let json = #"{"kafka":{"bootstrapServers":1,"topics":{"input":"a"}},"apns":{"token":{"keyId":"ABC123DEFG","teamId":"DEF123GHIJ","privateKeyFile":"/k.p8"}}}"#
        try await withFile(json, suffix: ".json") { path in
            let error = try await problems(file: path)
            #expect(error.problems == [
                "configuration key 'kafka.bootstrapServers' (APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS): expected a string or a list of strings, got the number 1 (in \(path))",
            ])
        }
        let mixed = "kafka: { bootstrapServers: [a:1, 2] }\napns: { token: { keyId: ABC123DEFG, teamId: DEF123GHIJ, privateKeyFile: /k.p8 } }\n"
        try await withFile(mixed, suffix: ".yml") { path in
            let error = try await problems(file: path)
            #expect(error.problems == [
                "configuration key 'kafka.bootstrapServers' (APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS): expected a list of strings, got the number 2 in the list (in \(path))",
            ])
        }
    }
}
