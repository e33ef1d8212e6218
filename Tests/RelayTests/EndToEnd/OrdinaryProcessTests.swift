import Dispatch
import Foundation
import Glibc
import TestSupport
import Testing

/// The binaries as an operator's shell or a container starts them: as an ordinary user, with SIGPIPE at its
/// default action. This test process runs as root and ignores SIGPIPE (children inherit both), which hid
/// two bugs that `make image-check` found.
@Suite struct OrdinaryProcessTests {
    private let token = String(repeating: "5e", count: 32)

    /// `apns-mock` set TCP_NODELAY at the socket level, which is SO_DEBUG there; only root may set that, so
    /// as any other user it dropped every connection before the TLS handshake.
    @Test func theMockServesTLSAsAnOrdinaryUser() async throws {
        let directory = try makeTemporaryDirectory("mock-unprivileged")
        defer { try? FileManager.default.removeItem(at: directory) }
        chmod(directory.path, 0o777)
        let mock = try RelayProcess.binary().deletingLastPathComponent().appendingPathComponent("apns-mock").path
        var command = [mock, "--port", "0", "--tls-dir", directory.appendingPathComponent("tls").path]
        if getuid() == 0 { command = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + command }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let output = directory.appendingPathComponent("stdout").path
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        try startProcess(process)
        defer { process.terminate(); process.waitUntilExit() }
        var firstLine = ""
        try await eventually("the mock's first line", within: .seconds(30)) {
            firstLine = (try? String(contentsOfFile: output, encoding: .utf8))?.split(separator: "\n").first.map(String.init) ?? ""
            return !firstLine.isEmpty
        }
        let port = try #require(firstLine.split(separator: " ").first { $0.hasPrefix("port=") }.map { String($0.dropFirst(5)) }, "\(firstLine)")
        let ca = directory.appendingPathComponent("tls/ca.pem").path
        let result = try await runProcess("/usr/bin/openssl", ["s_client", "-connect", "127.0.0.1:\(port)", "-alpn", "h2", "-CAfile", ca, "-servername", "localhost"],
                                          timeout: .seconds(30))
        #expect(result.stdout.contains("ALPN protocol: h2"), "TLS with ALPN h2 as user 65534: \(result.stdout.suffix(400))")
    }

    /// A server that closes the connection before the handshake: the client's next write met the reset
    /// socket, and SIGPIPE (at its default action) ended `apns-relay send` without a word (status 13).
    @Test func aDroppedHandshakeIsAnErrorNotASignal() async throws {
        // Accepts and closes every connection at once, unread (as the mock did).
        let listener = try SilentListener()
        listener.acceptAndClose()
        let port = listener.port
        defer { withExtendedLifetime(listener) {} }
        let directory = try makeTemporaryDirectory("sigpipe")
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = TestSigningKey(keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let keyFile = directory.appendingPathComponent("AuthKey.p8").path
        try key.pem.write(toFile: keyFile, atomically: true, encoding: .utf8)
        let environment = [
            "APNS_RELAY_APNS_TOKEN_KEY_ID": key.keyID, "APNS_RELAY_APNS_TOKEN_TEAM_ID": key.teamID,
            "APNS_RELAY_APNS_TOKEN_PRIVATE_KEY_FILE": keyFile,
            "APNS_RELAY_APNS_DEVELOPMENT_HOST": "127.0.0.1", "APNS_RELAY_APNS_DEVELOPMENT_PORT": String(port),
        ]
        let result = try await runProcess("/usr/bin/env", ["--default-signal=PIPE", try RelayProcess.binary().path, "send",
                                                           "--device-token", token, "--topic", "com.example.app",
                                                           "--environment", "development", "--timeout-ms", "3000"],
                                          environment: environment, timeout: .seconds(60))
        #expect(result.status == 3, "exit 3 (no answer), not a signal: status \(result.status), \(result.stdout) \(result.stderr)")
        #expect((result.stdout + result.stderr).contains("no answer:"), "\(result.stdout) \(result.stderr)")
    }
}
