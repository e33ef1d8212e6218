import APNsMock
import Foundation
import TestSupport
import Testing

/// A test CA and a client certificate for one app, made with the openssl CLI: subject UID is the bundle id,
/// as in APNs certificates.
struct TestClientCertificate {
    let caPEM: String
    let certificatePath: String
    let keyPath: String

    static func make(in directory: URL, bundleID: String) async throws -> TestClientCertificate {
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
        return TestClientCertificate(
            caPEM: try String(contentsOfFile: path("ca.pem"), encoding: .utf8),
            certificatePath: path("client.pem"),
            keyPath: path("client.key")
        )
    }
}

/// Mutual TLS: the client certificate's subject UID names the app; its topics are the bundle id plus
/// `.voip` and `.complication`. Certificates are made with the openssl CLI, requests sent with curl.
@Suite struct CertificateAuthenticationTests {
    @Test func certificateConnectionMapsSubjectUIDToTopics() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-mtls-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try await TestClientCertificate.make(in: directory, bundleID: bundleID)
        let fixture = try await MockFixture.start { $0.clientCertificateTrustRootsPEM = certificate.caPEM }
        func curl(_ headers: [String]) async throws -> String {
            var arguments = ["-sS", "--http2", "--cacert", fixture.caPath, "--cert", certificate.certificatePath,
                             "--key", certificate.keyPath, "--max-time", "10", "-w", " %{http_code}",
                             "--data-binary", #"{"aps":{"alert":"cert"}}"#]
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

    /// Broadcast sends and channel management authenticate with the certificate too: the path's bundle id is
    /// the topic it must cover.
    @Test func certificateCoversBroadcastsAndChannelsOfItsAppOnly() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-mock-mtls-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try await TestClientCertificate.make(in: directory, bundleID: bundleID)
        let fixture = try await MockFixture.start {
            $0.clientCertificateTrustRootsPEM = certificate.caPEM
            $0.managementPort = 0
        }
        let management = try #require(fixture.server.managementPort)
        let channelID = try fixture.server.channels.create(bundleID: bundleID, storagePolicy: 1)
        let otherChannel = try fixture.server.channels.create(bundleID: BroadcastSetup.otherApp, storagePolicy: 1)
        func curl(_ method: String, port: Int, _ path: String, _ headers: [String], body: String? = nil) async throws -> String {
            var arguments = ["-sS", "--http2", "--cacert", fixture.caPath, "--cert", certificate.certificatePath,
                             "--key", certificate.keyPath, "--max-time", "10", "-w", " %{http_code}", "-X", method]
            if let body { arguments += ["--data-binary", body] }
            for header in headers { arguments += ["-H", header] }
            arguments.append("https://localhost:\(port)\(path)")
            let result = try await runProcess("/usr/bin/curl", arguments)
            #expect(result.status == 0, "curl: \(result.stderr)")
            return result.stdout
        }
        let broadcast = ["apns-push-type: liveactivity"]
        #expect(try await curl("POST", port: fixture.port, "/4/broadcasts/apps/\(bundleID)", broadcast + ["apns-channel-id: \(channelID)"],
                               body: liveActivityUpdate) == " 200")
        #expect(try await curl("POST", port: fixture.port, "/4/broadcasts/apps/\(BroadcastSetup.otherApp)",
                               broadcast + ["apns-channel-id: \(otherChannel)"], body: liveActivityUpdate)
            == #"{"reason":"TopicDisallowed"} 400"#)
        #expect(try await curl("GET", port: management, "/1/apps/\(bundleID)/all-channels", [])
            == #"{"channels":["\#(channelID)"]} 200"#)
        #expect(try await curl("GET", port: management, "/1/apps/\(BroadcastSetup.otherApp)/all-channels", [])
            == #"{"reason":"TopicDisallowed"} 400"#)
        #expect(try await curl("POST", port: management, "/1/apps/\(bundleID)/channels", [],
                               body: #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#) == " 201")
        #expect(try await fixture.server.waitForAcceptedBroadcasts(count: 1, timeout: .seconds(5)).map(\.channelID) == [channelID])
        #expect(fixture.server.channels.channels(bundleID: bundleID).count == 2)
        await fixture.stop()
    }
}
