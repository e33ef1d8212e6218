import APNsClient
import Foundation
import Logging
import RelayApp
import RelaySandbox
import TestSupport
import Testing

/// A certificate credential whose certificate expires in 10 days, in a relay process and in
/// `apns-relay check` (issue #28): the expiry gauge, the warning, and what `check` reads without a topic.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct CertificateExpiryEndToEndTests {
    let logger = Logger.quiet("certificate-expiry")

    /// The sandbox's relay settings plus credential `beta` (certificate auth for com.beta.app) as variables;
    /// the sandbox's own credential keeps com.example.app.
    private func environment(_ sandbox: RelaySandbox, certificate: (certificate: String, key: String)) -> [String: String] {
        var environment = sandbox.relayEnvironment(groupID: "certificates-\(UUID().uuidString.prefix(8))")
        environment.merge([
            "APNS_RELAY_APNS_TOPICS": "com.example.app",
            "APNS_RELAY_APNS_CREDENTIALS": "beta",
            "APNS_RELAY_APNS_CREDENTIAL_BETA_AUTH": "certificate",
            "APNS_RELAY_APNS_CREDENTIAL_BETA_TOPICS": "com.beta.app",
            "APNS_RELAY_APNS_CREDENTIAL_BETA_CERTIFICATE_CERTIFICATE_FILE": certificate.certificate,
            "APNS_RELAY_APNS_CREDENTIAL_BETA_CERTIFICATE_PRIVATE_KEY_FILE": certificate.key,
        ]) { $1 }
        return environment
    }

    @Test func aCertificateExpiringInTenDaysIsAGaugeAWarningAndACheckNotice() async throws {
        let directory = try makeTemporaryDirectory("expiring-certificate")
        defer { try? FileManager.default.removeItem(at: directory) }
        let expiry = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 / 60).rounded(.down) * 60 + 10 * 86_400 + 3600)
        let files = try TestCertificate.write(
            in: directory, name: "beta", bundleID: "com.beta.app", notBefore: expiry - 365 * 86_400, notAfter: expiry)
        let date = CertificateDetails.date(Int64(expiry.timeIntervalSince1970))
        try await withSandbox(logger: logger) { sandbox in
            let port = try freeLocalPort()
            var environment = environment(sandbox, certificate: files)
            environment["APNS_RELAY_ADMIN_HOST"] = "127.0.0.1"
            environment["APNS_RELAY_ADMIN_PORT"] = String(port)
            let relay = try RelayProcess(environment: environment)
            var metrics = ""
            try await eventually("the relay's /metrics", within: .seconds(30), every: .milliseconds(100)) {
                metrics = try await http("http://127.0.0.1:\(port)/metrics").body
                return metrics.contains("apns_client_certificate_expiry_timestamp_seconds")
            }
            let line = metrics.split(separator: "\n").first { $0.hasPrefix("apns_client_certificate_expiry_timestamp_seconds{") }
            #expect(line?.contains(#"credential="beta""#) == true, "\(line ?? "")")
            #expect(line.flatMap { Double($0.split(separator: " ").last ?? "") } == expiry.timeIntervalSince1970, "\(line ?? "")")
            #expect(metrics.contains("apns_client_ca_certificate_expiry_timestamp_seconds "), "the sandbox's CA file is watched too")
            let warning = "the client certificate of credential 'beta' (com.beta.app) expires on \(date), in 10 days: renew it before then"
            try await eventually("the expiry warning in the log", within: .seconds(10)) { relay.log.contains(warning) }
            #expect(await relay.terminate(timeout: .seconds(30)) == 0)
            let logged = relay.log.split(separator: "\n").first { $0.contains(warning) }.map(String.init) ?? ""
            #expect(logged.contains(#""level":"warning""#), "\(logged)")

            // `check` without --topic: every key and certificate is read; the certificate's validity is shown.
            let check = try await runProcess(
                try RelayProcess.binary().path, ["check", "--skip-kafka"], environment: self.environment(sandbox, certificate: files),
                timeout: .seconds(90))
            let output = check.stdout + check.stderr
            #expect(output.contains("✓ APNs credential default: signing key '\(sandbox.keyFile)' read (EC P-256, key id \(sandbox.keyID), team \(sandbox.teamID))"), "\(output)")
            #expect(output.contains("✓ APNs credential beta: client certificate for com.beta.app, valid "), "\(output)")
            #expect(output.contains("to \(date) (10 days left), private key matches"), "\(output)")
            #expect(output.contains("! APNs credential beta: the client certificate expires on \(date), in 10 days: renew it before then"), "\(output)")
        }
    }

    @Test func checkWithoutATopicReportsAMissingKeyFile() async throws {
        try await withSandbox(logger: logger) { sandbox in
            var environment = sandbox.relayEnvironment()
            environment["APNS_RELAY_APNS_TOKEN_PRIVATE_KEY_FILE"] = "/nonexistent/AuthKey.p8"
            let check = try await runProcess(try RelayProcess.binary().path, ["check", "--skip-kafka"], environment: environment, timeout: .seconds(90))
            let output = check.stdout + check.stderr
            #expect(check.status == 1, "\(output)")
            #expect(output.contains("✗ APNs credential default: cannot read the APNs signing key file '/nonexistent/AuthKey.p8' (apns.token.privateKeyFile)"), "\(output)")
        }
    }
}
