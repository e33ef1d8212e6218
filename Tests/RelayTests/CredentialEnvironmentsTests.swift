import APNsCore
import RelayApp
import Testing

/// Credentials scoped by APNs environment (issue #26): since 2025 a team may restrict a signing key to the
/// sandbox or to production, so one app can have two keys. The configuration says which credential serves
/// which (topic, environment), and refuses claims that could never be used.
@Suite struct CredentialEnvironmentsTests {
    private static let base = ["kafka.bootstrapServers": "b:9092", "apns.credentials": "prod,dev"]

    private func token(_ name: String, topics: String, environments: String?) -> [String: String] {
        var keys = [
            "apns.credential.\(name).token.keyId": "KEY\(name.uppercased().padding(toLength: 7, withPad: "0", startingAt: 0))",
            "apns.credential.\(name).token.teamId": "TEAM000001", "apns.credential.\(name).token.privateKeyFile": "/\(name).p8",
            "apns.credential.\(name).topics": topics,
        ]
        if let environments { keys["apns.credential.\(name).environments"] = environments }
        return keys
    }

    private func configuration(_ overrides: [String: String]) async throws -> RelayAppConfiguration {
        try RelayAppConfiguration(reader: try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: overrides))
    }

    private func problems(_ overrides: [String: String]) async throws -> [String] {
        let reader = try await RelayAppConfiguration.reader(file: nil, environment: [:], overrides: overrides)
        return try #require(throws: ConfigurationError.self) { try RelayAppConfiguration(reader: reader) }.problems
    }

    @Test func oneAppTwoKeysOnePerEnvironment() async throws {
        let configuration = try await configuration(
            Self.base.merging(token("prod", topics: "com.acme.app", environments: "production")) { $1 }
                .merging(token("dev", topics: "com.acme.app", environments: "sandbox")) { $1 })
        #expect(configuration.apns.credentials.map(\.name) == ["prod", "dev"])
        #expect(configuration.apns.credentials.map(\.environments) == [[.production], [.development]], "sandbox is development")
        #expect(configuration.notices.isEmpty, "\(configuration.notices)")
    }

    @Test func unscopedCredentialsServeBothEnvironments() async throws {
        let configuration = try await configuration(
            Self.base.merging(token("prod", topics: "com.acme.app", environments: nil)) { $1 }
                .merging(token("dev", topics: "com.beta.app", environments: "production,development")) { $1 })
        #expect(configuration.apns.credentials.allSatisfy { $0.environments == [.production, .development] })
    }

    @Test func twoCredentialsClaimingOneTopicInOneEnvironmentAreRefused() async throws {
        let problems = try await problems(
            Self.base.merging(token("prod", topics: "com.acme.app", environments: "production")) { $1 }
                .merging(token("dev", topics: "com.acme.app", environments: nil)) { $1 })
        #expect(problems == [
            "credentials 'prod' and 'dev' both claim com.acme.app in production: 'prod' is listed first and would send all of it, so 'dev' "
                + "never would. Give each the environment its key is for (apns.credential.prod.environments, apns.credential.dev.environments) "
                + "or bundle ids of its own (apns.credential.prod.topics, apns.credential.dev.topics)",
        ])
    }

    @Test func aWildcardListedFirstHidesABundleItCovers() async throws {
        let hidden = try await problems(
            Self.base.merging(token("prod", topics: "com.acme.*", environments: nil)) { $1 }
                .merging(token("dev", topics: "com.acme.app", environments: "development")) { $1 })
        #expect(hidden.count == 1)
        #expect(hidden.first?.hasPrefix("credentials 'prod' and 'dev' both claim com.acme.app in development: 'prod' is listed first") == true, "\(hidden)")
        // The other way round is an override: the specific key first, the team's key for the rest.
        let configuration = try await configuration(
            Self.base.merging(token("prod", topics: "com.acme.app", environments: "development")) { $1 }
                .merging(token("dev", topics: "com.acme.*", environments: nil)) { $1 })
        #expect(configuration.apns.credentials.count == 2)
    }

    @Test func theUnnamedCredentialWithoutTopicsHidesNamedOnes() async throws {
        var overrides = token("dev", topics: "com.acme.app", environments: "development")
        overrides.merge([
            "kafka.bootstrapServers": "b:9092", "apns.credentials": "dev",
            "apns.token.keyId": "ABC123DEFG", "apns.token.teamId": "DEF123GHIJ", "apns.token.privateKeyFile": "/default.p8",
        ]) { $1 }
        let problems = try await problems(overrides)
        #expect(problems.count == 1)
        #expect(problems.first?.hasPrefix("credentials 'default' and 'dev' both claim com.acme.app in development: 'default' is listed first") == true, "\(problems)")
        #expect(problems.first?.contains("(apns.environments, apns.credential.dev.environments)") == true, "\(problems)")
    }

    @Test func anUnknownEnvironmentIsRefusedWithItsKey() async throws {
        let problems = try await problems(
            Self.base.merging(token("prod", topics: "com.acme.app", environments: "production,staging")) { $1 }
                .merging(token("dev", topics: "com.beta.app", environments: nil)) { $1 })
        #expect(problems == [
            "configuration key 'apns.credential.prod.environments' (APNS_RELAY_APNS_CREDENTIAL_PROD_ENVIRONMENTS): 'staging' is not an APNs "
                + "environment: production or development (sandbox)",
        ])
    }

    @Test func anEnvironmentNoCredentialCoversIsANotice() async throws {
        let configuration = try await configuration(
            Self.base.merging(token("prod", topics: "com.acme.app,com.acme.other", environments: "production")) { $1 }
                .merging(token("dev", topics: "com.acme.other", environments: "development")) { $1 })
        #expect(configuration.notices == [
            "credential 'prod' pushes com.acme.app in production only (apns.credential.prod.environments) and no credential covers it in "
                + "development: such events are answered invalid (NoCredentialForEnvironment)",
        ])
    }

    @Test func coverageOfPatterns() {
        #expect(RelayAppConfiguration.covers("com.acme.*", "com.acme.app"))
        #expect(RelayAppConfiguration.covers("com.acme.*", "com.acme.app.*"))
        #expect(RelayAppConfiguration.covers("com.acme.app", "com.acme.app.voip"))
        #expect(RelayAppConfiguration.covers("com.acme.app", "com.acme.app.*"))
        #expect(RelayAppConfiguration.covers("com.acme.app", "com.acme.app"))
        #expect(!RelayAppConfiguration.covers("com.acme.app", "com.acme.*"))
        #expect(!RelayAppConfiguration.covers("com.acme.app", "com.acme.application"))
        #expect(!RelayAppConfiguration.covers("com.acme.*", "com.acmeshop"))
    }
}
