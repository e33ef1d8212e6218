import Foundation
import ServiceSupport

/// noida-db (PyPI, pinned in Tests/requirements.txt): one binary that speaks the Kafka protocol, a second
/// broker implementation beside librdkafka's mock cluster. It stores transactional offset commits and
/// fences zombie producers, which the mock does not, so exactly-once is proven on it.
///
/// Its limits (measured; see issue #36): one broker; it answers a fetch at once when it has nothing (every
/// consumer of it spins a core: use it for correctness, never to measure cost); it never aborts a timed-out
/// transaction; it never expires a dead member's session (a killed relay must come back with the same
/// `group.instance.id`).
///
/// Each instance is its own server on a free 127.0.0.1 port with a fresh data directory, removed by `stop()`.
// @unchecked Sendable: `process` is started in init and afterwards only signalled and asked whether it runs.
package final class NoidaBroker: @unchecked Sendable {
    package let bootstrapServers: String
    private let process: Process
    private let exited = TestSignal()
    private let directory: URL
    private let logPath: String

    /// `make test` installs it into `.venv`; a missing one fails the test that needs it.
    ///
    /// The broker binary itself, not `.venv/bin/noida-db`: that is a Python script running the binary as its
    /// child, and a SIGTERM ended the script and left the broker running (each test leaked one).
    package static func executable() throws -> URL {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let lib = root.appendingPathComponent(".venv/lib")
        let pythons = (try? FileManager.default.contentsOfDirectory(atPath: lib.path)) ?? []
        for python in pythons.sorted() where python.hasPrefix("python") {
            let binary = lib.appendingPathComponent("\(python)/site-packages/noida_db/noida-db")
            guard FileManager.default.fileExists(atPath: binary.path) else { continue }
            // The wheel may not keep the executable bit (the script sets it before each run too).
            try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: binary.path)
            return binary
        }
        throw TestFailure("noida-db is not installed in \(lib.path)/python3.*/site-packages/noida_db: `make test` installs it (Tests/requirements.txt), or `.venv/bin/pip install -r Tests/requirements.txt`")
    }

    /// Starts a broker and waits until it accepts connections (it starts in well under a second on a quiet
    /// machine; beside the parallel suite on two cores a Python start took over 20 s once).
    package static func start() async throws -> NoidaBroker {
        let broker = try NoidaBroker(port: try freeLocalPort())
        do {
            try await waitForListener(port: Int(broker.bootstrapServers.split(separator: ":").last!)!, within: .seconds(90))
        } catch {
            let log = broker.log
            await broker.stop()
            throw TestFailure("noida-db did not listen: \(error); its output:\n\(log.suffix(2000))")
        }
        return broker
    }

    private init(port: Int) throws {
        bootstrapServers = "127.0.0.1:\(port)"
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("noida-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        logPath = directory.path + ".log"
        FileManager.default.createFile(atPath: logPath, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process = Process()
        process.executableURL = try Self.executable()
        process.arguments = ["start", "--only", "kafka", "--host", "127.0.0.1", "--kafka-port", String(port), "--data-dir", directory.path]
        process.standardOutput = output
        process.standardError = output
        let exited = self.exited
        process.terminationHandler = { _ in exited.raise() }
        try startProcess(process)
    }

    /// What it printed.
    package var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// SIGTERM (it exits within 2 s), SIGKILL after 5 s; then its data directory and log are removed.
    package func stop() async {
        if process.isRunning {
            process.terminate()
            if await !exited.wait(within: .seconds(5)) { kill(process.processIdentifier, SIGKILL) }
        }
        try? FileManager.default.removeItem(at: directory)
        try? FileManager.default.removeItem(atPath: logPath)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}
