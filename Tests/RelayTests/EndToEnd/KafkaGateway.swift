import Foundation
import TestSupport
import Testing

/// `Tests/peers/kafka_gateway.py`: a Kafka listener that enforces SASL and TLS in front of the sandbox's mock
/// cluster (which has neither), run as its own process. It refuses a wrong secret as a broker does, and counts
/// what it accepted and refused, so that a test can require that authentication really happened.
// @unchecked Sendable: the process is started in init and only signalled afterwards.
final class KafkaGateway: @unchecked Sendable {
    let process = Process()
    /// `host:port` of the gateway's first listener (the bootstrap for clients).
    let bootstrap: String
    /// The OIDC token endpoint, when the gateway runs one.
    let tokenEndpoint: String?
    private let stderrPath: String

    /// - Parameter arguments: the gateway's options after `--upstream` (mechanism, user, files).
    init(upstream: String, _ arguments: [String]) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let stdoutPath = directory.appendingPathComponent("stdout").path
        stderrPath = directory.appendingPathComponent("stderr").path
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [Checkout.root.appendingPathComponent("Tests/peers/kafka_gateway.py").path, "--upstream", upstream] + arguments
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        try startProcess(process)
        var line: String?
        try await eventually("the Kafka gateway prints where it listens", within: .seconds(30)) { [process, stderrPath] in
            guard process.isRunning else {
                throw TestFailure("the Kafka gateway exited: \((try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "")")
            }
            let text = (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? ""
            guard let newline = text.firstIndex(of: "\n") else { return false }
            line = String(text[..<newline])
            return true
        }
        guard let data = line?.data(using: .utf8), let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let bootstrap = object["bootstrap"] as? String else { throw TestFailure("the gateway's first line is not its address: \(line ?? "")") }
        self.bootstrap = bootstrap
        tokenEndpoint = object["tokenEndpoint"] as? String
    }

    /// What the gateway logged (one line per connection's outcome; never a secret).
    var log: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// Sessions the gateway let through after authentication (or, without SASL, the TLS handshake).
    var authenticated: Int { counters.authenticated }
    /// Authentications and TLS handshakes it refused.
    var refused: Int { counters.refused }

    /// The running counters the gateway appends to each line it logs (`… authenticated=3 refused=1`).
    private var counters: (authenticated: Int, refused: Int) {
        guard let line = log.split(separator: "\n").last(where: { $0.contains(" authenticated=") && $0.contains(" refused=") }) else { return (0, 0) }
        func value(_ name: String) -> Int {
            line.split(separator: " ").first { $0.hasPrefix(name + "=") }.flatMap { Int($0.dropFirst(name.count + 1)) } ?? 0
        }
        return (value("authenticated"), value("refused"))
    }

    /// Closes every client connection (as a broker restart does): clients authenticate again.
    func dropConnections() { kill(process.processIdentifier, SIGUSR1) }

    /// SIGTERM, then SIGKILL if it has not exited within 5 s: a stop never blocks the test.
    func stop() {
        process.terminate()
        let deadline = ContinuousClock.now + .seconds(5)
        while process.isRunning, ContinuousClock.now < deadline { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, made with the `openssl` command.
struct TestCertificates {
    let directory: URL
    var ca: String { directory.appendingPathComponent("ca.pem").path }
    var serverCertificate: String { directory.appendingPathComponent("server.pem").path }
    var serverKey: String { directory.appendingPathComponent("server.key").path }
    var clientCertificate: String { directory.appendingPathComponent("client.pem").path }
    var clientKey: String { directory.appendingPathComponent("client.key").path }
    /// A CA that signed neither.
    var otherCA: String { directory.appendingPathComponent("other-ca.pem").path }

    static func make() async throws -> TestCertificates {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kafka-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let certificates = TestCertificates(directory: directory)
        func openssl(_ arguments: [String]) async throws {
            try await runProcess("/usr/bin/openssl", arguments, timeout: .seconds(60), check: true)
        }
        let path = { (name: String) in directory.appendingPathComponent(name).path }
        for ca in ["ca", "other-ca"] {
            try await openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                               "-subj", "/CN=test \(ca)", "-keyout", path("\(ca).key"), "-out", path("\(ca).pem")])
        }
        for (name, extensions) in [("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth"), ("client", "extendedKeyUsage=clientAuth")] {
            try extensions.write(toFile: path("\(name).ext"), atomically: true, encoding: .utf8)
            try await openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=\(name)",
                               "-keyout", path("\(name).key"), "-out", path("\(name).csr")])
            try await openssl(["x509", "-req", "-in", path("\(name).csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                               "-CAcreateserial", "-days", "2", "-extfile", path("\(name).ext"), "-out", path("\(name).pem")])
        }
        return certificates
    }
}
