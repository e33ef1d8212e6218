import Foundation
import TestSupport
import Testing

/// The built `apns-relay` binary run as a separate process, as a user runs it.
// @unchecked Sendable: mutated only by the test task that owns it (start, terminate, reading the log).
final class RelayProcess: @unchecked Sendable {
    let process = Process()
    private let output: FileHandle
    let logPath: String
    private let exits: AsyncStream<Int32>

    static func binary() throws -> URL { try BuiltProducts.executable("apns-relay") }

    /// Starts `apns-relay run` with `environment` (APNS_RELAY_* variables) added to this process's.
    init(environment: [String: String]) throws {
        logPath = FileManager.default.temporaryDirectory.appendingPathComponent("relay-\(UUID().uuidString).log").path
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        output = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.executableURL = try Self.binary()
        process.arguments = ["run"]
        // The soak's settings (`APNS_RELAY_SOAK_*`) are the test's, not the relay's: it would refuse them as unknown.
        let inherited = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("APNS_RELAY_SOAK_") }
        process.environment = inherited.merging(environment) { $1 }
        process.standardOutput = output
        process.standardError = output
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        exits = stream
        process.terminationHandler = { process in
            // A death by signal (a crash: SIGSEGV, SIGILL from a trap, SIGABRT) is told apart from an exit
            // status: it is reported as the signal's number negated.
            continuation.yield(process.terminationReason == .uncaughtSignal ? -process.terminationStatus : process.terminationStatus)
            continuation.finish()
        }
        try startProcess(process)
    }

    func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Stops the process (SIGSTOP) as a paused or starved pod is: it neither runs nor exits.
    func stop() { Foundation.kill(process.processIdentifier, SIGSTOP) }

    /// Resumes a stopped process (SIGCONT).
    func resume() { Foundation.kill(process.processIdentifier, SIGCONT) }

    /// Sends SIGTERM and waits for the exit, at most `timeout`.
    /// - Returns: the exit status (minus the signal's number when a signal ended it), or `nil` if it did not
    ///   exit in time (it is then killed).
    func terminate(timeout: Duration) async -> Int32? {
        process.terminate()
        return await exit(within: timeout)
    }

    /// Waits for the process to exit by itself, at most `timeout`.
    /// - Returns: the exit status, or `nil` if it did not exit in time (it is then killed).
    func exit(within timeout: Duration) async -> Int32? {
        let exits = self.exits
        let status = await withTaskGroup(of: Int32?.self) { group in
            group.addTask {
                for await status in exits { return status }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: timeout)  // the deadline, not a wait for the event
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        if status == nil { kill() }
        return status
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    deinit {
        if process.isRunning { Foundation.kill(process.processIdentifier, SIGCONT) }
        if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
        try? output.close()
        try? FileManager.default.removeItem(atPath: logPath)
    }
}
