import Foundation
import Kafka
import Logging
import RelayApp
import RelaySandbox
import TestSupport
import Testing

/// The chart's alert rules against a relay process: every metric they read exists in its
/// `/metrics`, and a real Prometheus (Debian's `prometheus`, started here on 127.0.0.1 with 1 s scrapes and
/// evaluations) fires the credential alert for a relay whose key APNs refuses, and nothing for a healthy one.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct AlertsEndToEndTests {
    let logger = Logger.quiet("alerts")

    /// The rule groups as the chart renders them (`Tests/chart/test_alerts.py --render`), with `values` on top.
    private func renderRules(to path: String, values: [String: Any] = [:]) async throws -> String {
        let python = Checkout.root.appendingPathComponent(".venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw TestFailure("no .venv (make test creates it before the Swift tests: make venv)")
        }
        let json = String(decoding: try JSONSerialization.data(withJSONObject: values), as: UTF8.self)
        let script = Checkout.root.appendingPathComponent("Tests/chart/test_alerts.py").path
        let result = try await runProcess(python, [script, "--render", path, json])
        guard result.status == 0 else { throw TestFailure("rendering the rules: \(result.stderr)") }
        return try String(contentsOfFile: path, encoding: .utf8)
    }

    /// A relay process on the sandbox with its admin port (and `extra` settings as variables).
    private func relay(_ sandbox: RelaySandbox, adminPort: Int, extra: [String: String] = [:]) throws -> RelayProcess {
        var environment = sandbox.relayEnvironment(groupID: "alerts-\(UUID().uuidString.prefix(8))")
        environment["APNS_RELAY_ADMIN_HOST"] = "127.0.0.1"
        environment["APNS_RELAY_ADMIN_PORT"] = String(adminPort)
        environment.merge(extra) { $1 }
        return try RelayProcess(environment: environment)
    }

    private func events(_ prefix: String, _ range: Range<Int>) -> [(key: String, value: [UInt8])] {
        range.map { (key: "\(prefix)\($0)", value: SampleEvents.event(id: "\(prefix)\($0)", deviceToken: SampleEvents.token($0))) }
    }

    /// Every metric name an alert reads is one the relay exports (at least once or, for its transactions, exactly
    /// once): a renamed metric cannot disarm an alert.
    @Test func everyMetricTheRulesReadIsExported() async throws {
        let directory = try makeTemporaryDirectory("alert-parity")
        defer { try? FileManager.default.removeItem(at: directory) }
        let rules = try await renderRules(to: directory.appendingPathComponent("rules.yaml").path)
        let used = Set(rules.matches(of: /apns_[a-z_]+/).map { String($0.output) })
        #expect(used.count >= 10, "\(used.sorted())")
        try await withSandbox(logger: logger) { sandbox in
            let port = try freeLocalPort()
            // A certificate credential beside the sandbox's token one, for the client certificate's expiry gauge.
            let certificate = try TestCertificate.write(
                in: directory, name: "beta", bundleID: "com.beta.app", notBefore: Date() - 86_400, notAfter: Date() + 300 * 86_400)
            let process = try relay(sandbox, adminPort: port, extra: [
                // librdkafka's statistics on (the sandbox turns them off), for apns_relay_consumer_lag.
                "APNS_RELAY_KAFKA_STATISTICS_INTERVAL_MS": "500",
                "APNS_RELAY_APNS_TOPICS": "com.example.app", "APNS_RELAY_APNS_CREDENTIALS": "beta",
                "APNS_RELAY_APNS_CREDENTIAL_BETA_AUTH": "certificate", "APNS_RELAY_APNS_CREDENTIAL_BETA_TOPICS": "com.beta.app",
                "APNS_RELAY_APNS_CREDENTIAL_BETA_CERTIFICATE_CERTIFICATE_FILE": certificate.certificate,
                "APNS_RELAY_APNS_CREDENTIAL_BETA_CERTIFICATE_PRIVATE_KEY_FILE": certificate.key,
            ])
            let reader = try OutputReader(sandbox: sandbox, logger: logger)
            try await sandbox.produce(events("e", 0..<5))
            _ = try await reader.results(count: 5, timeout: .seconds(60))
            var exported: Set<String> = []
            // The transaction series come from the exactly-once relay below.
            try? await eventually("the relay exports every metric the rules read", within: .seconds(30), every: .milliseconds(200)) {
                let body = try await http("http://127.0.0.1:\(port)/metrics").body
                exported = Set(body.split(separator: "\n").compactMap { line -> String? in
                    guard !line.hasPrefix("#") else { return nil }
                    return line.split(whereSeparator: { $0 == "{" || $0 == " " }).first.map(String.init)
                })
                return used.subtracting(exported).allSatisfy { $0.hasPrefix("apns_relay_transaction") }
            }
            #expect(await process.terminate(timeout: .seconds(30)) == 0)
            await reader.close()
            // What only an exactly-once relay exports (its transactions), from one started so.
            let transactional = try freeLocalPort()
            let exactlyOnce = try relay(sandbox, adminPort: transactional, extra: ["APNS_RELAY_KAFKA_EXACTLY_ONCE": "true"])
            try? await eventually("the exactly-once relay exports every metric the rules read", within: .seconds(30), every: .milliseconds(200)) {
                let body = try await http("http://127.0.0.1:\(transactional)/metrics").body
                exported.formUnion(body.split(separator: "\n").compactMap { line -> String? in
                    guard !line.hasPrefix("#") else { return nil }
                    return line.split(whereSeparator: { $0 == "{" || $0 == " " }).first.map(String.init)
                })
                return used.isSubset(of: exported)
            }
            #expect(used.subtracting(exported).isEmpty, "read by the rules, exported by neither relay: \(used.subtracting(exported).sorted())")
            #expect(await exactlyOnce.terminate(timeout: .seconds(30)) == 0)
        }
    }

    /// A real Prometheus: a relay whose key the mock APNs refuses (InvalidProviderToken) has the credential
    /// alert firing within 30 s; a healthy relay has nothing firing once it has been ready a while.
    @Test func prometheusFiresTheCredentialAlertAndNothingForAHealthyRelay() async throws {
        let directory = try makeTemporaryDirectory("alert-prometheus")
        defer { try? FileManager.default.removeItem(at: directory) }
        // Every `for` shortened, so the test waits seconds, not minutes.
        let alerts = ["credentialRefused", "noProgress", "resultsNotPublished", "tokenRemovalGuardTripped", "possibleDuplicatePushes",
                      "apnsUnreachable", "apnsErrors", "deadLetters", "notReady", "certificateExpiring"]
        let values: [String: Any] = ["metrics": ["prometheusRule": [
            "selector": #"job="apns-relay""#,
            "alerts": Dictionary(uniqueKeysWithValues: alerts.map { ($0, ["for": "2s"]) }),
        ]]]
        _ = try await renderRules(to: directory.appendingPathComponent("rules.yaml").path, values: values)

        for healthy in [false, true] {
            try await withSandbox(logger: logger) { sandbox in
                let relayPort = try freeLocalPort()
                let prometheus = try await Prometheus.start(in: directory, scraping: [relayPort], ruleFiles: ["rules.yaml"])
                defer { prometheus.stop() }
                // The mock knows the sandbox's key under its own id only: another id is InvalidProviderToken.
                let process = try relay(sandbox, adminPort: relayPort, extra: healthy ? [:] : ["APNS_RELAY_APNS_TOKEN_KEY_ID": "WRONGKEY01"])
                let started = ContinuousClock.now
                var sent = 0
                if healthy {
                    let reader = try OutputReader(sandbox: sandbox, logger: logger)
                    try await sandbox.produce(events("h", 0..<20))
                    let results = try await reader.results(count: 20, timeout: .seconds(60))
                    #expect(results.allSatisfy { $0.json?["outcome"] as? String == "delivered" })
                    await reader.close()
                    try await eventually("Prometheus sees the relay ready", within: .seconds(30), every: .milliseconds(250)) {
                        try prometheus.query("apns_relay_ready") == 1
                    }
                    // Five evaluations of the rules after that, on Prometheus's own clock.
                    let readyAt = try prometheus.lastEvaluation()
                    try await eventually("five more rule evaluations", within: .seconds(30), every: .milliseconds(250)) {
                        try prometheus.lastEvaluation() >= readyAt + 5
                    }
                    let firing = try prometheus.alerts().filter { $0.state == "firing" }
                    #expect(firing.isEmpty, "a healthy relay pages nobody: \(firing)")
                } else {
                    // Refused pushes keep coming (a rate needs a counter that moves), until the alert fires.
                    try await eventually("APNsRelayCredentialRefused firing in Prometheus", within: .seconds(30), every: .milliseconds(250)) {
                        try await sandbox.produce(events("r\(sent)-", 0..<2))
                        sent += 2
                        return try prometheus.alerts().contains { $0.name == "APNsRelayCredentialRefused" && $0.state == "firing" }
                    }
                    let alert = try #require(try prometheus.alerts().first { $0.name == "APNsRelayCredentialRefused" })
                    #expect(alert.labels["credential"] == "default" && alert.labels["severity"] == "critical", "\(alert)")
                    #expect(ContinuousClock.now - started < .seconds(30))
                }
                #expect(await process.terminate(timeout: .seconds(30)) == 0)
            }
        }
    }
}
