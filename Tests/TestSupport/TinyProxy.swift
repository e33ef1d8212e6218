import Foundation

/// Debian's tinyproxy (an independent HTTP proxy, installed by `make deps-test`) on 127.0.0.1, for the
/// tests of reaching APNs through a proxy.
// @unchecked Sendable: `process` is only started in `start` and stopped in `stop`.
package final class TinyProxy: @unchecked Sendable {
    package let port: Int
    private let process: Process
    private let directory: URL

    /// Starts tinyproxy, optionally requiring Basic authentication, and waits until it accepts connections.
    package static func start(basicAuth: (user: String, password: String)? = nil) async throws -> TinyProxy {
        let executable = ["/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let executable else { throw TestFailure("tinyproxy is not installed (make deps-test installs it)") }
        // tinyproxy cannot listen on port 0: take a free port, and another if it was taken meanwhile.
        for _ in 0..<3 {
            let directory = try makeTemporaryDirectory("tinyproxy")
            let port = try freeLocalPort()
            var config = """
                Port \(port)
                Listen 127.0.0.1
                Timeout 60
                MaxClients 50
                Allow 127.0.0.1
                LogLevel Connect
                LogFile "\(directory.appendingPathComponent("tinyproxy.log").path)"
                PidFile "\(directory.appendingPathComponent("tinyproxy.pid").path)"

                """
            if let basicAuth { config += "BasicAuth \(basicAuth.user) \(basicAuth.password)\n" }
            let configFile = directory.appendingPathComponent("tinyproxy.conf")
            try config.write(to: configFile, atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = ["-d", "-c", configFile.path]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try startProcess(process)
            let proxy = TinyProxy(port: port, process: process, directory: directory)
            do {
                try await waitForListener(port: port, within: .seconds(10))
                if process.isRunning { return proxy }
            } catch {}
            proxy.stop()
        }
        throw TestFailure("tinyproxy did not start listening")
    }

    private init(port: Int, process: Process, directory: URL) {
        self.port = port
        self.process = process
        self.directory = directory
    }

    package var url: String { "http://127.0.0.1:\(port)" }

    /// What tinyproxy logged (its CONNECT lines name each tunnel's target).
    package var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("tinyproxy.log"), encoding: .utf8)) ?? ""
    }

    package func stop() {
        if process.isRunning {
            // SIGKILL: on SIGTERM tinyproxy waits for its tunnels' threads to end, up to its idle timeout.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }
}
