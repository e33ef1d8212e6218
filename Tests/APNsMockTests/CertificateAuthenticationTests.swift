import APNsMock
import Foundation
import TestSupport
import Testing

/// Mutual TLS: the client certificate's subject UID names the app; its topics are the bundle id plus
/// `.voip` and `.complication`. Certificates are made with the openssl CLI, requests sent with curl.
@Suite struct CertificateAuthenticationTests {
    @Test func certificateConnectionMapsSubjectUIDToTopics() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-mtls-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        let openssl = "/usr/bin/openssl"
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        var step = try await runProcess(openssl, ["req", "-x509"] + ec + ["-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "2", "-subj", "/CN=Test Push CA"])
        #expect(step.status == 0, "\(step.stderr)")
        step = try await runProcess(openssl, ["req"] + ec + ["-keyout", path("client.key"), "-out", path("client.csr"),
                                                           "-subj", "/UID=\(bundleID)/CN=Apple Push Services: \(bundleID)"])
        #expect(step.status == 0, "\(step.stderr)")
        step = try await runProcess(openssl, ["x509", "-req", "-in", path("client.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                                           "-CAcreateserial", "-out", path("client.pem"), "-days", "2"])
        #expect(step.status == 0, "\(step.stderr)")

        let caPEM = try String(contentsOfFile: path("ca.pem"), encoding: .utf8)
        let fixture = try await MockFixture.start { $0.clientCertificateTrustRootsPEM = caPEM }
        func curl(_ headers: [String]) async throws -> String {
            var arguments = ["-sS", "--http2", "--cacert", fixture.caPath, "--cert", path("client.pem"), "--key", path("client.key"),
                             "--max-time", "10", "-w", " %{http_code}", "--data-binary", #"{"aps":{"alert":"cert"}}"#]
            for header in headers { arguments += ["-H", header] }
            arguments.append("https://localhost:\(fixture.port)/3/device/\(deviceToken)")
            let result = try await runProcess("/usr/bin/curl", arguments)
            #expect(result.status == 0, "curl: \(result.stderr)")
            return result.stdout
        }
        #expect(try await curl(["apns-topic: \(bundleID)", "apns-push-type: alert"]) == " 200")
        #expect(try await curl(["apns-push-type: alert"]) == " 200")  // single-app certificate: topic defaults
        #expect(try await curl(["apns-topic: \(bundleID).voip", "apns-push-type: voip"]) == " 200")
        #expect(try await curl(["apns-topic: com.example.other", "apns-push-type: alert"]) == #"{"reason":"TopicDisallowed"} 400"#)
        let accepted = try await fixture.server.waitForAccepted(count: 3, timeout: .seconds(5))
        #expect(accepted.map(\.topic) == [bundleID, bundleID, bundleID + ".voip"])

        // Without a client certificate the TLS handshake fails.
        let anonymous = try await runProcess("/usr/bin/curl", ["-sS", "--http2", "--cacert", fixture.caPath, "--max-time", "10",
                                                            "https://localhost:\(fixture.port)/3/device/\(deviceToken)"])
        #expect(anonymous.status != 0)
        await fixture.stop()
    }
}
